package io.github.verbs4j.netty;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Errno;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventType;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.github.verbs4j.cm.QpInit;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.channel.AbstractChannel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelMetadata;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.ConnectTimeoutException;
import io.netty.channel.EventLoop;
import io.netty.channel.FileRegion;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.socket.ChannelInputShutdownReadComplete;
import io.netty.channel.socket.SocketChannel;
import io.netty.util.UncheckedBooleanSupplier;
import io.netty.util.concurrent.Future;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.AlreadyConnectedException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ConnectionPendingException;
import java.nio.channels.WritableByteChannel;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A Netty channel over one RDMA reliable connection, set up through rdma_cm and addressed by the
 * device's IP address and an rdma_cm port: {@code bootstrap.channel(RdmaSocketChannel.class)} on
 * an event loop group of {@link RdmaIoHandler}.
 *
 * <p><b>On the wire</b>: each side registers a receive ring of {@code RDMA_RING_SLOTS} slots of
 * {@code RDMA_SLOT_SIZE} bytes and posts a receive for every slot; the peer learns both sizes
 * from the connection's private data ({@link WireHandshake}) and starts with one credit per slot.
 * A message fills one slot and carries a 32-bit word: the credits it returns (slots the sender
 * freed and posted again), the FIN of {@link #shutdownOutput()} and the CLOSE of {@link #close()}.
 * Credits ride on data when there is data, or go alone once a quarter of the ring is owed; one
 * credit is kept back for those credit-only messages, so two peers that both run out can always
 * tell each other. The wire ({@link RdmaWireMode}, from the device's transport unless
 * {@link RdmaChannelOption#RDMA_WIRE_MODE} says otherwise): on IB and RoCE an RDMA WRITE with
 * immediate of the payload into the peer's slot, the word and the slot in the immediate; on
 * iWARP, which has no immediate data on WRITE, a SEND of the word as a 4-byte header and the
 * payload into the peer's next posted receive.
 *
 * <p><b>Writes</b> are copied into a registered send ring (one slot per message in flight), unless
 * they lie in a chunk of {@link RdmaByteBufAllocator} (then posted in place and released once
 * their send completed), and posted in one chain per flush; every 16th request is signaled, and a chain's last when
 * something waits for its completion (a buffer sent in place, send slots running short); a message waits
 * in Netty's outbound buffer while the peer gives no credit, so writability follows Netty's
 * water marks, driven by credits. <b>Reads</b> deliver each message as a buffer of the channel's
 * allocator, or with {@link RdmaChannelOption#RDMA_ZERO_COPY_READ} as its receive slot wrapped
 * (reposted on release), honouring {@code autoRead}, {@code read()} and the {@link RecvByteBufAllocator}.
 *
 * <p><b>Connection setup</b> (rdma_cm's address and route resolution, connect, accept) runs on
 * the event loop, as a TCP connect does on Netty's native transports: each step is started
 * without waiting (verbs-cm's {@code CmId.start*}), and the event that ends it, read from the
 * connection's CM event channel when the loop's {@code poll(2)} finds it readable, starts the
 * next. The same channel then reports the established connection's DISCONNECTED.
 */
public final class RdmaSocketChannel extends AbstractChannel implements SocketChannel {

    /**
     * The whole address space, for copies to and from a buffer's native memory by its address:
     * Netty 4.2 on JDK 25 runs without sun.misc.Unsafe, so ByteBuf.writeBytes(ByteBuffer) and
     * getBytes(int, ByteBuffer) make a new DirectByteBuffer per call (TransportAllocationTest).
     * Each copy below is bounded by the buffer's own capacity, checked before it.
     */
    private static final MemorySegment ALL_MEMORY = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaSocketChannel.class);
    private static final ChannelMetadata METADATA = new ChannelMetadata(false, 16);

    /** The bytes before the payload in a slot on the SEND wire: the message word. */
    static final int HEADER = 4;
    // the message word, the same on both wires: the SEND wire's header, WRITE_WITH_IMM's immediate
    static final int CREDIT_MASK = 0x3fff;
    static final int FIN = 1 << 14;
    static final int CLOSE = 1 << 15;
    /** WRITE_WITH_IMM: the receive slot the message was written into, bits 16..31 (slots are at most 65535). */
    static final int SLOT_SHIFT = 16;
    static final long SEND_TAG = 1L << 62;
    /** The id of WRITE_WITH_IMM's unsignaled slot-queue writes: reported only when they fail. */
    private static final long SLOT_QUEUE_WRITE_ID = SEND_TAG | (1L << 61);
    /** An entry of a slot queue: a slot number, 16 bits, big-endian. */
    private static final ValueLayout.OfShort SLOT_ENTRY = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);
    /** Entries of a connecting side's slot queue: the peer's ring is not known yet, and has at most this many slots. */
    private static final int MAX_SLOT_QUEUE = 65535;
    private static final int SIGNAL_EVERY = 16;
    private static final long ACCEPT_TIMEOUT_MILLIS = 10_000;
    private static final long CLOSE_LINGER_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    private final RdmaSocketChannelConfig config;
    private final boolean accepted;

    // made during connection setup, on the loop
    private EventChannel events;
    private CmId id;
    private CompletionQueue cq;
    private QueuePair qp;
    private MemoryRegion recvRegion;
    private ReceiveRing ring;
    private boolean zeroCopyRead;
    private MemoryRegion sendRegion;
    private ReceiveRequest[] receives;
    private SendRequest[] sends;
    private ByteBuffer[] recvViews;
    private ByteBuffer[] sendViews;
    /** Per send slot: the buffer its payload is sent from in place (retained until the send completed), else null. */
    private ByteBuf[] sentInPlace;
    private Completions completions;
    private byte[] peerParameters;
    private int ringSlots;
    private int slotSize;
    private int sendSlots;
    private int sendSlotSize;
    private int maxInline;
    /** The wire this connection uses, resolved from the option and the device at setup. */
    private RdmaWireMode wireMode;
    private boolean writeWithImm;
    /** Bytes before the payload in a slot: {@link #HEADER} on the SEND wire, none with the word in the immediate. */
    private int wireHeader;
    // WRITE_WITH_IMM: the receiver picks which of its slots the sender writes next, in the order it
    // freed them (zero-copy buffers are released in any order), and tells the sender by an RDMA
    // WRITE of the slot numbers into the sender's slot queue, just before the message whose
    // immediate returns those credits. Credits are entries of the queue, read in order.
    /** This side's slot queue: the peer's slots to write next, written by the peer. */
    private MemoryRegion slotQueue;
    private int slotQueueLength;
    /** Entries of the slot queue used: the next message goes to the slot at this count modulo the length. */
    private long slotsTaken;
    /** The slots this side freed, at the positions of the peer's slot queue they are written to. */
    private MemoryRegion freedLog;
    private int peerQueueLength;
    private long peerQueueAddress;
    private int peerQueueRkey;
    private long peerRingAddress;
    private int peerRingRkey;
    /** The peer's first entries of its slot queue are its initial credits, slots 0 on: this side's first freed slot goes after them. */
    private int freedBase;
    /** Slots freed (reposted) since the connection began; {@code freedCount - owed} were returned. */
    private long freedCount;
    /**
     * An entry of the peer's slot queue among those owed (freed, not yet returned) differs from
     * what the queue holds there: the message that returns them writes them first.
     */
    private boolean slotQueueChanged;
    /** Messages preceded by writes into the peer's slot queue: how a test sees that unchanged entries are not written. Loop only. */
    long slotQueueWritesPosted;
    /** Per send slot, the two writes (one, or two at the queue's wrap) of the slot numbers its message returns. */
    private SendRequest[] slotQueueWrites;
    /** The first request of the message {@link #filled} made last: its slot-queue writes, or the message. */
    private SendRequest messageHead;
    /** A message broke the wire's rules (WRITE_WITH_IMM: a slot out of range, no immediate). */
    private IOException wireFailure;

    // loop state
    private volatile IoRegistration registration;
    private RdmaIoHandler handler;
    private volatile boolean open = true;
    private volatile boolean ready;
    private volatile InetSocketAddress local;
    private volatile InetSocketAddress remote;
    /** Where the connection setup stands: each CM event of the connection advances it. */
    private SetupStep setup = SetupStep.NONE;
    /** A client's setup ends by then (System.nanoTime): what is left bounds each rdma_cm step. */
    private long setupDeadline;
    private boolean readPending;
    private boolean inputShutdown;
    private volatile boolean outputShutdown;
    private boolean finPending;
    private boolean writing;
    /** Inside {@link #pollCompletions}: the completion queue was just polled. */
    private boolean polling;
    /** Inside {@link #deliver}'s read loop: credits freed meanwhile go back once, when it ends. */
    private boolean delivering;
    private boolean finReceived;
    private boolean peerGone;
    /** The peer's CLOSE arrived: it closed its end, and writes fail from here on. */
    private boolean closeReceived;
    /** A failed work completion taken from the queue and not yet acted on. */
    private WcStatus failedStatus;
    private int credits;
    private int owed;
    private long sendPosted;
    private long sendCompleted;
    private int[] rxQueue;
    private int[] rxLength;
    private int rxHead;
    private int rxCount;
    private int rxConsumed; // bytes of the head slot already handed to the pipeline
    /** Receive slots out with the application as zero-copy buffers, not yet released. Loop only. */
    private int slotsHeld;
    private ChannelPromise connectPromise;
    private final SlotChannel regionTarget = new SlotChannel();
    /** Ends a setup that takes too long: CONNECT_TIMEOUT_MILLIS for a connect, ACCEPT_TIMEOUT_MILLIS for an accept. */
    private Future<?> setupTimer;
    private final WriteBatch writeBatch = new WriteBatch();
    /** Closed for Netty, the connection not yet released: sends before the CLOSE await their acknowledgement. */
    private boolean lingering;
    private Future<?> lingerTimer;
    /** Chains of data requests that flushes posted: how a test sees that a flush batches. Loop only. */
    long chainsPosted;
    /** Sends whose payload went from a registered chunk in place: how a test sees the path taken. Loop only. */
    long sentWithoutCopy;
    /** Signaled send completions polled (each covers the sends before it): for the benchmark's counts. Loop only. */
    long signaledSendCompletions;
    /** Completion queue polls a write made itself, to see whether the peer closed: for tests and the benchmark. Loop only. */
    long writePolls;
    /** Messages received as RDMA WRITE with immediate: how a test sees the wire used. Loop only. */
    long receivedWithImmediate;
    /** Messages read as their receive slot (zero-copy read), buffers filled by a copy out of a slot, read loops run: for tests and the benchmark. Loop only. */
    long readsInPlace;
    long readsCopied;
    long readLoops;
    /** Credit-only messages sent (credits that no data carried back): for tests and the benchmark. Loop only. */
    long creditOnlyMessages;
    /** {@code ibv_poll_cq} calls on this channel's queue, and those that found nothing: for the benchmark's counts. Loop only. */
    long cqPolls;
    long emptyCqPolls;

    /** A channel to connect ({@code bootstrap.channel(RdmaSocketChannel.class)}). */
    public RdmaSocketChannel() {
        super(null);
        this.config = new RdmaSocketChannelConfig(this);
        this.accepted = false;
    }

    /** A channel for a connection request that {@code parent} took; the id has its own event channel already. */
    RdmaSocketChannel(RdmaServerSocketChannel parent, EventChannel events, CmId id, byte[] peerParameters) {
        super(parent);
        this.config = new RdmaSocketChannelConfig(this);
        this.accepted = true;
        this.events = events;
        this.id = id;
        this.peerParameters = peerParameters;
        this.remote = id.remoteAddress();
        this.local = id.localAddress();
    }

    @Override
    public RdmaServerSocketChannel parent() {
        return (RdmaServerSocketChannel) super.parent();
    }

    @Override
    public RdmaSocketChannelConfig config() {
        return config;
    }

    @Override
    public ChannelMetadata metadata() {
        return METADATA;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public boolean isActive() {
        // an accepted channel too is active once its connection is established, not when it is
        // registered: what channelActive writes is then sent at once, as on an accepted TCP socket
        return open && ready;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return (InetSocketAddress) super.remoteAddress();
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected SocketAddress remoteAddress0() {
        return remote;
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(RdmaUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new RdmaUnsafe();
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        RdmaIoHandler first = connectionElsewhere();
        if (first != null) {
            // Registered again after a deregister, with another loop: a connection (or its setup)
            // has its queue pair and completion queue on the first loop's protection domain and
            // completion channel, confined to that loop's thread, and RC cannot move a live
            // connection to new queues. Netty closes the channel on this failure (register0);
            // doClose hands the connection's close to the first loop.
            promise.setFailure(new IllegalStateException("cannot register " + this + " with " + eventLoop()
                    + ": a connected RDMA channel's queue pair and completion queue belong to the event loop"
                    + " that created them (" + first.executor() + "); only a channel that has not begun to"
                    + " connect can move to another loop (register it with its first loop again instead)"));
            return;
        }
        ((IoEventLoop) eventLoop()).register((RdmaUnsafe) unsafe()).addListener(f -> {
            if (f.isSuccess()) {
                registration = (IoRegistration) f.getNow();
                handler = registration.attachment();
                // rdma_accept is issued before the registration is reported, so that a handler
                // that blocks its loop in channelRegistered cannot hold the peer's connect back
                if (accepted && setup == SetupStep.NONE && !ready && open) {
                    startAccept();
                }
                promise.setSuccess();
            } else {
                promise.setFailure(f.cause());
            }
        });
    }

    @Override
    protected void doDeregister() {
        IoRegistration r = registration;
        if (r != null) {
            registration = null;
            r.cancel();
        }
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        // rdma_cm picks the source from the route; a bind names the source address for resolution
        if (!(localAddress instanceof InetSocketAddress a)) {
            throw new IllegalArgumentException("an RDMA channel binds to an InetSocketAddress, not " + localAddress);
        }
        local = a;
    }

    @Override
    protected void doDisconnect() {
        doClose();
    }

    @Override
    protected void doBeginRead() {
        if (inputShutdown) {
            return;
        }
        // what already arrived is delivered on the loop's next pass (pollCompletions), which
        // comes before the loop may block: no wakeup needed, this runs on the loop
        readPending = true;
    }

    void clearReadPending() {
        EventLoop loop = isRegistered() ? eventLoop() : null;
        if (loop == null || loop.inEventLoop()) {
            readPending = false;
        } else {
            loop.execute(() -> readPending = false);
        }
    }

    @Override
    protected Object filterOutboundMessage(Object msg) {
        if (msg instanceof ByteBuf || msg instanceof FileRegion) {
            return msg;
        }
        throw new UnsupportedOperationException("unsupported message type: " + msg.getClass().getName()
                + " (an RDMA channel writes ByteBufs and FileRegions)");
    }

    // ---------------------------------------------------------------- setup

    /** This side's handshake: its ring, its mode, and for WRITE_WITH_IMM where the peer writes. */
    private byte[] localParameters() {
        return writeWithImm
                ? new WireHandshake(ringSlots, slotSize, wireMode, slotQueueLength, recvRegion.address(),
                        recvRegion.rkey(), slotQueue.address(), slotQueue.rkey()).encode()
                : new WireHandshake(ringSlots, slotSize, wireMode, 0, 0, 0, 0, 0).encode();
    }

    /** The wire mode from the option and the device's transport. On the loop, during setup. */
    private void resolveWireMode() {
        io.github.verbs4j.Device device = id.context().device();
        wireMode = WireHandshake.resolve(config.wireMode(), device.transport(), device.name());
        writeWithImm = wireMode == RdmaWireMode.WRITE_WITH_IMM;
        wireHeader = writeWithImm ? 0 : HEADER;
    }

    /** The receive side: queues, ring, posted receives. On the loop, during setup. */
    private void createQueues() {
        resolveWireMode();
        ringSlots = config.ringSlots();
        slotSize = config.slotSize();
        RdmaIoHandler.Device device = handler.device(id.context());
        int depth = config.sendDepth();
        // WRITE_WITH_IMM: a message may follow up to two writes into the peer's slot queue
        int requestsPerMessage = writeWithImm ? 3 : 1;
        int sendWrs = writeWithImm ? Math.min(depth * requestsPerMessage, id.context().queryDevice().maxQpWr())
                : depth;
        // Confined to the loop, which alone posts, polls, arms and destroys them (releaseResources
        // runs on the loop: a close, a failed setup, the handler's end; a zero-copy buffer
        // released elsewhere is reposted by a task on the loop): its calls skip the close guard's
        // mark (docs/netty.md, "Confined queues")
        cq = id.context().createCq(sendWrs + ringSlots + 1, device.completions, 0).confine();
        handler.connectionOpened(this);
        qp = id.createQueuePair(device.pd, cq, cq, QpInit.defaults().withMaxSendWr(sendWrs)
                .withMaxRecvWr(ringSlots).withMaxSendSge(2).withMaxInlineData(config.inlineSize())).confine();
        maxInline = qp.capabilities().maxInlineData();
        sendSlots = Math.min(depth, qp.capabilities().maxSendWr() / requestsPerMessage);
        recvRegion = writeWithImm
                ? device.pd.allocate((long) ringSlots * slotSize, Access.LOCAL_WRITE, Access.REMOTE_WRITE)
                : device.pd.allocate((long) ringSlots * slotSize, Access.LOCAL_WRITE);
        ring = new ReceiveRing(recvRegion, ringSlots, device);
        zeroCopyRead = config.zeroCopyRead();
        receives = new ReceiveRequest[ringSlots];
        recvViews = new ByteBuffer[ringSlots];
        rxQueue = new int[ringSlots];
        rxLength = new int[ringSlots];
        if (writeWithImm) {
            // an entry per slot of the peer's ring, the most credits the peer gives: an accepting
            // side knows its ring from the request, a connecting side makes room for the largest
            slotQueueLength = accepted ? WireHandshake.decode(peerParameters).slots() : MAX_SLOT_QUEUE;
            // filled once the peer's ring is known (createSendRing): the peer writes into it
            // only after this side's first messages
            slotQueue = device.pd.allocate(2L * slotQueueLength, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        }
        MemorySegment ring = recvRegion.segment();
        for (int i = 0; i < ringSlots; i++) {
            // WRITE_WITH_IMM: a receive takes only the immediate, the bytes are written into the slot
            receives[i] = writeWithImm ? ReceiveRequest.withMaxSge(1).id(i).sgeCount(0)
                    : ReceiveRequest.withMaxSge(1).id(i).local(recvRegion, (long) i * slotSize, slotSize);
            recvViews[i] = ring.asSlice((long) i * slotSize, slotSize).asByteBuffer();
            qp.postRecv(receives[i]);
        }
        completions = cq.completions(64);
    }

    /** The send side, once the peer's ring is known. On the loop, during setup. */
    private void createSendRing(byte[] peer) {
        WireHandshake h = WireHandshake.decode(peer);
        if (h.mode() != wireMode) {
            throw new IllegalStateException(WireHandshake.mismatch(wireMode, h.mode()));
        }
        sendSlotSize = h.slotSize();
        if (writeWithImm) {
            // Both queues are used modulo a multiple of the ring whose slots they carry, and start
            // as that ring's slots in order, repeated: the initial credits are the peer's slots 0
            // on, and a receiver that frees its slots in the order they were written (every
            // copying read) frees at each position the slot already there, so it writes nothing
            // (slotQueueWrites). Each side computes both lengths from the same two numbers.
            slotQueueLength = WireHandshake.usedQueueEntries(slotQueueLength, h.slots());
            fillInRingOrder(slotQueue.segment(), slotQueueLength, h.slots());
            // slots beyond the smaller of the peer's ring and this side's queue are never used
            credits = Math.min(h.slots(), slotQueueLength);
            peerQueueLength = WireHandshake.usedQueueEntries(h.queueLength(), ringSlots);
            freedBase = Math.min(ringSlots, peerQueueLength);
            peerQueueAddress = h.queueAddress();
            peerQueueRkey = h.queueRkey();
            peerRingAddress = h.ringAddress();
            peerRingRkey = h.ringRkey();
            // what the peer's queue holds, position by position: what it starts as, then what this
            // side wrote there
            freedLog = qp.protectionDomain().allocate(2L * peerQueueLength);
            fillInRingOrder(freedLog.segment(), peerQueueLength, ringSlots);
            slotQueueWrites = new SendRequest[2 * sendSlots];
            for (int i = 0; i < slotQueueWrites.length; i++) {
                slotQueueWrites[i] = SendRequest.rdmaWrite().id(SLOT_QUEUE_WRITE_ID).signaled(false);
            }
        } else {
            credits = h.slots();
        }
        sendRegion = qp.protectionDomain().allocate((long) sendSlots * sendSlotSize);
        sends = new SendRequest[sendSlots];
        sentInPlace = new ByteBuf[sendSlots];
        sendViews = new ByteBuffer[sendSlots];
        MemorySegment ring = sendRegion.segment();
        for (int i = 0; i < sendSlots; i++) {
            sends[i] = writeWithImm ? SendRequest.rdmaWriteWithImm(0).sgeCount(0)
                    : SendRequest.send().local(sendRegion, (long) i * sendSlotSize, HEADER);
            sendViews[i] = ring.asSlice((long) i * sendSlotSize, sendSlotSize).asByteBuffer();
        }
    }

    /**
     * The step of connection setup a channel is in: each starts an rdma_cm call without waiting,
     * and the event it ends with, read from the connection's CM event channel when the loop finds
     * it readable, starts the next ({@link #advanceSetup}). Loop only.
     */
    private enum SetupStep {
        /** No setup runs: not begun, or ended (established, failed or closed). */
        NONE,
        /** {@code rdma_resolve_addr} issued: ADDR_RESOLVED next, then the route. */
        RESOLVING_ADDRESS,
        /** {@code rdma_resolve_route} issued: ROUTE_RESOLVED next, then the queues and the connect. */
        RESOLVING_ROUTE,
        /** {@code rdma_connect} issued with this side's handshake: ESTABLISHED next, with the peer's. */
        CONNECTING,
        /** {@code rdma_accept} issued with this side's handshake: ESTABLISHED next. */
        ACCEPTING
    }

    /** On the loop: starts a client's setup with address resolution; its events do the rest. */
    private void startConnect(InetSocketAddress to, InetSocketAddress from, int timeoutMillis) {
        // rdma_cm's own limits on the resolutions are what is left of CONNECT_TIMEOUT_MILLIS (whose
        // timer closes the channel in any case), or a day without one, as an unbounded connect
        setupDeadline = System.nanoTime() + (timeoutMillis > 0 ? TimeUnit.MILLISECONDS.toNanos(timeoutMillis)
                : TimeUnit.DAYS.toNanos(1));
        try {
            events = EventChannel.create();
            id = events.createId(PortSpace.TCP);
            setup = SetupStep.RESOLVING_ADDRESS;
            id.startResolveAddress(from, to, stepTimeout());
        } catch (RuntimeException e) {
            setupFailed(e);
            return;
        }
        handler.pollSetChanged(); // the loop watches this connection's CM event channel from now on
    }

    /**
     * On the loop, once the channel is registered: refuses a request of the other wire, or
     * creates the queues and accepts; ESTABLISHED on the connection's event channel (which the
     * server channel moved the request's id to) makes it active, within {@link #ACCEPT_TIMEOUT_MILLIS}.
     */
    private void startAccept() {
        setup = SetupStep.ACCEPTING;
        try {
            refuseOtherWire();
            createQueues();
            id.startAccept(ConnectParameters.defaults().withPrivateData(localParameters()));
            local = id.localAddress();
        } catch (RuntimeException e) {
            setupFailed(e);
            return;
        }
        try {
            setupTimer = eventLoop().schedule(() -> {
                if (setup == SetupStep.ACCEPTING) {
                    setupFailed(VerbsException.timedOut("rdma_accept", "ESTABLISHED from " + remote,
                            Duration.ofMillis(ACCEPT_TIMEOUT_MILLIS)));
                }
            }, ACCEPT_TIMEOUT_MILLIS, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException e) {
            // the loop is ending: its handler closes this channel as it is destroyed
        }
        // its ESTABLISHED is read on a later pass of the loop, after the registration is reported
        handler.pollSetChanged();
    }

    /**
     * On the accepting side, before anything is made: a connection request of the other wire mode
     * (or none this version reads) is rejected with this side's handshake, so that the peer's
     * {@code ConnectException} can name both modes.
     */
    private void refuseOtherWire() {
        RdmaWireMode peer = WireHandshake.modeOf(peerParameters);
        try {
            resolveWireMode();
        } catch (UnsupportedOperationException e) {
            rejectQuietly(null);
            throw e;
        }
        if (peer != wireMode) {
            rejectQuietly(new WireHandshake(config.ringSlots(), config.slotSize(), wireMode, 0, 0, 0, 0, 0).encode());
            throw peer == null ? new IllegalStateException("refused a connection request from " + remote
                    + ": it carries no ring parameters of this wire format (" + (peerParameters == null ? 0
                    : peerParameters.length) + " bytes of private data), not an RDMA Netty channel of this version")
                    : new IllegalStateException("refused a connection request from " + remote + ": "
                    + WireHandshake.mismatch(wireMode, peer));
        }
    }

    private void rejectQuietly(byte[] privateData) {
        try {
            id.reject(privateData);
        } catch (RuntimeException e) {
            logger.debug("rejecting a connection request on {}", this, e);
        }
    }

    /**
     * On the loop, when the connection's CM event channel is readable during setup: each event
     * advances the setup; events after ESTABLISHED (a peer that left at once) are the connection's.
     */
    private void setupEvents() {
        try {
            CmEvent e;
            while (setup != SetupStep.NONE && events != null && (e = events.next(Duration.ZERO)) != null) {
                advanceSetup(e);
            }
        } catch (RuntimeException ex) {
            if (setup != SetupStep.NONE) {
                setupFailed(ex);
            } else {
                throw ex;
            }
        }
        if (ready) {
            cmReadable();
        }
    }

    /** On the loop: the event that ends the current step starts the next, or ends the setup. */
    private void advanceSetup(CmEvent e) {
        if (e.id() != id) {
            logger.debug("{}: an event of another id during setup: {}", this, e);
            return;
        }
        SetupStep step = setup;
        CmEventType awaited = switch (step) {
            case RESOLVING_ADDRESS -> CmEventType.ADDR_RESOLVED;
            case RESOLVING_ROUTE -> CmEventType.ROUTE_RESOLVED;
            case CONNECTING, ACCEPTING -> CmEventType.ESTABLISHED;
            case NONE -> null;
        };
        if (awaited == null) {
            return;
        }
        if (e.type() != awaited) {
            setupFailed(setupEventFailure(e, awaited));
            return;
        }
        switch (step) {
            case RESOLVING_ADDRESS -> {
                setup = SetupStep.RESOLVING_ROUTE;
                id.startResolveRoute(stepTimeout());
            }
            case RESOLVING_ROUTE -> {
                createQueues();
                setup = SetupStep.CONNECTING;
                id.startConnect(ConnectParameters.defaults().withPrivateData(localParameters()));
            }
            case CONNECTING -> {
                createSendRing(e.privateData());
                local = id.localAddress();
                InetSocketAddress peer = id.remoteAddress();
                if (peer != null) {
                    remote = peer;
                }
                setup = SetupStep.NONE;
                connected(null);
            }
            case ACCEPTING -> {
                createSendRing(peerParameters);
                setup = SetupStep.NONE;
                accepted(null);
            }
            case NONE -> {
            }
        }
    }

    /** What is left of the setup's time, for rdma_cm's limit on a step; at least 1 ms. */
    private Duration stepTimeout() {
        return Duration.ofNanos(Math.max(TimeUnit.MILLISECONDS.toNanos(1), setupDeadline - System.nanoTime()));
    }

    /** On the loop: the setup failed; releases what it made and fails the connect (or the accepted channel). */
    private void setupFailed(Throwable t) {
        setup = SetupStep.NONE;
        releaseResources();
        if (accepted) {
            accepted(t);
        } else {
            connected(connectFailure(t, remote, wireMode));
        }
    }

    /**
     * The failure of a setup step that ended with {@code e} instead of {@code awaited}: on the
     * connecting side a {@link ConnectException} naming the event and its status ("Connection
     * refused" for REJECTED, with both wire modes when the peer refused this one; "Network is
     * unreachable" for ADDR_ERROR, ROUTE_ERROR and UNREACHABLE), a
     * {@link ConnectTimeoutException} when a resolution ran out of the time it was given (what
     * was left of {@code CONNECT_TIMEOUT_MILLIS}).
     */
    private Throwable setupEventFailure(CmEvent e, CmEventType awaited) {
        CmEventType type = e.type();
        if (accepted) {
            return new ConnectException("accepting the connection from " + remote + " failed: " + e.describe()
                    + " instead of " + awaited);
        }
        if ((type == CmEventType.ADDR_ERROR || type == CmEventType.ROUTE_ERROR) && Errno.ETIMEDOUT.is(e.errno())) {
            return new ConnectTimeoutException("connection timed out: " + remote + " (" + e.describe() + ")");
        }
        RdmaWireMode peerMode = type == CmEventType.REJECTED ? WireHandshake.modeOf(e.privateData()) : null;
        return new ConnectException(switch (type) {
            case REJECTED -> "Connection refused: " + remote + " (" + e.describe() + ")" + (peerMode != null
                    && wireMode != null && peerMode != wireMode ? ": " + WireHandshake.mismatch(wireMode, peerMode) : "");
            case ADDR_ERROR, ROUTE_ERROR, UNREACHABLE -> "Network is unreachable: " + remote + " (" + e.describe() + ")";
            default -> "connection to " + remote + " failed: " + e.describe() + " instead of " + awaited;
        });
    }

    private static Throwable connectFailure(Throwable t, InetSocketAddress to, RdmaWireMode wireMode) {
        if (t instanceof UnsupportedOperationException || t instanceof ConnectException) {
            // what this side cannot do (WRITE_WITH_IMM on iWARP), or a CM event's answer: the message says why
            return t;
        }
        if (t instanceof VerbsException v && v.is(Errno.ETIMEDOUT)) {
            ConnectTimeoutException c = new ConnectTimeoutException("connection timed out: " + to);
            c.initCause(t);
            return c;
        }
        if (t instanceof VerbsException v && v.is(Errno.ECONNREFUSED)) {
            // iWARP connects over TCP: rdma_connect itself fails when nobody listens there
            ConnectException c = new ConnectException("Connection refused: " + to + " (" + v.getMessage() + ")");
            c.initCause(t);
            return c;
        }
        if (t instanceof VerbsException v && (v.is(Errno.ENETUNREACH) || v.is(Errno.EHOSTUNREACH)
                || v.is(Errno.EADDRNOTAVAIL) || v.is(Errno.ENODEV))) {
            ConnectException c = new ConnectException("Network is unreachable: " + to + " (" + v.getMessage() + ")");
            c.initCause(t);
            return c;
        }
        ConnectException c = new ConnectException("connection to " + to + " failed: " + t);
        c.initCause(t);
        return c;
    }

    /** Whether the connection setup still runs: how a test sees that an aborted setup ended. Loop only. */
    boolean settingUp() {
        return setup != SetupStep.NONE;
    }

    private void cancelSetupTimer() {
        if (setupTimer != null) {
            setupTimer.cancel(false);
            setupTimer = null;
        }
    }

    /** On the loop: the client's setup ended. */
    private void connected(Throwable failure) {
        cancelSetupTimer();
        ChannelPromise promise = connectPromise;
        connectPromise = null;
        if (failure == null && (!open || promise == null || promise.isDone())) {
            // closed or timed out meanwhile: nobody wants this connection any more
            releaseResources();
            return;
        }
        if (failure != null) {
            if (promise != null && !promise.isDone()) {
                // closed before the promise fails: whoever waits on it sees a closed channel
                unsafe().close(voidPromise());
                promise.tryFailure(failure);
            }
            return;
        }
        goLive();
        boolean promiseSet = promise.trySuccess();
        pipeline().fireChannelActive();
        if (!promiseSet) {
            unsafe().close(voidPromise());
        }
    }

    /** On the loop: the server side's accept ended. */
    private void accepted(Throwable failure) {
        cancelSetupTimer();
        if (failure == null && !open) {
            releaseResources();
            return;
        }
        if (failure != null) {
            if (failure instanceof IllegalStateException || failure instanceof UnsupportedOperationException) {
                // refused for its wire mode or its handshake: the message says why
                logger.warn("{}", failure.getMessage());
            } else {
                logger.debug("accepting a connection on {} failed", this, failure);
            }
            unsafe().close(voidPromise());
            return;
        }
        goLive();
        pipeline().fireChannelActive();
    }

    private void goLive() {
        ready = true;
        handler.pollSetChanged();
        // what was written, and a FIN asked for (shutdownOutput in channelActive of an accepted
        // channel, whose outbound buffer is then gone), before the connection was established
        flushPending();
    }

    // ---------------------------------------------------------------- the loop's work

    private int pollCompletions() {
        if (!ready) {
            return 0;
        }
        polling = true;
        try {
            return pollCompletions0();
        } finally {
            polling = false;
        }
    }

    private int pollCompletions0() {
        int n = takeCompletions();
        if (failedStatus != null || wireFailure != null) {
            IOException cause = wireFailure != null ? wireFailure : new IOException("RDMA connection to " + remote
                    + " failed: work completion " + failedStatus);
            failedStatus = null;
            wireFailure = null;
            completionFailed(cause);
            return Math.max(n, 1);
        }
        int work = n;
        // data waits for a read to be requested; the peer's FIN, once all data before it is read,
        // is delivered as Netty's transports deliver end of input: whether or not a read is pending
        if ((readPending && rxCount > 0) || (finReceived && rxCount == 0 && !inputShutdown && open)) {
            deliver();
            work++;
        }
        if (n > 0) {
            if (ready && !outputShutdownForGood()) {
                flushPending();
            }
            returnCredits();
        }
        return work;
    }

    /**
     * Takes what the completion queue holds into the channel's state (received slots, freed send
     * slots, the peer's FIN or CLOSE, a failed completion in {@link #failedStatus}) and hands
     * nothing to the pipeline, so that a write may call it too.
     *
     * @return the number of completions polled
     */
    private int takeCompletions() {
        int n = cq.poll(completions);
        cqPolls++;
        if (n == 0) {
            emptyCqPolls++;
            return 0;
        }
        for (int i = 0; i < n; i++) {
            Completion c = completions.get(i);
            long wr = c.wrId();
            if (c.status() != WcStatus.SUCCESS) {
                if (peerGone) {
                    continue; // the peer has left: its queue pair answers no more, the data here is still read
                }
                failedStatus = c.status();
                return n;
            }
            if ((wr & SEND_TAG) != 0) {
                if (wr != SLOT_QUEUE_WRITE_ID) {
                    signaledSendCompletions++;
                    sendsCompleted((wr & ~SEND_TAG) + 1); // releases the buffers sent in place
                }
            } else if (writeWithImm) {
                int word = c.immediate();
                int slot = word >>> SLOT_SHIFT;
                if (!c.hasImmediate() || slot >= ringSlots || c.byteLength() > slotSize) {
                    wireFailure = new IOException("RDMA connection to " + remote + " broke the WRITE_WITH_IMM wire: "
                            + (c.hasImmediate() ? "slot " + slot + " of " + ringSlots + ", " + c.byteLength()
                            + " bytes" : "a " + c.opcode() + " without immediate data"));
                    return n;
                }
                receivedWithImmediate++;
                received(slot, word, c.byteLength());
            } else {
                int slot = (int) wr;
                received(slot, recvRegion.segment().get(ValueLayout.JAVA_INT_UNALIGNED, (long) slot * slotSize),
                        c.byteLength() - HEADER);
            }
        }
        return n;
    }

    /**
     * Whether the peer closed its end (its CLOSE, a disconnect or a failed completion) as far as
     * the completion queue tells now. A write asks this before it posts: the loop may not have
     * polled since the CLOSE arrived (a handler that blocks the loop, as one writing again in
     * channelActive after the peer closed), and a TCP socket fails such a write too.
     */
    private boolean peerClosed() {
        // inside the loop's pass over this channel's completions (a write from channelRead or
        // channelReadComplete, as an echo's) the queue was polled just now: no second poll
        if (!polling && !closeReceived && !peerGone && failedStatus == null && wireFailure == null) {
            writePolls++;
            takeCompletions();
        }
        return closeReceived || peerGone || failedStatus != null || wireFailure != null;
    }

    private boolean outputShutdownForGood() {
        return unsafe().outboundBuffer() == null && !finPending;
    }

    private void completionFailed(IOException cause) {
        if (!open) {
            return;
        }
        peerGone = true;
        pipeline().fireExceptionCaught(cause);
        unsafe().close(voidPromise());
    }

    /** A message of {@code payload} bytes in {@code slot}, its word {@code header} (credits, FIN, CLOSE). */
    private void received(int slot, int header, int payload) {
        credits += header & CREDIT_MASK;
        if (payload > 0 && !inputShutdown) {
            rxQueue[(rxHead + rxCount) % ringSlots] = slot;
            rxLength[slot] = payload;
            rxCount++;
        } else {
            repost(slot);
        }
        if ((header & (FIN | CLOSE)) != 0) {
            finReceived = true;
        }
        if ((header & CLOSE) != 0) {
            closeReceived = true;
        }
    }

    /**
     * A zero-copy buffer was released (on any thread): on the loop, its slot is posted again and
     * its credit owed to the peer, unless the connection is gone meanwhile, and the buffer waits
     * for the slot's next message; the ring is let go in any case, and freed with its last holder.
     */
    void slotReleased(ReceiveSlotBuf buf) {
        EventLoop loop = connectionLoop();
        if (loop.inEventLoop()) {
            slotReturned(buf);
            return;
        }
        try {
            loop.execute(() -> slotReturned(buf));
        } catch (RejectedExecutionException e) {
            buf.ring().release(); // the loop has ended, and the connection with it
        }
    }

    private void slotReturned(ReceiveSlotBuf buf) {
        ReceiveRing from = buf.ring();
        if (from == ring) {
            slotsHeld--;
            if (ready && open) {
                // kept before the repost: the slot's next message is handed over in this object
                from.idle[buf.slot()] = buf;
                // after shutdownInput too: what the peer sends then is dropped, its credits still go back
                repost(buf.slot());
                if (!delivering) {
                    // a buffer released inside the read loop (in channelRead) waits for the loop's
                    // end, where all it freed goes back at once: as many credit-only messages as
                    // copying reads cost, not one per quarter ring released
                    returnCredits();
                }
            }
        }
        from.release();
    }

    /**
     * Fills the first {@code entries} of a slot queue (or of this side's copy of the peer's) with
     * the slots of a ring of {@code ringSlots} in order, repeated: what both queues start as
     * ({@link WireHandshake#usedQueueEntries}).
     */
    private static void fillInRingOrder(MemorySegment queue, int entries, int ringSlots) {
        for (int i = 0; i < entries; i++) {
            queue.set(SLOT_ENTRY, 2L * i, (short) (i % ringSlots));
        }
    }

    /**
     * The receive ring's memory region and who holds it: the channel until it releases its
     * connection, and each zero-copy buffer until it is released. Freed with the last of them,
     * so that a buffer read after its channel closed still reads the bytes it was given.
     */
    static final class ReceiveRing {
        final MemoryRegion region;
        /** The loop's resources whose protection domain {@link #region} lies in: held until the region is closed. */
        private final RdmaIoHandler.Device device;
        final AtomicInteger holders = new AtomicInteger(1);
        /**
         * Per slot, its zero-copy buffer while the slot is posted (made on the slot's first
         * zero-copy message); null while the application holds it, so that the application's
         * reference is the only one and a buffer dropped unreleased is collected and reported as
         * a leak. On the loop.
         */
        final ReceiveSlotBuf[] idle;

        ReceiveRing(MemoryRegion region, int slots, RdmaIoHandler.Device device) {
            this.region = region;
            this.idle = new ReceiveSlotBuf[slots];
            this.device = device;
            device.hold();
        }

        void release() {
            if (holders.decrementAndGet() == 0) {
                RdmaSocketChannel.close(region);
                // the domain closes here if its loop ended before this last holder let go
                device.release();
            }
        }
    }

    private void repost(int slot) {
        if (qp.tryPostRecv(receives[slot]) == 0) {
            if (writeWithImm) {
                // where the peer's slot queue takes it: the credit that returns it carries it there,
                // unless that entry holds this slot already
                long position = (freedBase + freedCount) % peerQueueLength;
                if ((freedLog.segment().get(SLOT_ENTRY, 2 * position) & 0xffff) != slot) {
                    freedLog.segment().set(SLOT_ENTRY, 2 * position, (short) slot);
                    slotQueueChanged = true;
                }
            }
            freedCount++;
            owed++;
        }
    }

    /**
     * Whether the read loop goes on. More data is known to be there (the caller checked the
     * queue), so the handle is told so rather than left to guess it from a buffer that a short
     * message did not fill.
     */
    private static boolean continueReading(RecvByteBufAllocator.Handle allocHandle) {
        return allocHandle instanceof RecvByteBufAllocator.ExtendedHandle extended
                ? extended.continueReading(UncheckedBooleanSupplier.TRUE_SUPPLIER)
                : allocHandle.continueReading();
    }

    /** Hands queued messages to the pipeline as far as reading is requested. */
    private void deliver() {
        ChannelPipeline pipeline = pipeline();
        if (rxCount > 0) {
            RecvByteBufAllocator.Handle allocHandle = unsafe().recvBufAllocHandle();
            allocHandle.reset(config);
            readLoops++;
            delivering = true;
            try {
                readLoop(pipeline, allocHandle);
            } finally {
                delivering = false;
            }
            allocHandle.readComplete();
            pipeline.fireChannelReadComplete();
            returnCredits();
        }
        deliverEndOfInput(pipeline);
    }

    /** One read loop's messages to the pipeline, as far as the handle allows. */
    private void readLoop(ChannelPipeline pipeline, RecvByteBufAllocator.Handle allocHandle) {
        // one read loop: each buffer is the allocator's (its size is the handle's guess) and
        // takes what it can of the head message; a message larger than the buffer is
        // handed on over several reads, as a stream socket's bytes are
        do {
            int slot = rxQueue[rxHead];
            int left = rxLength[slot] - rxConsumed;
            int from = wireHeader + rxConsumed;
            ByteBuf buf;
            int n;
            if (zeroCopyRead && slotsHeld < ringSlots / 2 && rxConsumed == 0) {
                // the slot itself, whole: reposted when the buffer is released (slotReleased);
                // a message partly copied already (half the ring was held) is copied to its end
                n = left;
                // the slot's own buffer object, recycled (no object per message): a
                // reference kept past its release reads the slot's next message, as with
                // Netty's pooled buffers (ReceiveSlotBuf)
                buf = slotBuf(slot).message(n);
                readsInPlace++;
                allocHandle.attemptedBytesRead(n);
                ring.holders.incrementAndGet();
                slotsHeld++;
                rxHead = (rxHead + 1) % ringSlots; // rxConsumed stays 0: the message was taken whole
                rxCount--;
            } else {
                // a copy: zero copy is off, or half the ring is held by the application, which
                // then must not take more, or the peer could run out of credits for good
                buf = allocHandle.allocate(config.getAllocator());
                n = Math.min(left, buf.writableBytes());
                allocHandle.attemptedBytesRead(buf.writableBytes());
                if (buf.hasMemoryAddress()) {
                    // n <= writableBytes: within the buffer's capacity
                    MemorySegment.copy(recvRegion.segment(), (long) slot * slotSize + from, ALL_MEMORY,
                            buf.memoryAddress() + buf.writerIndex(), n);
                    buf.writerIndex(buf.writerIndex() + n);
                } else {
                    ByteBuffer view = recvViews[slot];
                    view.limit(from + n).position(from);
                    buf.writeBytes(view);
                }
                consumed(slot, n, left);
                readsCopied++;
            }
            allocHandle.lastBytesRead(n);
            allocHandle.incMessagesRead(1);
            readPending = false;
            pipeline.fireChannelRead(buf);
        } while (rxCount > 0 && open && continueReading(allocHandle));
    }

    /** Messages received and not yet handed to the pipeline (a read not requested yet): for tests. */
    int unreadMessages() {
        return rxCount;
    }

    /** The zero-copy buffer of {@code slot}, which is posted: made on its first use, or a new one if the allocator changed. */
    private ReceiveSlotBuf slotBuf(int slot) {
        ReceiveSlotBuf buf = ring.idle[slot];
        ring.idle[slot] = null;
        ByteBufAllocator alloc = config.getAllocator();
        if (buf == null || buf.alloc() != alloc) {
            // the slot's payload area: the messages start after the wire's header
            buf = new ReceiveSlotBuf(alloc, recvViews[slot].duplicate().clear().position(wireHeader), this, ring, slot);
        }
        return buf;
    }

    /** Takes {@code n} bytes of the head slot, which had {@code left}: the slot is reposted once all are taken. */
    private void consumed(int slot, int n, int left) {
        if (n == left) {
            rxConsumed = 0;
            rxHead = (rxHead + 1) % ringSlots;
            rxCount--;
            repost(slot);
        } else {
            rxConsumed += n;
        }
    }

    private void deliverEndOfInput(ChannelPipeline pipeline) {
        if (finReceived && rxCount == 0 && open && !inputShutdown) {
            inputShutdown = true;
            if (config.isAllowHalfClosure()) {
                pipeline.fireUserEventTriggered(ChannelInputShutdownEvent.INSTANCE);
                pipeline.fireUserEventTriggered(ChannelInputShutdownReadComplete.INSTANCE);
            } else {
                unsafe().close(voidPromise());
            }
        }
    }

    /** Returns owed credits alone once a quarter of the ring is owed and no data carries them. */
    private void returnCredits() {
        // inside doWrite the next send slot may already be filled and not yet posted; doWrite
        // returns what is owed once its requests are posted
        if (writing || !ready || !open || peerGone || owed < Math.max(2, ringSlots / 4) || credits < 1 || !sendSlotFree()) {
            return;
        }
        fill(0, null, 0, 0, true);
        post(messageHead, 1);
        creditOnlyMessages++;
    }

    /**
     * The sends before {@code upTo} completed (a signaled one covers all before it): the buffers
     * they sent in place are released.
     */
    private void sendsCompleted(long upTo) {
        for (long s = sendCompleted; s < upTo; s++) {
            int slot = (int) (s % sendSlots);
            ByteBuf buf = sentInPlace[slot];
            if (buf != null) {
                sentInPlace[slot] = null;
                buf.release();
            }
        }
        sendCompleted = upTo;
    }

    /** Releases the buffers of sends that will never complete: the queue pair is gone. */
    private void releaseSentInPlace() {
        ByteBuf[] held = sentInPlace;
        if (held == null) {
            return;
        }
        for (int i = 0; i < held.length; i++) {
            if (held[i] != null) {
                ByteBuf buf = held[i];
                held[i] = null;
                buf.release();
            }
        }
    }

    /** The loop this channel is registered with; null before its registration. Loop only. */
    RdmaIoHandler ioHandler() {
        return handler;
    }

    /** The inline size the device granted the queue pair: for tests. Loop only. */
    int maxInline() {
        return maxInline;
    }

    /** Buffers retained by sends in flight that carry them in place: for tests. Loop only. */
    int sentInPlaceHeld() {
        int n = 0;
        if (sentInPlace != null) {
            for (ByteBuf b : sentInPlace) {
                n += b == null ? 0 : 1;
            }
        }
        return n;
    }

    private boolean sendSlotFree() {
        return sendPosted - sendCompleted < sendSlots;
    }

    /**
     * Writes one message into the next send slot: header (owed credits and {@code flags}) and
     * {@code length} bytes of {@code buf}; returns its request, not yet posted.
     */
    private SendRequest fill(int flags, ByteBuf buf, int index, int length, boolean signaled) {
        if (length > 0) {
            if (buf.hasMemoryAddress()) {
                Objects.checkFromIndexSize(index, length, buf.capacity());
                MemorySegment.copy(ALL_MEMORY, buf.memoryAddress() + index, sendRegion.segment(),
                        (sendPosted % sendSlots) * sendSlotSize + wireHeader, length);
            } else {
                ByteBuffer view = sendViews[(int) (sendPosted % sendSlots)];
                view.limit(wireHeader + length).position(wireHeader);
                buf.getBytes(index, view);
            }
        }
        return filled(flags, length, signaled);
    }

    /**
     * Completes the message of the next send slot, whose payload of {@code length} bytes is in
     * place: its word (owed credits and {@code flags}) goes into the slot's header (SEND) or the
     * immediate (WRITE_WITH_IMM, after the writes of the returned slots into the peer's queue:
     * {@link #messageHead} is the first request to post). Returns the message's request, not yet posted.
     */
    private SendRequest filled(int flags, int length, boolean signaled) {
        int slot = (int) (sendPosted % sendSlots);
        int give = Math.min(owed, CREDIT_MASK);
        long offset = (long) slot * sendSlotSize;
        SendRequest r = sends[slot];
        if (writeWithImm) {
            messageHead = slotQueueWrites(slot, give, r);
            int peerSlot = takePeerSlot();
            r.immediate(give | flags | peerSlot << SLOT_SHIFT)
                    .remote(peerRingAddress + (long) peerSlot * sendSlotSize, peerRingRkey);
            if (length > 0) {
                r.local(sendRegion, offset, length).inline(length <= maxInline);
            } else {
                r.inline(false).sgeCount(0);
            }
        } else {
            sendRegion.segment().set(ValueLayout.JAVA_INT_UNALIGNED, offset, give | flags);
            int size = HEADER + length;
            r.local(sendRegion, offset, size).inline(size <= maxInline);
            messageHead = r;
        }
        owed -= give;
        credits--;
        r.id(SEND_TAG | sendPosted).signaled(signaled || sendPosted % SIGNAL_EVERY == SIGNAL_EVERY - 1).next(null);
        sendPosted++;
        return r;
    }

    /**
     * WRITE_WITH_IMM: the writes of the {@code give} slots this message returns into the peer's
     * slot queue, chained before {@code message} (two at the queue's wrap); {@code message} itself
     * when it returns none. The queue's entries reach the peer before the immediate that counts
     * them, as a reliable connection executes its requests in order.
     */
    private SendRequest slotQueueWrites(int slot, int give, SendRequest message) {
        if (give == 0 || !slotQueueChanged) {
            // the peer's queue holds these slots at these positions already
            return message;
        }
        // all owed entries written now: none changed since; a part of them: the rest go next time
        slotQueueChanged = give < owed;
        slotQueueWritesPosted++;
        long start = (freedBase + freedCount - owed) % peerQueueLength;
        int first = (int) Math.min(give, peerQueueLength - start);
        SendRequest a = slotQueueWrites[2 * slot];
        a.local(freedLog, 2 * start, 2 * first).remote(peerQueueAddress + 2 * start, peerQueueRkey)
                .inline(2 * first <= maxInline);
        if (first == give) {
            a.next(message);
        } else {
            int rest = give - first;
            SendRequest b = slotQueueWrites[2 * slot + 1];
            b.local(freedLog, 0, 2 * rest).remote(peerQueueAddress, peerQueueRkey).inline(2 * rest <= maxInline)
                    .next(message);
            a.next(b);
        }
        return a;
    }

    /** WRITE_WITH_IMM: the peer's slot the next message goes to, from this side's slot queue. */
    private int takePeerSlot() {
        int peerSlot = slotQueue.segment().get(SLOT_ENTRY, 2 * (slotsTaken % slotQueueLength)) & 0xffff;
        slotsTaken++;
        return peerSlot;
    }

    /**
     * The next send slot carries only the header; the payload, {@code length} bytes at
     * {@code offset} of a registered chunk, is a second scatter/gather entry, read by the device in
     * place. {@code owner} is retained until the send completed.
     */
    private SendRequest inPlace(ByteBuf owner, MemoryRegion chunk, long offset, int length) {
        int slot = (int) (sendPosted % sendSlots);
        SendRequest r = filled(0, 0, false);
        if (writeWithImm) {
            r.inline(false).local(chunk, offset, length);
        } else {
            r.inline(false).sge(1, chunk, offset, length).sgeCount(2);
        }
        sentInPlace[slot] = owner.retain();
        sentWithoutCopy++;
        return r;
    }

    /**
     * Copies up to {@code max} bytes of a file region into the payload of the next send slot and
     * returns how many: there is no sendfile onto an RDMA queue pair, so the region is copied, as
     * Netty's transports without zero-copy file transfer do.
     */
    private int copyRegion(FileRegion region, int max) throws IOException {
        ByteBuffer view = sendViews[(int) (sendPosted % sendSlots)];
        view.limit(wireHeader + max).position(wireHeader);
        regionTarget.into = view;
        try {
            while (view.hasRemaining() && region.transferred() < region.count()) {
                if (region.transferTo(regionTarget, region.transferred()) <= 0) {
                    break;
                }
            }
        } finally {
            regionTarget.into = null;
        }
        return view.position() - wireHeader;
    }

    /** A channel over the payload of a send slot: takes what fits, never more. */
    private static final class SlotChannel implements WritableByteChannel {
        ByteBuffer into;

        @Override
        public int write(ByteBuffer src) {
            int n = Math.min(src.remaining(), into.remaining());
            if (n == 0) {
                return 0;
            }
            int limit = src.limit();
            src.limit(src.position() + n);
            into.put(src);
            src.limit(limit);
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() {
        }
    }

    private void post(SendRequest head, int count) {
        int rc = qp.tryPostSend(head);
        if (rc != 0) {
            throw new IllegalStateException(new IOException("ibv_post_send of " + count + " requests failed: "
                    + Errno.describe(rc)));
        }
    }

    private void flushPending() {
        if (!ready || !open) {
            return;
        }
        ChannelOutboundBuffer out = unsafe().outboundBuffer();
        if (out != null && !out.isEmpty()) {
            ((RdmaUnsafe) unsafe()).flushNow();
        } else if (finPending) {
            sendFin();
        }
    }

    @Override
    protected void doWrite(ChannelOutboundBuffer in) throws Exception {
        if (!ready) {
            return; // flushed once the connection is established
        }
        if (peerClosed()) {
            // as a TCP socket's write after the peer's close (EPIPE/ECONNRESET): the flushed
            // messages fail, and Netty closes the channel or, without AUTO_CLOSE, shuts its
            // output down, while what the peer sent before its close is still read
            throw new IOException("RDMA connection to " + remote + " was closed by the peer");
        }
        writing = true;
        try {
            doWrite0(in);
        } finally {
            writing = false;
        }
        // slots that buffers released meanwhile gave back (a received buffer written on, released
        // once sent): their credits go now, even if no data follows to carry them
        if (open && ready) {
            returnCredits();
        }
    }

    /**
     * Posts what the outbound buffer holds in as few chains as credits and send slots allow:
     * normally one per flush, a file region ending its chain. The messages leave the outbound
     * buffer (and their promises complete) only after their chain was posted, since a listener
     * may close the channel or shut its output down ({@code writeAndFlush(..).addListener(CLOSE)}),
     * and the CLOSE or FIN it posts must follow the data.
     */
    private void doWrite0(ChannelOutboundBuffer in) throws Exception {
        WriteBatch batch = writeBatch;
        while (open) { // a listener of a completed write may have closed the channel
            batch.reset();
            in.forEachFlushedMessage(batch);
            if (batch.count > 0) {
                // a chain is signaled only when something waits for its completion: a buffer
                // sent in place (released then), or send slots running short (half of them
                // unacknowledged); otherwise the periodic signaled request (every SIGNAL_EVERY-th)
                // acknowledges the copied sends before it, saving a completion per message
                if (batch.inPlace || sendPosted - sendCompleted >= Math.max(1, sendSlots / 2)) {
                    batch.tail.signaled(true);
                }
                post(batch.head, batch.count);
                chainsPosted++;
            }
            boolean removed = removeWritten(in, batch);
            if (batch.failure != null) {
                throw batch.failure;
            }
            if (batch.count == 0 && !removed) {
                break; // out of credits or send slots, or nothing left
            }
        }
        if (finPending && open && ready) {
            sendFin();
        }
    }

    /**
     * Takes the messages a posted batch carried out of the outbound buffer: the buffers it sent
     * whole, the part it sent of the next one, and the progress of its file region. Each removal
     * completes a promise whose listener may close the channel, which empties the buffer.
     *
     * @return whether anything left the buffer
     */
    private boolean removeWritten(ChannelOutboundBuffer in, WriteBatch batch) {
        boolean removed = false;
        long bytes = batch.bufferBytes;
        while (true) {
            if (!(in.current() instanceof ByteBuf buf)) {
                break;
            }
            int readable = buf.readableBytes();
            if (readable <= bytes) {
                bytes -= readable;
                if (readable > 0) {
                    in.progress(readable);
                }
                in.remove();
                removed = true;
            } else {
                if (bytes > 0) {
                    buf.skipBytes((int) bytes);
                    in.progress(bytes);
                }
                break;
            }
        }
        FileRegion region = batch.region;
        if (region != null && in.current() == region) {
            if (batch.regionBytes > 0) {
                in.progress(batch.regionBytes);
            }
            if (region.transferred() >= region.count()) {
                in.remove();
                removed = true;
            }
        }
        return removed;
    }

    /**
     * Fills send slots from the flushed messages without taking any out of the outbound buffer,
     * as long as credits and slots last; a file region is the last message of its batch. Reused
     * from flush to flush, so a flush allocates nothing.
     */
    private final class WriteBatch implements ChannelOutboundBuffer.MessageProcessor {
        SendRequest head;
        SendRequest tail;
        int count;
        /** Bytes of the buffers sent by this batch, counted from the first buffer's reader index. */
        long bufferBytes;
        FileRegion region;
        long regionBytes;
        Exception failure;
        /** Whether the batch sends a buffer in place, which is held until its send completed. */
        boolean inPlace;

        void reset() {
            head = tail = null;
            count = 0;
            inPlace = false;
            bufferBytes = 0;
            region = null;
            regionBytes = 0;
            failure = null;
        }

        /** Appends the message {@code r} that {@link #filled} made last, after the requests that precede it. */
        private void append(SendRequest r) {
            if (tail == null) {
                head = messageHead;
            } else {
                tail.next(messageHead);
            }
            tail = r;
            count++;
        }

        /** Whether another message may be filled: the last credit is kept for a credit-only message. */
        private boolean room() {
            return credits >= 2 && sendSlotFree();
        }

        @Override
        public boolean processMessage(Object msg) {
            int maxPayload = sendSlotSize - wireHeader;
            if (msg instanceof FileRegion r) {
                region = r;
                try {
                    while (r.transferred() < r.count() && room()) {
                        int n = copyRegion(r, (int) Math.min(r.count() - r.transferred(), maxPayload));
                        if (n == 0) {
                            break; // nothing more could be read from the region now
                        }
                        append(filled(0, n, false));
                        regionBytes += n;
                    }
                } catch (IOException | RuntimeException e) {
                    // what was filled before is still posted, so that the send ring stays in step
                    failure = e;
                }
                return false;
            }
            ByteBuf buf = (ByteBuf) msg;
            int readable = buf.readableBytes();
            MemoryRegion chunk = null;
            long offset = 0;
            // a payload that fits inline is copied: the request then carries it (the device
            // reads no memory for it) and the buffer is released at once; with the registered
            // allocator as the default, small writes would otherwise lose inline
            if (readable > 0 && readable + wireHeader > maxInline && buf.isDirect() && RdmaByteBufAllocator.anyChunks()
                    && buf.nioBufferCount() == 1) {
                // by the buffer's own address where it has one: a segment of its NIO view per
                // write is an object (48 B) that escape analysis does not always remove
                long address = buf.hasMemoryAddress() ? buf.memoryAddress() + buf.readerIndex()
                        : MemorySegment.ofBuffer(buf.internalNioBuffer(buf.readerIndex(), readable)).address();
                RdmaByteBufAllocator.Chunk c = RdmaByteBufAllocator.chunkOf(address, readable);
                if (c != null) {
                    try {
                        chunk = c.region(qp.protectionDomain());
                        offset = address - c.address();
                    } catch (RuntimeException e) {
                        // not registrable now (the device's limits): this buffer is copied
                        logger.debug("registering a chunk of {} for {}", buf.alloc(), RdmaSocketChannel.this, e);
                    }
                }
            }
            int sent = 0;
            while (sent < readable && room()) {
                int n = Math.min(readable - sent, maxPayload);
                if (chunk != null) {
                    append(inPlace(buf, chunk, offset + sent, n));
                    inPlace = true;
                } else {
                    append(fill(0, buf, buf.readerIndex() + sent, n, false));
                }
                sent += n;
            }
            bufferBytes += sent;
            return sent == readable;
        }
    }

    private void sendFin() {
        if (credits >= 1 && sendSlotFree()) {
            finPending = false;
            fill(FIN, null, 0, 0, true);
            post(messageHead, 1);
        }
    }

    @Override
    protected void doShutdownOutput() {
        outputShutdown = true;
        finPending = true;
        // inside doWrite (a write's listener shuts the output down) the FIN waits for the sends
        // that doWrite has filled and not yet posted, so that it follows the data
        if (ready && !writing) {
            sendFin();
        }
    }

    private void cmReadable() {
        if (events == null || events.isClosed()) {
            return;
        }
        CmEvent e;
        while ((e = events.next(Duration.ZERO)) != null) {
            CmEventType type = e.type();
            if (type == CmEventType.DISCONNECTED || type == CmEventType.DEVICE_REMOVAL || type.isError()) {
                peerGone = true;
                // what arrived before the peer left is still read, as a TCP socket's data before
                // its EOF: the disconnect is the end of input once the queue is read. The loop
                // hands CM events over before it polls the queues, so the peer's last messages
                // may still sit unpolled in the completion queue: take them first
                drainCompletions();
                if (rxCount > 0 && open && !inputShutdown) {
                    finReceived = true;
                    if (readPending) {
                        deliver();
                    }
                    return;
                }
                if (open) {
                    unsafe().close(voidPromise());
                }
                return;
            }
        }
    }

    /**
     * Polls the completion queue until it is empty (bounded: a queue holds at most the ring's
     * receives and the sends in flight), for a disconnect that must not overtake the data before it.
     */
    private void drainCompletions() {
        for (int i = 0; i < 4 * ringSlots && open && ready; i++) {
            if (pollCompletions() == 0) {
                break;
            }
        }
    }

    // ---------------------------------------------------------------- close

    @Override
    protected void doClose() {
        if (!open) {
            return;
        }
        open = false;
        if (connectPromise != null) {
            connectPromise.tryFailure(new java.nio.channels.ClosedChannelException());
            connectPromise = null;
        }
        RdmaIoHandler first = connectionElsewhere();
        if (first != null) {
            // a registration with another loop was refused (doRegister) and Netty closes the
            // channel there: the connection's queues are the first loop's, which closes it
            try {
                first.executor().execute(this::closeConnection);
            } catch (RejectedExecutionException e) {
                // that loop ended, and released the connection as it did (releaseAtLoopEnd)
            }
            return;
        }
        closeConnection();
    }

    /**
     * The handler of the loop that holds this channel's connection (or its setup) when the calling
     * thread is not that loop's, else null: a registration with another loop ({@link #doRegister})
     * and the close Netty then runs there ({@link #doClose}) ask it.
     */
    private RdmaIoHandler connectionElsewhere() {
        RdmaIoHandler h = handler;
        return h != null && id != null && !h.executor().isExecutorThread(Thread.currentThread()) ? h : null;
    }

    /** The loop this channel's connection is on: the loop whose handler made it, or the channel's. */
    private EventLoop connectionLoop() {
        RdmaIoHandler h = handler;
        return h != null && h.executor() instanceof EventLoop loop ? loop : eventLoop();
    }

    /** {@link #doClose}'s work, on the connection's loop: tells the peer, lingers or releases. */
    private void closeConnection() {
        if (setup != SetupStep.NONE) {
            // destroying the id cancels what rdma_cm still has pending (a resolution, a connect's
            // REQ, an accept); rdma_destroy_id may wait for the CM's own thread (softrdma's: tens
            // of ms, more under load), so the close is reported first and the release is the
            // loop's next task, as a cancelled connect closes at once on Netty's transports
            setup = SetupStep.NONE;
            cancelSetupTimer();
            EventLoop loop = connectionLoop();
            if (loop.isShuttingDown()) {
                releaseResources(); // a task now might never run
            } else {
                try {
                    loop.execute(this::releaseResources);
                } catch (RejectedExecutionException e) {
                    releaseResources();
                }
            }
            if (handler != null) {
                handler.pollSetChanged();
            }
            return;
        }
        boolean wasReady = ready;
        ready = false;
        // the channel is closed for Netty from here on (closeFuture, channelInactive); what the
        // peer still has to acknowledge is waited for by the loop, not here
        if (!(wasReady && !peerGone && startLinger())) {
            releaseResources();
        }
        if (handler != null) {
            handler.pollSetChanged();
        }
    }

    /**
     * Tells the peer (CLOSE) and, while sends posted before it are not yet acknowledged, leaves
     * the release to the loop: rdma_disconnect moves the queue pair to ERR, which would drop
     * them. The loop polls the queue among its lingering closes and releases it once those sends
     * completed, or when a timer of 500 ms fires, whichever comes first.
     *
     * @return whether the release waits
     */
    private boolean startLinger() {
        try {
            if (credits >= 1 && sendSlotFree()) {
                fill(FIN | CLOSE, null, 0, 0, true);
                post(messageHead, 1);
            }
        } catch (RuntimeException e) {
            logger.debug("telling the peer of {} that it closes", this, e);
            return false;
        }
        if (sendCompleted >= sendPosted || handler == null) {
            return false;
        }
        lingering = true;
        handler.linger(this);
        try {
            lingerTimer = connectionLoop().schedule(this::finishClose, CLOSE_LINGER_NANOS, TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // the loop is ending: its handler releases what still lingers as it is destroyed
        }
        return true;
    }

    /**
     * On the loop, while the close lingers: takes the queue's completions and releases the
     * connection once every send was acknowledged or one failed (the peer left).
     *
     * @return whether the close finished
     */
    boolean pollLinger() {
        if (!lingering) {
            return true;
        }
        try {
            int n = cq.poll(completions);
            for (int i = 0; i < n; i++) {
                Completion c = completions.get(i);
                if (c.status() != WcStatus.SUCCESS) {
                    sendCompleted = sendPosted; // nothing more will be acknowledged
                    break;
                }
                if ((c.wrId() & SEND_TAG) != 0 && c.wrId() != SLOT_QUEUE_WRITE_ID) {
                    sendsCompleted((c.wrId() & ~SEND_TAG) + 1);
                }
                // a receive: the peer's data after this side closed, dropped as a closed socket's
            }
        } catch (RuntimeException e) {
            logger.debug("polling the completions of {} as it closes", this, e);
            sendCompleted = sendPosted;
        }
        if (sendCompleted < sendPosted) {
            return false;
        }
        finishClose();
        return true;
    }

    /**
     * The wire this connection uses ({@code WRITE_WITH_IMM} or {@code SEND}), resolved from
     * {@link RdmaChannelOption#RDMA_WIRE_MODE} and the device's transport when the connection was
     * set up; null before. A channel closed after its setup keeps reporting it.
     */
    public RdmaWireMode wireMode() {
        return wireMode;
    }

    /** Sends posted whose completion was not polled yet (unsignaled ones wait for a later signaled one): for tests. Loop only. */
    long unacknowledgedSends() {
        return sendPosted - sendCompleted;
    }

    /** The connection's queue pair, null before the setup made it or after the release: for tests. Loop only. */
    QueuePair queuePair() {
        return qp;
    }

    /** The connection's completion queue, as {@link #queuePair()}: for tests. Loop only. */
    CompletionQueue completionQueue() {
        return cq;
    }

    /** Receive slots held by the application as zero-copy buffers: for tests. Loop only. */
    int slotsHeld() {
        return slotsHeld;
    }

    /** Whether this closed channel's connection still waits for its last sends' acknowledgement: for tests. Loop only. */
    boolean releasePending() {
        return lingering;
    }

    /** On the loop, before it blocks: a lingering close's completions wake it. */
    void armLinger() {
        if (lingering) {
            cq.requestNotify(false);
        }
    }

    /** On the loop: ends a lingering close (its sends were acknowledged, or time ran out) and releases the connection. */
    void finishClose() {
        if (!lingering) {
            return;
        }
        lingering = false;
        if (lingerTimer != null) {
            lingerTimer.cancel(false);
            lingerTimer = null;
        }
        handler.unlinger(this);
        releaseResources();
        handler.pollSetChanged();
    }

    /**
     * On the ending loop whose handler made this channel's queues, when the channel still holds
     * them (it was deregistered from the loop and neither registered again nor closed): the
     * connection is released with its loop (its queues are the loop thread's), and the channel,
     * no loop's any more, reads as closed.
     */
    void releaseAtLoopEnd() {
        open = false;
        ready = false;
        setup = SetupStep.NONE;
        cancelSetupTimer();
        if (lingering) {
            finishClose();
        } else {
            releaseResources();
        }
    }

    /** Disconnects and destroys whatever of the connection exists. Any thread that owns them. */
    private void releaseResources() {
        if (handler != null && cq != null) {
            handler.connectionReleased(this);
        }
        CmId i = id;
        if (i != null) {
            try {
                if (qp != null && !i.isDisconnected()) {
                    i.disconnect();
                }
            } catch (RuntimeException e) {
                logger.debug("rdma_disconnect of {}", this, e);
            }
            close(i);
        }
        close(cq);
        // the queue pair is destroyed: nothing reads the buffers of sends still in flight
        releaseSentInPlace();
        if (ring != null) {
            ring.release();
        } else {
            close(recvRegion);
        }
        close(sendRegion);
        close(slotQueue);
        close(freedLog);
        close(events);
        id = null;
        cq = null;
        qp = null;
        recvRegion = null;
        ring = null;
        sendRegion = null;
        slotQueue = null;
        freedLog = null;
        events = null;
    }

    private static void close(AutoCloseable c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (Exception e) {
            logger.warn("releasing {} of an RDMA channel", c, e);
        }
    }

    // ---------------------------------------------------------------- DuplexChannel

    @Override
    public boolean isInputShutdown() {
        return inputShutdown || !isActive();
    }

    @Override
    public boolean isOutputShutdown() {
        return outputShutdown || !isActive();
    }

    @Override
    public boolean isShutdown() {
        return isInputShutdown() && isOutputShutdown();
    }

    @Override
    public ChannelFuture shutdownOutput() {
        return shutdownOutput(newPromise());
    }

    @Override
    public ChannelFuture shutdownOutput(ChannelPromise promise) {
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            ((AbstractUnsafe) unsafe()).shutdownOutput(promise);
        } else {
            loop.execute(() -> ((AbstractUnsafe) unsafe()).shutdownOutput(promise));
        }
        return promise;
    }

    @Override
    public ChannelFuture shutdownInput() {
        return shutdownInput(newPromise());
    }

    @Override
    public ChannelFuture shutdownInput(ChannelPromise promise) {
        EventLoop loop = eventLoop();
        if (loop.inEventLoop()) {
            shutdownInput0(promise);
        } else {
            loop.execute(() -> shutdownInput0(promise));
        }
        return promise;
    }

    private void shutdownInput0(ChannelPromise promise) {
        // what is queued and what still comes is dropped; its slots go back to the peer as credits
        inputShutdown = true;
        rxConsumed = 0;
        while (rxCount > 0) {
            int slot = rxQueue[rxHead];
            rxHead = (rxHead + 1) % ringSlots;
            rxCount--;
            repost(slot);
        }
        if (ready) {
            returnCredits();
        }
        promise.setSuccess();
    }

    @Override
    public ChannelFuture shutdown() {
        return shutdown(newPromise());
    }

    @Override
    public ChannelFuture shutdown(ChannelPromise promise) {
        shutdownOutput().addListener(out -> shutdownInput().addListener(in -> {
            Throwable cause = out.cause() != null ? out.cause() : in.cause();
            if (cause == null) {
                promise.setSuccess();
            } else {
                promise.setFailure(cause);
            }
        }));
        return promise;
    }

    private final class RdmaUnsafe extends AbstractUnsafe implements RdmaIoHandle {

        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            // not made uncancellable, as Netty's NIO transport does not: a pending connect is
            // cancelled by cancelling its promise (the listener below closes the channel)
            if (promise.isDone() || !ensureOpen(promise)) {
                return;
            }
            if (accepted || ready) {
                promise.setFailure(new AlreadyConnectedException());
                return;
            }
            if (connectPromise != null) {
                promise.setFailure(new ConnectionPendingException());
                return;
            }
            if (!(remoteAddress instanceof InetSocketAddress to)) {
                promise.setFailure(new IllegalArgumentException(
                        "an RDMA channel connects to an InetSocketAddress (the device's IP and an rdma_cm port), not "
                                + remoteAddress));
                return;
            }
            if (to.isUnresolved()) {
                promise.setFailure(new java.nio.channels.UnresolvedAddressException());
                return;
            }
            InetSocketAddress from = localAddress instanceof InetSocketAddress a ? a : local;
            connectPromise = promise;
            remote = to;
            int timeoutMillis = config.getConnectTimeoutMillis();
            if (timeoutMillis > 0) {
                setupTimer = eventLoop().schedule(() -> {
                    ChannelPromise p = connectPromise;
                    if (p != null && !p.isDone()) {
                        // closed before the promise fails: whoever waits on it sees a closed channel
                        connectPromise = null;
                        close(voidPromise());
                        p.tryFailure(new ConnectTimeoutException("connection timed out after "
                                + timeoutMillis + " ms: " + to));
                    }
                }, timeoutMillis, TimeUnit.MILLISECONDS);
            }
            promise.addListener(f -> {
                if (f.isCancelled()) {
                    cancelSetupTimer();
                    connectPromise = null;
                    close(voidPromise());
                }
            });
            startConnect(to, from, timeoutMillis);
        }

        void flushNow() {
            super.flush0();
        }

        @Override
        protected void flush0() {
            if (!ready) {
                return;
            }
            super.flush0();
        }

        @Override
        public int pollCompletions() {
            return RdmaSocketChannel.this.pollCompletions();
        }

        @Override
        public void armCompletions() {
            if (ready) {
                cq.requestNotify(false);
            }
        }

        @Override
        public int cmFd() {
            return events != null && (ready || setup != SetupStep.NONE) ? events.fd() : -1;
        }

        @Override
        public void cmReadable() {
            if (setup != SetupStep.NONE) {
                setupEvents();
            } else if (ready) {
                RdmaSocketChannel.this.cmReadable();
            }
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }
}
