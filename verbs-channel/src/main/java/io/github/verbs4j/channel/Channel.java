package io.github.verbs4j.channel;

import io.github.verbs4j.CloseState;
import io.github.verbs4j.Closer;
import io.github.verbs4j.Completion;
import io.github.verbs4j.Deadline;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.RdmaException;
import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.cm.CmId;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * A reliable, ordered message channel over one RC queue pair. Messages are written with RDMA
 * WRITE_WITH_IMM into a ring of slots in the receiver's memory (on iWARP, which has no immediate
 * data, with a plain RDMA WRITE followed by a 4-byte SEND: {@link ChannelOptions.Notification});
 * the receiver reads them in place ({@link Message}) and gives the slots back, and the sender
 * learns of free slots through credits. docs/channel.md describes the protocol.
 *
 * <pre>{@code
 * try (ChannelGroup group = ChannelGroup.create(ChannelOptions.defaults());
 *      Channel ch = group.connect(new InetSocketAddress("10.0.0.2", 7471), Duration.ofSeconds(5))) {
 *     ch.send(request);                                  // blocks while the peer's ring is full
 *     try (Message reply = ch.receive(Duration.ofSeconds(1))) { ... }
 * }
 * }</pre>
 *
 * <p><b>Sending</b>: {@link #send} and {@link #offer} copy the message into a registered staging
 * buffer laid out like the peer's ring and post it, or, while {@link ChannelOptions#writesInFlight()}
 * WRITEs are outstanding, leave it to be carried with the messages after it in one WRITE when
 * the next one completes. They return once the message is staged: {@link #close()} drains what
 * is staged before it ends the channel. A message takes {@code ceil((8 + length) / slotSize)}
 * consecutive slots of the peer's ring; at most {@link #maxMessageSize()} bytes.
 * {@link #send(int, MessageWriter)} and {@link #offer(int, MessageWriter, long, TimeUnit)} skip
 * the copy: the application writes the message straight into the staging buffer.
 *
 * <p><b>Failure</b>: when the peer goes away without closing, every blocked and later
 * operation throws {@link PeerLostException}; messages already in the ring are still delivered
 * first. When the peer closes cleanly, {@link #receive} returns what it sent and then throws
 * {@link ChannelClosedException}.
 *
 * <p><b>Waiting</b>: a thread that waits in {@link #send}, {@link #offer} or {@link #receive}
 * polls the group's completion queue itself, up to {@link ChannelOptions#spinPolls()} polls in a
 * row that find nothing, and hands what it finds to the group's channels; then it blocks on the
 * channel's monitor. With the group's polling thread (the default), that thread stands down
 * while an application thread polls and takes over when it stops, at once when a thread is
 * blocked: a message that comes within the spin reaches its receiver without a hand-off
 * between threads, and threads that do not wait still see their channels move.
 *
 * <p><b>Application polling</b> ({@link ChannelOptions#applicationPolling()}): the thread that
 * waits in {@link #send}, {@link #offer}, {@link #receive} or {@link #close()} polls the group's
 * completion queue itself (each of them also polls once, so {@code offer(m, 0)} and
 * {@code receive(0, unit)} make progress too: a send that has its credits polls after its
 * post, off the message's path), saving the hand-off from a polling thread. The
 * channel moves only while some thread is in one of its group's operations: a peer's messages
 * are acknowledged by the transport regardless, but credits, completed WRITEs and a lost peer
 * are noticed at the next call. A waiting thread holds the channel's lock while it spins
 * ({@link ChannelOptions#spinPolls()} empty polls, then a poll every millisecond; with
 * {@link ChannelOptions#parkAfterSpin()} first polls between short parks of 16 us growing to
 * 256 us, about 1 ms in all), so the use
 * it suits is one thread per channel, such as request and response from one thread; other
 * threads of the same channel wait their turn.
 *
 * <p><b>Allocation</b>: none per message in steady state on the sending and receiving threads
 * (the {@code Duration} overloads aside, whose argument the caller allocates); the group's
 * polling thread allocates only when it blocks on the completion channel.
 *
 * <p><b>Thread-safety</b>: thread-safe; messages from concurrent senders are each delivered
 * whole, in the order their {@code send} calls took the channel's lock.
 */
public final class Channel implements AutoCloseable {

    static final int HEADER = 8;
    static final int EXTRA_RECVS = 16;
    static final ValueLayout.OfInt LE_INT = ValueLayout.JAVA_INT.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfInt LE_INT_UNALIGNED = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Immediate: a control word (credits, close) rather than data. */
    static final int IMM_CONTROL = 0x8000_0000;
    /** Immediate of a control word: the peer closes (no message follows). */
    static final int IMM_FIN = 0x4000_0000;
    /** Immediate of data: the ring wrapped before these slots (the rest of it was skipped). */
    static final int IMM_WRAP = 0x4000_0000;
    /** Low 30 bits: the slot count of data, the freed-slot counter of a control word. */
    static final int COUNT_MASK = 0x3FFF_FFFF;
    /**
     * Immediate of data: one message without its header (docs/channel.md, "One message, no
     * header"): its length is the WRITE's byte count, its first byte at the start of the slot;
     * the low 29 bits ({@link #BARE_CREDIT_MASK}) are the sender's freed-slot counter that the
     * header would have carried. Sent only with immediate data, to a peer that tells
     * {@link #TAKES_BARE} in its private data.
     */
    static final int IMM_BARE = 0x2000_0000;
    /** Low 29 bits: the freed-slot counter of an {@link #IMM_BARE} word. */
    static final int BARE_CREDIT_MASK = 0x1FFF_FFFF;
    /** A flag of the handshake's seventh field: this side takes {@link #IMM_BARE} messages. */
    static final int TAKES_BARE = 1;

    /** Low 8 bits of a {@code wr_id}'s low word: what the request was; a receive's index follows them. */
    static final long KIND_RECV = 0;
    static final long KIND_DATA = 1;
    static final long KIND_CREDIT = 2;
    static final long KIND_FIN = 3;
    /** The plain WRITE before a notifying SEND: unsignaled, so it completes only with an error. */
    static final long KIND_WRITE = 4;
    static final int KIND_BITS = 8;
    static final long KIND_MASK = (1 << KIND_BITS) - 1;
    /** Bytes of a notification word (the immediate's value, or a SEND's payload). */
    static final int WORD = 4;
    /**
     * Bytes of each receive's buffer in the word region: the notification word, then the head of
     * the slots a notifying SEND carries (all of a small message's, which then needs no WRITE:
     * docs/channel.md, "Small messages in the SEND"). A multiple of {@link #WORD}; told to the
     * peer in the handshake.
     */
    static final int RECEIVE_BYTES = 128;

    static final int MAGIC = 0x5643_4831; // "VCH1"

    final ChannelGroup group;
    private final boolean ownsGroup;
    private final boolean appPolling;
    private final int spinPolls;
    /** {@link ChannelOptions#parkAfterSpin()}: whether application polling's wait parks briefly after its spin ({@link #nap}). */
    private final boolean napsAfterSpin;
    private int idlePolls; // guarded by this
    /**
     * Counts kept for the tests that count a message's hand-offs (docs/measurements/channel.md, "Where the
     * polling thread's round trip goes"), all guarded by this: how often an application thread blocked in
     * {@code Object.wait} on this channel (each one a park, and its end a wake-up by another
     * thread or a timeout), and the completions of each kind ({@link #KIND_RECV},
     * {@link #KIND_DATA}, {@link #KIND_CREDIT}, {@link #KIND_FIN}) this channel handled.
     */
    private long monitorWaits;
    /**
     * How long this channel's application threads spent blocked in {@code Object.wait} in all,
     * and how many of those blocks lasted a millisecond or more (guarded by this): the waits of
     * application polling's tail (docs/channel.md, "Application polling's wait without the
     * millisecond"), for the tests that count them.
     */
    private long monitorWaitNanos;
    private long longMonitorWaits;
    /** With application polling: how often a waiting thread's spin ran out (guarded by this; tests). */
    private long spinsSpent;
    /**
     * With application polling, after the spin ran out: the length of the next short park
     * ({@link #nap}), {@code 0} while the wait still spins (guarded by this).
     */
    private long napNanos;
    /** The naps this wait took so far (guarded by this). */
    private int napsThisWait;
    /** The naps taken and the time they lasted (guarded by this; tests). */
    private long naps;
    private long nappedNanos;
    /**
     * Threads in {@code Object.wait} on this channel now (guarded by this): a message or a
     * credit wakes them only when there is one ({@link #wakeWaiters}). With application
     * polling nobody waits in the steady state, and {@code notifyAll} is no free call there:
     * HotSpot runs it in the VM (a thread-state transition, and it inflates the monitor).
     */
    private int waiters;
    /** {@code notifyAll} calls made by the per-message wake-ups ({@link #wakeWaiters}), for the tests that count them. */
    private long wakeUps;
    private final long[] completionsByKind = new long[(int) KIND_WRITE + 1];
    final int key;
    private final CmId id;
    private final Duration closeTimeout;
    /** Receive words, then (notifying by SEND) a ring of send words; {@code LOCAL_WRITE}. */
    final MemoryRegion words;

    // the two halves, guarded by this (their methods are called with this lock held)
    final ChannelSender sender;
    final ChannelReceiver receiver;

    /** Closed from the moment {@link #close()} begins: no new send, and a receive without a message left throws. */
    final CloseState state = new CloseState();
    // the close protocol's state (guarded by this)
    boolean peerReady;
    /** The close released the queue pair and memory: completions still handed over are ignored. */
    boolean released;
    boolean peerDisconnected;
    private boolean disconnectCalled;
    PeerLostException failure;

    Channel(ChannelGroup group, boolean ownsGroup, int key, CmId id, QueuePair qp, MemoryRegion ring, MemoryRegion words,
            boolean sendNotify, ChannelOptions options) {
        this.group = group;
        this.ownsGroup = ownsGroup;
        this.appPolling = options.applicationPolling();
        this.spinPolls = options.spinPolls();
        this.napsAfterSpin = options.parkAfterSpin();
        this.key = key;
        this.id = id;
        this.closeTimeout = options.closeTimeout();
        this.words = words;
        this.receiver = new ChannelReceiver(this, qp, ring, words, options);
        this.sender = new ChannelSender(this, qp, words, receiver.recvs.length * (RECEIVE_BYTES / WORD), sendNotify, options);
        state.opened(this);
    }

    /** Receives a channel keeps posted: one per slot of its ring (each WRITE carries at least one) and some for control words. */
    static int receiveCount(int slots) {
        return ChannelReceiver.receiveCount(slots);
    }


    /**
     * Bytes of a channel's word region: a receive buffer ({@link #RECEIVE_BYTES}) per posted receive and, when it notifies
     * by SEND, a ring of send words twice as long as the send queue, so that a word is rewritten
     * only long after the SEND that carried it completed (the queue completes in order and never
     * holds more than its depth).
     */
    static long wordBytes(int slots, boolean sendNotify, int maxSendWr) {
        return (long) receiveCount(slots) * RECEIVE_BYTES + (sendNotify ? 2L * maxSendWr * WORD : 0);
    }

    /** Whether this side notifies its peer by SEND after a plain WRITE (no immediate data). */
    boolean notifiesBySend() {
        return sender.sendNotify;
    }

    /**
     * How this side notifies its peer, as chosen when the channel was set up:
     * {@link ChannelOptions.Notification#SEND} or {@link ChannelOptions.Notification#IMMEDIATE}
     * ({@link ChannelOptions.Notification#AUTO} resolved by the device's transport). The peer may
     * use the other; a receiver takes both.
     */
    public ChannelOptions.Notification notification() {
        return sender.sendNotify ? ChannelOptions.Notification.SEND : ChannelOptions.Notification.IMMEDIATE;
    }

    long wrId(long kind) {
        return ((long) key << 32) | kind;
    }

    /**
     * Connects to a {@link ChannelServer} at {@code address} with a group of its own (one polling
     * thread), which closing the channel closes.
     *
     * <p><b>Errors</b>: as {@link ChannelGroup#connect}.
     */
    public static Channel connect(InetSocketAddress address, ChannelOptions options, Duration timeout) {
        Closer made = new Closer();
        ChannelGroup group = made.register(ChannelGroup.create(options));
        try {
            return group.connect(address, timeout, true);
        } catch (RuntimeException | Error e) {
            made.closeSuppressingInto(e);
            throw e;
        }
    }

    // ---- the handshake's private data -------------------------------------------------------

    /**
     * This side's private data: {@code VCH1}, the ring's address and rkey, its slots and slot
     * size, and the bytes each receive takes ({@link #RECEIVE_BYTES}: how large a SEND the peer
     * may send; a peer that sends the first 24 bytes only is sent words alone), and flags
     * ({@link #TAKES_BARE}; a peer that sends 28 bytes, or zeros there, is sent headers always).
     */
    byte[] localInfo() {
        MemoryRegion ring = receiver.ring;
        return ByteBuffer.allocate(32).putInt(MAGIC).putLong(ring.address()).putInt(ring.rkey())
                .putInt(receiver.slots).putInt(receiver.slotSize).putInt(RECEIVE_BYTES).putInt(TAKES_BARE).array();
    }

    /** Reads the peer's ring from its private data and makes the staging buffer; call before the channel is used. */
    void attachPeer(byte[] info, java.util.function.LongFunction<MemoryRegion> allocator) {
        if (info == null || info.length < 24) {
            throw new IllegalArgumentException("the peer is not a verbs4j channel: its private data has "
                    + (info == null ? 0 : info.length) + " bytes, a channel sends 24");
        }
        ByteBuffer b = ByteBuffer.wrap(info);
        int magic = b.getInt();
        if (magic != MAGIC) {
            throw new IllegalArgumentException("the peer is not a verbs4j channel (magic 0x" + Integer.toHexString(magic) + ")");
        }
        long address = b.getLong();
        int rkey = b.getInt();
        int pSlots = b.getInt();
        int pSlotSize = b.getInt();
        if (pSlots < 4 || pSlots > 16384 || pSlotSize < 64 || pSlotSize % 64 != 0 || pSlotSize > (1 << 20)) {
            throw new IllegalArgumentException("the peer offers a ring of " + pSlots + " slots of " + pSlotSize + " bytes");
        }
        // a peer that did not tell (24 bytes, or zeros where the transport pads the private data): words only
        int told = b.remaining() >= 4 ? b.getInt() : 0;
        int pReceiveBytes = told == 0 ? WORD : told;
        if (pReceiveBytes < WORD || pReceiveBytes > (1 << 20)) {
            throw new IllegalArgumentException("the peer's receives take " + pReceiveBytes + " bytes; a channel's take at least " + WORD);
        }
        // a peer that did not tell (28 bytes or fewer, or zeros): every message with its header
        int flags = b.remaining() >= 4 ? b.getInt() : 0;
        MemoryRegion s = allocator.apply((long) pSlots * pSlotSize);
        synchronized (this) {
            sender.attach(s, address, rkey, pSlots, pSlotSize, pReceiveBytes, (flags & TAKES_BARE) != 0);
            peerReady = true;
            sender.maybeSendCredit();
        }
    }

    /** Posts the receives the peer's WRITE_WITH_IMMs consume (one each): the ring's slots and some for control words. */
    void postInitialReceives() {
        receiver.postInitialReceives();
    }

    /** The connection-manager id (its addresses, its device). */
    public CmId cmId() {
        return id;
    }

    /** The local address. */
    public InetSocketAddress localAddress() {
        return id.localAddress();
    }

    /** The peer's address. */
    public InetSocketAddress remoteAddress() {
        return id.remoteAddress();
    }

    /** The largest message {@link #send} takes: a quarter of the peer's ring, less an 8-byte header. */
    public long maxMessageSize() {
        return (long) sender.maxMessageSlots * sender.peerSlotSize - HEADER;
    }
    /** Messages staged by {@link #send}/{@link #offer} so far. */
    public synchronized long sentCount() {
        return sender.sentMessages;
    }

    /** Messages received from the peer so far (handed out by {@link #receive} or still queued). */
    public synchronized long receivedCount() {
        return receiver.receivedMessages;
    }

    // ---- sending ----------------------------------------------------------------------------

    /**
     * Sends {@code message} (its whole contents), waiting as long as the peer's ring is full.
     *
     * <p><b>Errors</b>: {@link PeerLostException} when the peer went away;
     * {@link ChannelClosedException} after {@link #close()} or once the peer closed;
     * {@link IllegalArgumentException} for a message longer than {@link #maxMessageSize()}.
     *
     * @throws InterruptedException when interrupted while waiting for credits
     */
    public void send(MemorySegment message) throws InterruptedException {
        offer(message, Long.MAX_VALUE);
    }

    /**
     * Sends {@code message} if the peer's ring has room for it within {@code timeout}.
     *
     * <p><b>Errors</b>: as {@link #send}.
     *
     * @return {@code false} when the ring stayed full for {@code timeout}
     * @throws InterruptedException when interrupted while waiting for credits
     */
    public boolean offer(MemorySegment message, Duration timeout) throws InterruptedException {
        return offer(message, timeout.isNegative() ? 0 : saturatedNanos(timeout));
    }

    /**
     * {@link #offer(MemorySegment, Duration)} with the timeout as a number and unit (allocates nothing).
     *
     * @return {@code false} when the ring stayed full for the timeout
     * @throws InterruptedException when interrupted while waiting for credits
     */
    public boolean offer(MemorySegment message, long timeout, TimeUnit unit) throws InterruptedException {
        return offer(message, Math.max(0, unit.toNanos(timeout)));
    }

    /**
     * Sends a message of {@code length} bytes that {@code writer} writes in place, straight into
     * the channel's registered staging memory, waiting as long as the peer's ring is full: the
     * form without {@link #send(MemorySegment)}'s copy. Once the ring has room, the writer is
     * called in this thread with a {@link StagedMessage} of {@code length} bytes, valid only
     * during that call; what it wrote is posted (or coalesced) as {@code send} posts a copy.
     * Allocates nothing. Concurrent senders are ordered as for {@code send}: the writer runs
     * with the channel's lock held (see {@link MessageWriter} for what it must not do).
     *
     * <p><b>Errors</b>: as {@link #send(MemorySegment)}; {@link IllegalArgumentException} for a
     * negative {@code length}; whatever the writer throws (then nothing is sent);
     * {@link IllegalStateException} when called from inside a writer of this channel.
     *
     * @throws InterruptedException when interrupted while waiting for credits
     */
    public void send(int length, MessageWriter writer) throws InterruptedException {
        offer(length, writer, Long.MAX_VALUE, TimeUnit.NANOSECONDS);
    }

    /**
     * {@link #send(int, MessageWriter)} if the peer's ring has room within the timeout (given as
     * a number and unit: allocates nothing); the writer is called only when it has.
     *
     * <p><b>Errors</b>: as {@link #send(int, MessageWriter)}.
     *
     * @return {@code false} when the ring stayed full for the timeout (the writer was not called)
     * @throws InterruptedException when interrupted while waiting for credits
     */
    public boolean offer(int length, MessageWriter writer, long timeout, TimeUnit unit) throws InterruptedException {
        Objects.requireNonNull(writer, "writer");
        if (length < 0) {
            throw new IllegalArgumentException("a message of " + length + " bytes");
        }
        long nanos = timeout == Long.MAX_VALUE ? Long.MAX_VALUE : Math.max(0, unit.toNanos(timeout));
        return offer(null, writer, length, nanos);
    }

    private boolean offer(MemorySegment message, long timeoutNanos) throws InterruptedException {
        Objects.requireNonNull(message, "message");
        return offer(message, null, message.byteSize(), timeoutNanos);
    }

    /** Sends {@code length} bytes: a copy of {@code message}, or (when it is null) what {@code writer} writes in place. */
    private boolean offer(MemorySegment message, MessageWriter writer, long length, long timeoutNanos)
            throws InterruptedException {
        if (length > maxMessageSize()) {
            throw new IllegalArgumentException("a message of " + length + " bytes is longer than this channel carries ("
                    + maxMessageSize() + " bytes: a quarter of the peer's ring of " + sender.peerSlots + " slots of "
                    + sender.peerSlotSize + " bytes, less the header)");
        }
        int k = (int) ((length + HEADER + sender.peerSlotSize - 1) / sender.peerSlotSize);
        synchronized (this) {
            checkNotWritingInPlace();
            long deadline = timeoutNanos == Long.MAX_VALUE ? 0 : System.nanoTime() + timeoutNanos;
            // application polling: one poll per call, for credits and completions that came
            // meanwhile (so offer(m, 0) makes progress too); before the post only when the
            // credits at hand do not suffice, else after it, off the message's path
            boolean polled = !appPolling;
            while (true) {
                checkSendable();
                if (sender.reserve(k)) {
                    break;
                }
                if (!polled) {
                    polled = true;
                    group.drive();
                    continue;
                }
                if (timeoutNanos == Long.MAX_VALUE) {
                    await(Long.MAX_VALUE);
                } else {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        return false;
                    }
                    await(left);
                }
            }
            if (writer == null) {
                sender.stage(message, length, k);
            } else {
                sender.stage(writer, (int) length, k);
            }
            if (!polled) {
                group.drive();
            }
            return true;
        }
    }

    /**
     * Refuses an operation from inside a {@link MessageWriter} of this channel: it could wait,
     * which gives up the lock while the writer's slots are reserved but not yet staged.
     */
    private void checkNotWritingInPlace() {
        if (sender.writingInPlace()) {
            throw new IllegalStateException("a MessageWriter of the channel to " + peerName()
                    + " called the channel: it may only write its StagedMessage");
        }
    }

    private void checkSendable() {
        if (failure != null) {
            throw lost();
        }
        if (state.isClosed()) {
            throw new ChannelClosedException("the channel to " + peerName() + " is closed", null);
        }
        if (receiver.finReceived) {
            throw new ChannelClosedException("the peer " + peerName() + " closed the channel", null);
        }
        if (peerDisconnected) {
            throw new PeerLostException("the peer " + peerName() + " disconnected");
        }
    }

    // ---- receiving --------------------------------------------------------------------------

    /**
     * The next message, waiting up to {@code timeout} for one. Close the message to give its
     * slots back: the peer stalls once its credits are used up.
     *
     * <p><b>Errors</b>: {@link RdmaTimeoutException} when none arrived within {@code timeout}
     * (to look without waiting, {@link #poll()}); {@link PeerLostException} once the peer went
     * away (after the messages that arrived before); {@link ChannelClosedException} after
     * {@link #close()}, or once the peer closed and every message it sent was returned.
     *
     * @throws InterruptedException when interrupted while waiting
     */
    public Message receive(Duration timeout) throws InterruptedException {
        Message m = receive(timeout.isNegative() ? 0 : saturatedNanos(timeout));
        if (m == null) {
            throw timedOut(timeout);
        }
        return m;
    }

    /**
     * {@link #receive(Duration)} with the timeout as a number and unit (allocates nothing
     * unless it times out).
     *
     * @return the next message
     * @throws RdmaTimeoutException when none arrived within the timeout
     * @throws InterruptedException when interrupted while waiting
     */
    public Message receive(long timeout, TimeUnit unit) throws InterruptedException {
        Message m = receive(Math.max(0, unit.toNanos(timeout)));
        if (m == null) {
            throw timedOut(Duration.of(Math.max(0, timeout), unit.toChronoUnit()));
        }
        return m;
    }

    /**
     * The next message if one has arrived, else {@code null} at once: "nothing yet", the one
     * {@code null} of the channel's receive side, for a caller that polls several channels
     * itself (allocates nothing). Errors as {@link #receive(Duration)}, except that it never
     * times out.
     */
    public Message poll() {
        try {
            return receive(0L);
        } catch (InterruptedException e) {
            // a zero wait never blocks, so nothing here can be interrupted
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private RdmaTimeoutException timedOut(Duration timeout) {
        return new RdmaTimeoutException(null, "a message from " + peerName(), timeout);
    }

    /** The next message, or {@code null} when none arrived within {@code timeoutNanos}. */
    private Message receive(long timeoutNanos) throws InterruptedException {
        long deadline = System.nanoTime() + timeoutNanos;
        if (!appPolling && timeoutNanos > 0 && !receiver.mayHaveMessage()) {
            pollForDelivery(deadline);
        }
        return receive(deadline, timeoutNanos);
    }

    /**
     * With a polling thread: polls the group's queue from this thread, outside the lock, until
     * a delivered message is published ({@link ChannelReceiver#mayHaveMessage()}, a volatile
     * read), {@link ChannelOptions#spinPolls()} polls in a row found nothing, or the deadline,
     * a close, the peer's FIN or a failure (read here as hints; the locked loop decides). The
     * polling thread stands down meanwhile ({@link ChannelGroup#beginPolling()}), so a message
     * that comes within the spin is taken by this thread without a hand-off: no park, no wake-up
     * by another thread. Completions for the group's other channels are handed to them as the
     * polling thread would. While another thread polls ({@link ChannelGroup#BUSY}) this one
     * watches for its message, which that thread delivers, yielding the CPU and without
     * spending its spin: the other may be the polling thread, descheduled inside its last
     * poll before it stands down (softrdma yields in an empty poll), and counting those turns
     * spent the spin of every receive on a busy machine, each message then handed off.
     */
    private void pollForDelivery(long deadline) {
        ChannelGroup g = group;
        g.beginPolling();
        try {
            int idle = 0;
            for (int i = 1; !receiver.mayHaveMessage(); i++) {
                int r = g.drive();
                if (r == ChannelGroup.DROVE) {
                    idle = 0;
                    continue;
                }
                if (r == ChannelGroup.BUSY) {
                    // another thread polls: it delivers this channel's message, or (the polling
                    // thread) stands down after this poll; it may hold the lock descheduled (softrdma
                    // yields inside an empty poll), so the CPU goes to it, and the spin is not spent
                    Thread.yield();
                } else if (++idle > spinPolls) {
                    return;
                } else {
                    Thread.onSpinWait();
                }
                if ((i & 63) == 0 && (state.isClosed() || receiver.finReceived || failure != null
                        || deadline - System.nanoTime() <= 0)) {
                    return;
                }
            }
        } finally {
            g.endPolling();
        }
    }

    private synchronized Message receive(long deadline, long timeoutNanos) throws InterruptedException {
        checkNotWritingInPlace();
        if (appPolling && !receiver.hasMessage()) {
            group.drive();
            if (napsAfterSpin) {
                restartSpin(); // a wait that timed out must not leave the next one's naps spent
            }
        }
        while (!receiver.hasMessage()) {
            if (state.isClosed()) {
                throw new ChannelClosedException("the channel to " + peerName() + " is closed", null);
            }
            if (failure != null) {
                throw lost();
            }
            if (receiver.finReceived) {
                throw new ChannelClosedException("the peer " + peerName() + " closed the channel; all "
                        + receiver.receivedMessages + " messages it sent were received", null);
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            if (appPolling) {
                await(left);
            } else {
                block(left); // pollForDelivery polled: the polling thread or a polling waiter delivers it
            }
        }
        return receiver.next();
    }

    synchronized void release(Message m) {
        receiver.release(m);
    }

    /**
     * Waits up to {@code nanos} (or without limit) for the channel's state to change; holds
     * this lock. This thread polls the group's queue ({@link ChannelGroup#drive()}) and returns
     * once it handed over completions, so that the caller looks again. With a polling thread
     * it polls up to {@link ChannelOptions#spinPolls()} times while the polling thread stands
     * down, then blocks on the monitor ({@link #block}) until a delivery notifies it. With
     * application polling it polls once: it spins ({@code spinPolls} empty polls), then (with
     * {@link ChannelOptions#parkAfterSpin()}) parks briefly between polls ({@link #nap}, about
     * 1 ms in all), then waits 1 ms between polls;
     * while another thread polls it waits (giving up this lock, which that
     * thread may need) until that thread hands it something or 1 ms passed.
     */
    private void await(long nanos) throws InterruptedException {
        if (!appPolling) {
            pollThenBlock(nanos);
            return;
        }
        int r = group.drive();
        if (r == ChannelGroup.DROVE) {
            restartSpin();
            return;
        }
        if (r == ChannelGroup.EMPTY && idlePolls < spinPolls) {
            idlePolls++;
            Thread.onSpinWait();
            if (Thread.interrupted()) {
                throw new InterruptedException();
            }
            return;
        }
        if (r == ChannelGroup.EMPTY && nap(nanos)) {
            return;
        }
        block(1_000_000);
    }

    /**
     * Application polling: the next wait (or the rest of this one, after a poll that found
     * something) starts with a whole spin and no naps. With {@link ChannelOptions#parkAfterSpin()}
     * a receive calls it on entry too, so that a wait that timed out leaves no spent spin or
     * naps behind.
     */
    private void restartSpin() {
        idlePolls = 0;
        napNanos = 0;
        napsThisWait = 0;
    }

    /**
     * The first of application polling's naps after the spin ran out, each one twice the one
     * before up to {@link #LONGEST_NAP_NANOS}, {@link #NAPS} of them (16, 32, 64, 128, 256,
     * 256, 256 us: about 1 ms in all, plus up to 50 us each, Linux's timer slack for a normal
     * thread). A peer whose answer came just after the spin (descheduled for a moment on a
     * loaded machine) is then noticed within about its own delay, at most one nap late, not at
     * the end of a millisecond's block, which {@code Object.wait} rounds any shorter timeout up to.
     */
    static final long FIRST_NAP_NANOS = 16_000;
    /** The longest nap: how late, at most, a wait notices an answer that came during its naps. */
    static final long LONGEST_NAP_NANOS = 256_000;
    /** Naps per wait; after them the wait blocks on the monitor, 1 ms between polls. */
    static final int NAPS = 7;

    /**
     * After application polling's spin ran out, with {@link ChannelOptions#parkAfterSpin()}: parks this thread for the next nap
     * ({@link #FIRST_NAP_NANOS}, doubling up to {@link #LONGEST_NAP_NANOS}), at most
     * {@code nanos}, and returns {@code true} so that the caller polls again; {@code false}
     * once the naps are spent (the caller then blocks
     * 1 ms between polls, costing an idle channel one wake-up a millisecond). The nap keeps this
     * channel's lock, as the spin does: another thread that must deliver to this channel (one
     * polling for another channel of the group) waits for at most one nap, and then this
     * thread's poll finds the queue busy and it blocks on the monitor, giving the lock up. Kept
     * out of {@link #await} so that the spin's path stays as short as it was.
     *
     * @throws InterruptedException when interrupted during the nap
     */
    private boolean nap(long nanos) throws InterruptedException {
        long n = napNanos;
        if (n == 0) {
            spinsSpent++;
            n = FIRST_NAP_NANOS;
        }
        if (!napsAfterSpin || napsThisWait == NAPS) {
            napNanos = n; // the spin stays counted spent
            return false;
        }
        napNanos = Math.min(n * 2, LONGEST_NAP_NANOS);
        napsThisWait++;
        long start = System.nanoTime();
        LockSupport.parkNanos(this, Math.min(n, nanos));
        nappedNanos += System.nanoTime() - start;
        naps++;
        if (Thread.interrupted()) {
            throw new InterruptedException();
        }
        return true;
    }

    /**
     * Wakes the threads waiting on this channel for a message or credits, if any wait: the
     * wake-up of the data path (a message delivered, credits returned). Call with the lock held.
     */
    void wakeWaiters() {
        if (waiters > 0) {
            wakeUps++;
            notifyAll();
        }
    }

    /**
     * {@link #await} with a polling thread. The spin holds this lock, so it ends at the first
     * {@link ChannelGroup#BUSY} poll: the thread polling meanwhile may need this lock to deliver
     * to this channel, and blocking gives it up. A version that spun on through {@code BUSY}
     * (yielding) stalled {@code ChannelTest.manyConnectionsShareOnePollingThread}, four senders
     * of one group waiting for credits: a poller blocked on one sender's lock while holding the
     * poll lock that the others spun on, 18 s and a timeout against 4 s before.
     *
     * <p>The spin looks at the clock every 64 polls and returns once {@code nanos} passed, so
     * that a long {@link ChannelOptions#spinPolls()} cannot carry a credit wait or a close past
     * its timeout (the callers look at their deadline again).
     */
    private void pollThenBlock(long nanos) throws InterruptedException {
        ChannelGroup g = group;
        long end = nanos == Long.MAX_VALUE ? 0 : System.nanoTime() + nanos;
        g.beginPolling();
        try {
            for (int idle = 0; idle < spinPolls; idle++) {
                int r = g.drive();
                if (r == ChannelGroup.DROVE) {
                    return;
                }
                if (r == ChannelGroup.BUSY) {
                    break; // the poller may need this channel's lock to deliver: give it up now
                }
                if ((idle & 63) == 63 && nanos != Long.MAX_VALUE && end - System.nanoTime() <= 0) {
                    return;
                }
                Thread.onSpinWait();
            }
        } finally {
            g.endPolling();
        }
        block(nanos);
    }

    /**
     * Blocks on this channel's monitor up to {@code nanos} (or without limit), this lock held
     * on entry: whoever polls the group's queue delivers under the lock and notifies. The group
     * is told first ({@link ChannelGroup#beginBlocking()}), so that its polling thread does not
     * stay stood down while this thread waits on it (with application polling there is none:
     * the telling does nothing, and the wait is await's 1 ms between polls).
     */
    private void block(long nanos) throws InterruptedException {
        monitorWaits++;
        waiters++;
        group.beginBlocking();
        long start = System.nanoTime(); // a block is off the fast path: two clock reads are nothing beside it
        try {
            if (nanos == Long.MAX_VALUE) {
                wait();
            } else {
                wait(nanos / 1_000_000, (int) (nanos % 1_000_000));
            }
        } finally {
            long blocked = System.nanoTime() - start;
            monitorWaitNanos += blocked;
            if (blocked >= 1_000_000) {
                longMonitorWaits++;
            }
            group.endBlocking();
            waiters--;
        }
    }

    /**
     * What this channel's waiting threads did once they had to wait, so far (tests): with
     * application polling, how often a wait's spin ran out ({@code spinsSpent}), the short
     * parks after it ({@code naps}, {@code nappedNanos}); with either mode the blocks on the
     * monitor ({@code blocks}, {@code blockedNanos}) and of those the ones of a millisecond or
     * more ({@code longBlocks}).
     */
    record WaitCounts(long spinsSpent, long naps, long nappedNanos, long blocks, long blockedNanos, long longBlocks) {
        /** This minus {@code before}, per {@code n} (round trips), as one line. */
        String perRoundTrip(WaitCounts before, long n) {
            double d = n;
            long b = blocks - before.blocks;
            long k = naps - before.naps;
            return String.format("spins spent %.3f, naps %.3f (%.1f us each), blocks %.3f (%.1f us each), of 1 ms or more %.3f",
                    (spinsSpent - before.spinsSpent) / d, k / d, k == 0 ? 0.0 : (nappedNanos - before.nappedNanos) / 1e3 / k,
                    b / d, b == 0 ? 0.0 : (blockedNanos - before.blockedNanos) / 1e3 / b, (longBlocks - before.longBlocks) / d);
        }
    }

    synchronized WaitCounts waitCounts() {
        return new WaitCounts(spinsSpent, naps, nappedNanos, monitorWaits, monitorWaitNanos, longMonitorWaits);
    }

    /** {@link #monitorWaits}: how often an application thread blocked on this channel so far (tests). */
    synchronized long monitorWaits() {
        return monitorWaits;
    }

    /** {@link #wakeUps}: how many wake-ups the data path issued on this channel so far (tests). */
    synchronized long wakeUps() {
        return wakeUps;
    }

    /**
     * Data notifications this side posted so far: with {@code carried}, lone SENDs that carried
     * all their slots (docs/channel.md, "Small messages in the SEND"); else WRITEs, each with its
     * immediate or its SEND (tests).
     */
    synchronized long dataPosts(boolean carried) {
        return carried ? sender.carriedPosts : sender.writePosts;
    }

    /** Data WRITEs posted so far that carried one message without its header ({@link #IMM_BARE}; counted in {@code dataPosts(false)} too) (tests). */
    synchronized long barePosts() {
        return sender.barePosts;
    }

    /** Messages received so far without a header ({@link #IMM_BARE}) (tests). */
    synchronized long bareReceives() {
        return receiver.bareReceives;
    }

    /** Data SENDs received so far that carried slots (all, or their head), copied into the ring (tests). */
    synchronized long carriedReceives() {
        return receiver.carriedReceives;
    }

    /** How many successful completions of {@code kind} ({@link #KIND_RECV}, {@link #KIND_DATA}...) this channel handled (tests). */
    synchronized long completions(long kind) {
        return completionsByKind[(int) kind];
    }

    // ---- completions, from the group's polling thread ---------------------------------------

    synchronized void onCompletion(Completion wc, long low) {
        if (released) {
            return;
        }
        long kind = low & KIND_MASK;
        if (!wc.ok()) {
            onError(wc, kind);
            return;
        }
        if (kind < completionsByKind.length) {
            completionsByKind[(int) kind]++;
        }
        if (kind == KIND_RECV) {
            receiver.onReceive(wc, low);
        } else if (kind == KIND_DATA) {
            sender.onDataCompleted();
            wakeCloser();
        } else if (kind == KIND_CREDIT) {
            sender.creditInFlight = false;
            sender.maybeSendCredit();
            wakeCloser();
        } else if (kind == KIND_FIN) {
            sender.finDone = true;
            notifyAll();
        }
    }

    /**
     * After a data WRITE or a credit word completed: only {@link #close()} waits for that (the
     * drain). {@code send}/{@code offer} wait for the peer's credits and {@code receive} for
     * messages, both of which notify where they arrive; waking them here woke a thread waiting
     * in {@code receive} for nothing once per message it had sent (a futex wake, its park, and
     * a context switch each way: half the hand-offs of a round trip).
     */
    private void wakeCloser() {
        if (state.isClosed()) {
            notifyAll();
        }
    }

    private void onError(Completion wc, long kind) {
        if (kind == KIND_DATA) {
            sender.writesInFlight--;
        } else if (kind == KIND_CREDIT) {
            sender.creditInFlight = false;
        } else if (kind == KIND_FIN) {
            sender.finDone = true;
        }
        boolean expected = wc.status() == WcStatus.WR_FLUSH_ERROR && (state.isClosed() || receiver.finReceived);
        if (!expected) {
            fail(new PeerLostException("the connection to " + peerName() + " failed: " + wc.status()
                    + (kind == KIND_RECV ? " on a receive" : sender.sendNotify ? " on an RDMA WRITE or its SEND" : " on an RDMA WRITE"),
                    wc.error()));
        }
        notifyAll();
    }

    /** The connection manager reported DISCONNECTED (or the device went away). */
    synchronized void onDisconnected(String what) {
        peerDisconnected = true;
        if (!disconnectCalled && !released) {
            disconnectCalled = true;
            try {
                id.disconnect();
            } catch (RuntimeException e) {
                // already disconnected on the device's side: nothing left to answer
            }
        }
        notifyAll();
    }

    /** After a DISCONNECTED, once the completion queue was drained: a peer that did not close is lost. */
    synchronized void checkDisconnected() {
        if (peerDisconnected && !receiver.finReceived && !state.isClosed() && failure == null) {
            fail(new PeerLostException("the peer " + peerName() + " disconnected without closing the channel"));
        }
    }

    /** A failure of the library's own handling of this channel's completion: the channel fails, the group goes on. */
    synchronized void internalFailure(RuntimeException e) {
        fail(new PeerLostException("handling a completion of the channel to " + peerName() + " failed: " + e, e));
    }

    void fail(PeerLostException cause) {
        if (failure == null && !released) {
            failure = cause;
        }
        notifyAll();
    }

    /**
     * The exception for an operation of this failed channel, thrown in the caller's thread: the
     * failure's message, and its cause (the failed work completion, the failed post...) as the
     * cause, not the failure itself, so that {@code getCause()} is what showed the loss and no
     * message is repeated down the chain.
     */
    PeerLostException lost() {
        return new PeerLostException(failure.getMessage(), failure.status(), failure.getCause());
    }

    /** Whether the peer went away without closing ({@link PeerLostException}), and why; {@code null} if not. */
    public synchronized PeerLostException failure() {
        return failure;
    }

    String peerName() {
        InetSocketAddress a = id.isClosed() ? null : id.remoteAddress();
        return a == null ? "the peer" : a.toString();
    }

    // ---- closing ----------------------------------------------------------------------------

    /**
     * Closes the channel cleanly: refuses further sends, waits until every staged message was
     * written into the peer's ring (up to {@link ChannelOptions#closeTimeout()}), tells the peer
     * (which then receives the rest and sees {@link ChannelClosedException}), disconnects and
     * releases the queue pair and memory. Messages not yet closed become invalid. Idempotent.
     *
     * <p><b>Errors</b>: when staged messages could not be delivered, {@link PeerLostException}
     * (the peer was lost: its cause is what showed it) or {@link ChannelException} (the close
     * timed out); the resources are released all the same, each even when another fails,
     * and a failure to release one is suppressed on that exception (or thrown, the later ones
     * suppressed on it, when everything was delivered).
     */
    @Override
    public void close() {
        RdmaException undelivered = null;
        synchronized (this) {
            checkNotWritingInPlace();
            if (!state.beginClose()) {
                return;
            }
            notifyAll();
            if (appPolling) {
                // completions nobody polled yet (WRITEs the peer has, a disconnect) count first
                while (group.drive() == ChannelGroup.DROVE) {
                    Thread.onSpinWait();
                }
            }
            Deadline deadline = Deadline.after(closeTimeout);
            try {
                if (peerReady && failure == null && !receiver.finReceived && !peerDisconnected) {
                    while ((sender.posted < sender.filled || sender.writesInFlight > 0) && failure == null && !peerDisconnected) {
                        if (sender.posted < sender.filled && sender.writesInFlight < sender.writesInFlightLimit + 1) {
                            sender.postPending();
                        }
                        long left = deadline.remainingNanos(); // never 0 into await: wait(0) waits without end
                        if (left == 0) {
                            break;
                        }
                        await(left);
                    }
                    if (sender.posted == sender.filled && sender.writesInFlight == 0 && failure == null && !peerDisconnected) {
                        if (sender.postControl(IMM_CONTROL | IMM_FIN | (int) (receiver.freed & COUNT_MASK), KIND_FIN) == 0) {
                            sender.finPosted = true;
                            while (!sender.finDone && failure == null && !peerDisconnected) {
                                long left = deadline.remainingNanos();
                                if (left == 0) {
                                    break;
                                }
                                await(left);
                            }
                        }
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                // a failed post: reported below through the counters
            }
            if ((failure != null || peerDisconnected) && !receiver.finReceived && (sender.posted < sender.filled || sender.writesInFlight > 0)) {
                undelivered = new PeerLostException("closing the channel to " + peerName() + ": "
                        + (sender.filled - sender.posted) + " staged slots and " + sender.writesInFlight
                        + " WRITEs were not delivered: " + (failure != null ? failure.getMessage() : "the peer disconnected"),
                        failure == null ? null : failure.getCause());
            } else if (peerReady && !receiver.finReceived && !peerDisconnected && failure == null && (!sender.finDone || sender.posted < sender.filled)) {
                undelivered = new ChannelException("closing the channel to " + peerName() + " timed out after "
                        + closeTimeout + " with " + sender.writesInFlight + " WRITEs in flight", null);
            }
            if (!disconnectCalled) {
                disconnectCalled = true;
                try {
                    id.disconnect();
                } catch (RuntimeException e) {
                    // not connected (the peer went first): nothing to tell it
                }
            }
            released = true;
            notifyAll();
        }
        group.unregister(this);
        try {
            releaseResources(ownsGroup);
        } catch (RuntimeException | Error e) {
            if (undelivered == null) {
                throw e;
            }
            undelivered.addSuppressed(e);
        }
        if (undelivered != null) {
            throw undelivered;
        }
    }

    /** The id, the ring, the word region and the staging buffer (and the group, when owned), every one even when some fail. */
    private void releaseResources(boolean withGroup) {
        Closer.closeAll(Arrays.asList(id, receiver.ring, words, sender.stage, withGroup ? group : null));
    }

    /** Closes after a failed setup: no handshake happened. */
    void abandon() {
        state.beginClose();
        synchronized (this) {
            released = true;
        }
        group.unregister(this);
        releaseResources(false);
    }

    /** Whether {@link #close()} has begun (it refuses new sends from then on). */
    public boolean isClosed() {
        return state.isClosed();
    }

    private static long saturatedNanos(Duration d) {
        try {
            return d.toNanos();
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE - 1;
        }
    }

    @Override
    public String toString() {
        return "Channel[" + (id.isClosed() ? "closed" : id.localAddress() + " -> " + id.remoteAddress()) + "]";
    }
}
