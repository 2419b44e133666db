package io.github.verbs4j.netty;

/**
 * How an {@link RdmaSocketChannel} moves its messages ({@link RdmaChannelOption#RDMA_WIRE_MODE}).
 * Both ends of a connection must use the same mode: the accepting side refuses a connection
 * request of the other mode, and the connecting side's {@code ConnectException} names both.
 */
public enum RdmaWireMode {
    /**
     * {@link #WRITE_WITH_IMM} on InfiniBand and RoCE devices, {@link #SEND} on iWARP devices,
     * from the device's transport. The default.
     */
    AUTO,
    /**
     * Each message is an RDMA WRITE with immediate data straight into a receive slot of the peer
     * (its ring's address and rkey come with the connection's private data); the immediate carries
     * the slot, the returned credits and the FIN and CLOSE flags, the completion's byte count the
     * length. The receiver posts receives without buffers, only to take the immediates. Not on
     * iWARP, which has no immediate data on RDMA WRITE.
     */
    WRITE_WITH_IMM,
    /** Each message is a SEND of a 4-byte header and the payload into the peer's next posted receive slot. Any device. */
    SEND
}
