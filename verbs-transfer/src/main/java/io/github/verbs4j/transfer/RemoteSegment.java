package io.github.verbs4j.transfer;

/**
 * A peer's segment as learnt by {@link TransferPeer#lookup}: the requests of a {@link Batch}
 * name one as their remote side, and are checked against its descriptor before they are posted.
 */
public final class RemoteSegment {

    final TransferPeer peer;
    private final SegmentDescriptor descriptor;

    RemoteSegment(TransferPeer peer, SegmentDescriptor descriptor) {
        this.peer = peer;
        this.descriptor = descriptor;
    }

    /** The connection the segment is reached through. */
    public TransferPeer peer() {
        return peer;
    }

    /** The descriptor the peer published. */
    public SegmentDescriptor descriptor() {
        return descriptor;
    }

    /** Its size in bytes. */
    public long length() {
        return descriptor.length();
    }

    /**
     * The same segment with another descriptor (for example a forged rkey): requests to it are
     * still bounds-checked against {@code descriptor}, and the peer refuses what it does not own.
     */
    public RemoteSegment withDescriptor(SegmentDescriptor descriptor) {
        return new RemoteSegment(peer, descriptor);
    }

    @Override
    public String toString() {
        return "RemoteSegment[" + descriptor + " via " + peer.address() + "]";
    }
}
