package io.github.verbs4j.channel;

import io.github.verbs4j.Completion;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.WcStatus;
import io.github.verbs4j.cm.CmId;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

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
 *
 * <p><b>Failure</b>: when the peer goes away without closing, every blocked and later
 * operation throws {@link PeerLostException}; messages already in the ring are still delivered
 * first. When the peer closes cleanly, {@link #receive} returns what it sent and then throws
 * {@link ChannelClosedException}.
 *
 * <p><b>Application polling</b> ({@link ChannelOptions#applicationPolling()}): the thread that
 * waits in {@link #send}, {@link #offer}, {@link #receive} or {@link #close()} polls the group's
 * completion queue itself (each of them also polls once on entry, so {@code offer(m, 0)} and
 * {@code receive(0, unit)} make progress too), saving the hand-off from a polling thread. The
 * channel moves only while some thread is in one of its group's operations: a peer's messages
 * are acknowledged by the transport regardless, but credits, completed WRITEs and a lost peer
 * are noticed at the next call. A waiting thread holds the channel's lock while it spins
 * ({@link ChannelOptions#spinPolls()} empty polls, then a poll every millisecond), so the use
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
    static final ValueLayout.OfLong LE_LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    private static final ValueLayout.OfInt LE_INT_UNALIGNED = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    /** Immediate: a control word (credits, close) rather than data. */
    static final int IMM_CONTROL = 0x8000_0000;
    /** Immediate of a control word: the peer closes (no message follows). */
    static final int IMM_FIN = 0x4000_0000;
    /** Immediate of data: the ring wrapped before these slots (the rest of it was skipped). */
    static final int IMM_WRAP = 0x4000_0000;
    /** Low 30 bits: the slot count of data, the freed-slot counter of a control word. */
    static final int COUNT_MASK = 0x3FFF_FFFF;

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

    static final int MAGIC = 0x5643_4831; // "VCH1"

    private final ChannelGroup group;
    private final boolean ownsGroup;
    private final boolean appPolling;
    private final int spinPolls;
    private int idlePolls; // guarded by this
    final int key;
    private final CmId id;
    private final QueuePair qp;
    private final MemoryRegion ring;
    private final MemorySegment ringSegment;
    private final int slots;
    private final int slotSize;
    private final int writesInFlightLimit;
    private final int creditBatch;
    private final long closeTimeoutNanos;

    // the peer's ring and the staging buffer that mirrors it (set once, before the channel is published)
    private MemoryRegion stage;
    private MemorySegment stageSegment;
    private long peerAddress;
    private int peerRkey;
    private int peerSlots;
    private int peerSlotSize;
    private int maxMessageSlots;

    // notification (docs/channel.md, "Notification without immediate data"): how the words reach the peer
    private final boolean sendNotify;
    /** The data WRITE: with immediate, signaled; or plain, unsignaled, followed by {@link #notify}. */
    private final SendRequest write;
    /** With {@link #sendNotify}: the SEND of the word after each data WRITE (signaled: the data's completion). */
    private final SendRequest notify;
    /** Credit words and the FIN: a zero-length WRITE with immediate, or a SEND of the word. */
    private final SendRequest control;
    /** One receive per expected notification, each with its own word of {@link #words}: the first {@link #recvs}{@code .length} words. */
    private final ReceiveRequest[] recvs;
    /** Receive words, then (with {@link #sendNotify}) a ring of send words; {@code LOCAL_WRITE}. */
    private final MemoryRegion words;
    private final MemorySegment wordsSegment;
    private final int sendWords;
    private long sendWordSeq; // guarded by this

    // sending (all guarded by this)
    private long filled;
    private long posted;
    private long postedEnd;
    private long peerFreed;
    private boolean wrapNext;
    private int writesInFlight;
    private boolean creditInFlight;
    private boolean finPosted;
    private boolean finDone;
    private long sentMessages;

    // receiving (guarded by this)
    private long received;
    private long freed;
    private long reported;
    private final boolean[] released;
    private final Message[] messages;
    private final int[] delivery;
    private long deliveryHead;
    private long deliveryTail;
    private long receivedMessages;
    private boolean finReceived;

    // state (guarded by this)
    private boolean peerReady;
    private boolean closing;
    private boolean closed;
    private boolean peerDisconnected;
    private boolean disconnectCalled;
    private ChannelException failure;

    Channel(ChannelGroup group, boolean ownsGroup, int key, CmId id, QueuePair qp, MemoryRegion ring, MemoryRegion words,
            boolean sendNotify, ChannelOptions options) {
        this.group = group;
        this.ownsGroup = ownsGroup;
        this.appPolling = options.applicationPolling();
        this.spinPolls = options.spinPolls();
        this.key = key;
        this.id = id;
        this.qp = qp;
        this.ring = ring;
        this.ringSegment = ring.segment().asReadOnly();
        this.slots = options.slots();
        this.slotSize = options.slotSize();
        this.writesInFlightLimit = options.writesInFlight();
        this.creditBatch = Math.max(1, slots / 4);
        this.closeTimeoutNanos = options.closeTimeout().toNanos();
        this.released = new boolean[slots];
        this.messages = new Message[slots];
        for (int i = 0; i < slots; i++) {
            messages[i] = new Message(this, ringSegment, i);
        }
        this.delivery = new int[slots];
        this.sendNotify = sendNotify;
        this.words = words;
        this.wordsSegment = words.segment();
        this.recvs = new ReceiveRequest[receiveCount(slots)];
        for (int i = 0; i < recvs.length; i++) {
            recvs[i] = ReceiveRequest.withMaxSge(1).local(words, (long) i * WORD, WORD)
                    .id(wrId(KIND_RECV | ((long) i << KIND_BITS)));
        }
        this.sendWords = (int) (words.length() / WORD) - recvs.length;
        if (sendNotify) {
            this.notify = SendRequest.send().signaled();
            this.write = SendRequest.rdmaWrite().signaled(false).id(wrId(KIND_WRITE)).next(notify);
            this.control = SendRequest.send().signaled();
        } else {
            this.notify = null;
            this.write = SendRequest.rdmaWriteWithImm(0).signaled();
            this.control = SendRequest.rdmaWriteWithImm(0).signaled().sgeCount(0);
        }
    }

    /** Receives a channel keeps posted: one per slot of its ring (each WRITE carries at least one) and some for control words. */
    static int receiveCount(int slots) {
        return slots + EXTRA_RECVS;
    }

    /**
     * Bytes of a channel's word region: a receive word per posted receive and, when it notifies
     * by SEND, a ring of send words twice as long as the send queue, so that a word is rewritten
     * only long after the SEND that carried it completed (the queue completes in order and never
     * holds more than its depth).
     */
    static long wordBytes(int slots, boolean sendNotify, int maxSendWr) {
        return (long) (receiveCount(slots) + (sendNotify ? 2 * maxSendWr : 0)) * WORD;
    }

    /** Whether this side notifies its peer by SEND after a plain WRITE (no immediate data). */
    boolean notifiesBySend() {
        return sendNotify;
    }

    /**
     * How this side notifies its peer, as chosen when the channel was set up:
     * {@link ChannelOptions.Notification#SEND} or {@link ChannelOptions.Notification#IMMEDIATE}
     * ({@link ChannelOptions.Notification#AUTO} resolved by the device's transport). The peer may
     * use the other; a receiver takes both.
     */
    public ChannelOptions.Notification notification() {
        return sendNotify ? ChannelOptions.Notification.SEND : ChannelOptions.Notification.IMMEDIATE;
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
        ChannelGroup group = ChannelGroup.create(options);
        try {
            return group.connect(address, timeout, true);
        } catch (RuntimeException | Error e) {
            group.close();
            throw e;
        }
    }

    // ---- the handshake's private data -------------------------------------------------------

    byte[] localInfo() {
        return ByteBuffer.allocate(24).putInt(MAGIC).putLong(ring.address()).putInt(ring.rkey())
                .putInt(slots).putInt(slotSize).array();
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
        MemoryRegion s = allocator.apply((long) pSlots * pSlotSize);
        synchronized (this) {
            this.stage = s;
            this.stageSegment = s.segment();
            this.peerAddress = address;
            this.peerRkey = rkey;
            this.peerSlots = pSlots;
            this.peerSlotSize = pSlotSize;
            this.maxMessageSlots = Math.max(1, pSlots / 4);
            if (!sendNotify) {
                control.remote(address, rkey);
            }
            peerReady = true;
            maybeSendCredit();
        }
    }

    /** Posts the receives the peer's WRITE_WITH_IMMs consume (one each): the ring's slots and some for control words. */
    void postInitialReceives() {
        for (ReceiveRequest r : recvs) {
            qp.postRecv(r);
        }
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
        return (long) maxMessageSlots * peerSlotSize - HEADER;
    }

    /** Messages staged by {@link #send}/{@link #offer} so far. */
    public synchronized long sentCount() {
        return sentMessages;
    }

    /** Messages received from the peer so far (handed out by {@link #receive} or still queued). */
    public synchronized long receivedCount() {
        return receivedMessages;
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

    private boolean offer(MemorySegment message, long timeoutNanos) throws InterruptedException {
        Objects.requireNonNull(message, "message");
        long length = message.byteSize();
        if (length > maxMessageSize()) {
            throw new IllegalArgumentException("a message of " + length + " bytes is longer than this channel carries ("
                    + maxMessageSize() + " bytes: a quarter of the peer's ring of " + peerSlots + " slots of "
                    + peerSlotSize + " bytes, less the header)");
        }
        int k = (int) ((length + HEADER + peerSlotSize - 1) / peerSlotSize);
        synchronized (this) {
            long deadline = timeoutNanos == Long.MAX_VALUE ? 0 : System.nanoTime() + timeoutNanos;
            if (appPolling) {
                group.drive(); // credits and completions that came meanwhile, even for offer(m, 0)
            }
            while (true) {
                checkSendable();
                int start = (int) (filled % peerSlots);
                int pad = start + k > peerSlots ? peerSlots - start : 0;
                if (peerSlots - (filled - peerFreed) >= k + pad) {
                    if (start == 0 && posted < filled) {
                        // the staged slots end at the ring's end: one WRITE cannot go on at slot 0
                        postPending();
                    }
                    if (pad > 0) {
                        postPending();
                        filled += pad;
                        posted = filled;
                        wrapNext = true;
                    }
                    break;
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
            long offset = (filled % peerSlots) * peerSlotSize;
            stageSegment.set(LE_INT, offset, (int) length);
            stageSegment.set(LE_INT, offset + 4, (int) (freed & COUNT_MASK));
            reported = freed;
            MemorySegment.copy(message, 0, stageSegment, offset + HEADER, length);
            filled += k;
            postedEnd = offset + HEADER + length;
            sentMessages++;
            if (writesInFlight < writesInFlightLimit) {
                postPending();
            }
            return true;
        }
    }

    private void checkSendable() {
        if (failure != null) {
            throw new PeerLostException("the channel to " + peerName() + " failed: " + failure.getMessage(), failure);
        }
        if (closing || closed) {
            throw new ChannelClosedException("the channel to " + peerName() + " is closed", null);
        }
        if (finReceived) {
            throw new ChannelClosedException("the peer " + peerName() + " closed the channel", null);
        }
        if (peerDisconnected) {
            throw new PeerLostException("the peer " + peerName() + " disconnected", null);
        }
    }

    /** Posts the staged, not yet posted slots as one WRITE_WITH_IMM. Holds the lock. */
    private void postPending() {
        long n = filled - posted;
        if (n == 0) {
            return;
        }
        int start = (int) (posted % peerSlots);
        long startByte = (long) start * peerSlotSize;
        int bytes = (int) (postedEnd - startByte);
        write.local(stage, startByte, bytes).remote(peerAddress + startByte, peerRkey);
        int word = (wrapNext ? IMM_WRAP : 0) | (int) n;
        if (sendNotify) {
            notify.local(words, putSendWord(word), WORD).id(wrId(KIND_DATA));
        } else {
            write.immediate(word).id(wrId(KIND_DATA));
        }
        int rc = qp.tryPostSend(write);
        if (rc != 0) {
            fail(new PeerLostException("posting " + (sendNotify ? "an RDMA WRITE and its SEND" : "a WRITE_WITH_IMM")
                    + " of " + n + " slots to " + peerName() + " failed",
                    new VerbsException("ibv_post_send", rc, "on " + qp)));
            throw new PeerLostException("the channel to " + peerName() + " failed: " + failure.getMessage(), failure);
        }
        writesInFlight++;
        posted = filled;
        wrapNext = false;
    }

    /** Sends a credit word when enough slots were freed since the last report. Holds the lock. */
    private void maybeSendCredit() {
        if (!peerReady || creditInFlight || finPosted || closed || failure != null || peerDisconnected
                || freed - reported < creditBatch) {
            return;
        }
        int rc = postControl(IMM_CONTROL | (int) (freed & COUNT_MASK), KIND_CREDIT);
        if (rc != 0) {
            fail(new PeerLostException("posting a credit word to " + peerName() + " failed",
                    new VerbsException("ibv_post_send", rc, "on " + qp)));
            return;
        }
        creditInFlight = true;
        reported = freed;
    }

    /** Posts a control word (credit counter, FIN) as this channel notifies. Holds the lock. */
    private int postControl(int word, long kind) {
        if (sendNotify) {
            control.local(words, putSendWord(word), WORD);
        } else {
            control.immediate(word);
        }
        return qp.tryPostSend(control.id(wrId(kind)));
    }

    /** Writes {@code word} into the next send word and returns its offset in {@link #words}. Holds the lock. */
    private long putSendWord(int word) {
        long offset = (long) (recvs.length + (int) (sendWordSeq++ % sendWords)) * WORD;
        wordsSegment.set(LE_INT, offset, word);
        return offset;
    }

    /** A credit counter from the peer: the low 30 bits of how many of its slots it freed. Holds the lock. */
    private void applyCredit(int value) {
        long delta = (value - (int) (peerFreed & COUNT_MASK)) & COUNT_MASK;
        if (delta > 0 && delta <= peerSlots) {
            peerFreed += delta;
            notifyAll();
        }
    }

    // ---- receiving --------------------------------------------------------------------------

    /**
     * The next message, or {@code null} when none arrived within {@code timeout}. Close the
     * message to give its slots back: the peer stalls once its credits are used up.
     *
     * <p><b>Errors</b>: {@link PeerLostException} once the peer went away (after the messages
     * that arrived before); {@link ChannelClosedException} after {@link #close()}, or once the
     * peer closed and every message it sent was returned.
     *
     * @throws InterruptedException when interrupted while waiting
     */
    public Message receive(Duration timeout) throws InterruptedException {
        return receive(timeout.isNegative() ? 0 : saturatedNanos(timeout));
    }

    /**
     * {@link #receive(Duration)} with the timeout as a number and unit (allocates nothing).
     *
     * @return the next message, or {@code null} on timeout
     * @throws InterruptedException when interrupted while waiting
     */
    public Message receive(long timeout, TimeUnit unit) throws InterruptedException {
        return receive(Math.max(0, unit.toNanos(timeout)));
    }

    private synchronized Message receive(long timeoutNanos) throws InterruptedException {
        long deadline = System.nanoTime() + timeoutNanos;
        if (appPolling && deliveryHead == deliveryTail) {
            group.drive();
        }
        while (deliveryHead == deliveryTail) {
            if (closing || closed) {
                throw new ChannelClosedException("the channel to " + peerName() + " is closed", null);
            }
            if (failure != null) {
                throw new PeerLostException("the channel to " + peerName() + " failed: " + failure.getMessage(), failure);
            }
            if (finReceived) {
                throw new ChannelClosedException("the peer " + peerName() + " closed the channel; all "
                        + receivedMessages + " messages it sent were received", null);
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            await(left);
        }
        int slot = delivery[(int) (deliveryHead % slots)];
        deliveryHead++;
        Message m = messages[slot];
        m.open = true;
        return m;
    }

    synchronized void release(Message m) {
        if (!m.open) {
            return;
        }
        m.open = false;
        int base = m.slot;
        for (int i = 0; i < m.slotCount; i++) {
            released[base + i] = true;
        }
        advanceFreed();
    }

    private void advanceFreed() {
        while (freed < received && released[(int) (freed % slots)]) {
            released[(int) (freed % slots)] = false;
            freed++;
        }
        maybeSendCredit();
    }

    /** Data landed: parse the headers of {@code n} slots (after a skip to slot 0 when wrapped). Holds the lock. */
    private void onData(int imm) {
        int n = imm & COUNT_MASK;
        if ((imm & IMM_WRAP) != 0) {
            int at = (int) (received % slots);
            if (at != 0) {
                for (int i = at; i < slots; i++) {
                    released[i] = true;
                }
                received += slots - at;
            }
        }
        long end = received + n;
        if (n == 0 || n > slots || (received % slots) + n > slots) {
            fail(new PeerLostException("protocol error: the peer wrote " + n + " slots at slot " + (received % slots)
                    + " of a ring of " + slots, null));
            return;
        }
        while (received < end) {
            int slot = (int) (received % slots);
            long offset = (long) slot * slotSize;
            int length = ringSegment.get(LE_INT_UNALIGNED, offset);
            int credit = ringSegment.get(LE_INT_UNALIGNED, offset + 4);
            long k = (length + (long) HEADER + slotSize - 1) / slotSize;
            if (length < 0 || k > end - received) {
                fail(new PeerLostException("protocol error: a message of " + length + " bytes at slot " + slot
                        + " does not fit the " + (end - received) + " slots written", null));
                return;
            }
            applyCredit(credit);
            Message m = messages[slot];
            m.offset = offset + HEADER;
            m.length = length;
            m.slotCount = (int) k;
            m.open = false;
            m.sequence = receivedMessages++;
            delivery[(int) (deliveryTail % slots)] = slot;
            deliveryTail++;
            received += k;
        }
        advanceFreed();
        notifyAll();
    }

    /**
     * Waits up to {@code nanos} (or without limit) for the channel's state to change; holds
     * this lock. With a polling thread, the thread's hand-off wakes it. With application
     * polling this thread polls the group's queue once: it returns after completions were
     * handed over, spins ({@link ChannelOptions#spinPolls()} empty polls), then waits 1 ms
     * between polls; while another thread polls it waits (giving up this lock, which that
     * thread may need) until that thread hands it something or 1 ms passed.
     */
    private void await(long nanos) throws InterruptedException {
        if (!appPolling) {
            if (nanos == Long.MAX_VALUE) {
                wait();
            } else {
                wait(nanos / 1_000_000, (int) (nanos % 1_000_000));
            }
            return;
        }
        int r = group.drive();
        if (r == ChannelGroup.DROVE) {
            idlePolls = 0;
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
        wait(1);
    }

    // ---- completions, from the group's polling thread ---------------------------------------

    synchronized void onCompletion(Completion wc, long low) {
        if (closed) {
            return;
        }
        long kind = low & KIND_MASK;
        if (!wc.ok()) {
            onError(wc, kind);
            return;
        }
        if (kind == KIND_RECV) {
            int index = (int) (low >>> KIND_BITS);
            if (index >= recvs.length) {
                fail(new PeerLostException("a receive completed with the unknown index " + index, null));
                return;
            }
            int imm;
            if (wc.hasImmediate()) {
                imm = wc.immediate();
            } else if (wc.byteLength() == WORD) {
                // a SEND of the word (transports without immediate data): read before the buffer is posted again
                imm = wordsSegment.get(LE_INT, (long) index * WORD);
            } else {
                fail(new PeerLostException("protocol error: the peer sent " + wc.byteLength()
                        + " bytes without immediate data; a channel's notification is a " + WORD + "-byte word", null));
                return;
            }
            if (!closing && !peerDisconnected) {
                int rc = qp.tryPostRecv(recvs[index]);
                if (rc != 0) {
                    fail(new PeerLostException("reposting a receive on " + qp + " failed",
                            new VerbsException("ibv_post_recv", rc, "on " + qp)));
                    return;
                }
            }
            if ((imm & IMM_CONTROL) != 0) {
                applyCredit(imm);
                if ((imm & IMM_FIN) != 0) {
                    finReceived = true;
                    notifyAll();
                }
            } else if (!finReceived) {
                onData(imm);
            }
        } else if (kind == KIND_DATA) {
            writesInFlight--;
            if (posted < filled && failure == null) {
                postPending();
            }
            notifyAll();
        } else if (kind == KIND_CREDIT) {
            creditInFlight = false;
            maybeSendCredit();
            notifyAll();
        } else if (kind == KIND_FIN) {
            finDone = true;
            notifyAll();
        }
    }

    private void onError(Completion wc, long kind) {
        if (kind == KIND_DATA) {
            writesInFlight--;
        } else if (kind == KIND_CREDIT) {
            creditInFlight = false;
        } else if (kind == KIND_FIN) {
            finDone = true;
        }
        boolean expected = wc.status() == WcStatus.WR_FLUSH_ERROR && (closing || finReceived);
        if (!expected) {
            fail(new PeerLostException("the connection to " + peerName() + " failed: " + wc.status()
                    + (kind == KIND_RECV ? " on a receive" : sendNotify ? " on an RDMA WRITE or its SEND" : " on an RDMA WRITE"),
                    wc.error()));
        }
        notifyAll();
    }

    /** The connection manager reported DISCONNECTED (or the device went away). */
    synchronized void onDisconnected(String what) {
        peerDisconnected = true;
        if (!disconnectCalled && !closed) {
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
        if (peerDisconnected && !finReceived && !closing && !closed && failure == null) {
            fail(new PeerLostException("the peer " + peerName() + " disconnected without closing the channel", null));
        }
    }

    /** A failure of the library's own handling of this channel's completion: the channel fails, the group goes on. */
    synchronized void internalFailure(RuntimeException e) {
        fail(new PeerLostException("handling a completion of the channel to " + peerName() + " failed: " + e, e));
    }

    private void fail(ChannelException cause) {
        if (failure == null && !closed) {
            failure = cause;
        }
        notifyAll();
    }

    /** Whether the peer went away without closing ({@link PeerLostException}), and why; {@code null} if not. */
    public synchronized ChannelException failure() {
        return failure;
    }

    private String peerName() {
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
     * <p><b>Errors</b>: {@link ChannelException} when staged messages could not be delivered
     * (the peer was lost, or the close timed out); the resources are released all the same.
     */
    @Override
    public void close() {
        ChannelException undelivered = null;
        synchronized (this) {
            if (closed || closing) {
                return;
            }
            closing = true;
            notifyAll();
            if (appPolling) {
                // completions nobody polled yet (WRITEs the peer has, a disconnect) count first
                while (group.drive() == ChannelGroup.DROVE) {
                    Thread.onSpinWait();
                }
            }
            long deadline = System.nanoTime() + closeTimeoutNanos;
            try {
                if (peerReady && failure == null && !finReceived && !peerDisconnected) {
                    while ((posted < filled || writesInFlight > 0) && failure == null && !peerDisconnected) {
                        if (posted < filled && writesInFlight < writesInFlightLimit + 1) {
                            postPending();
                        }
                        long left = deadline - System.nanoTime();
                        if (left <= 0) {
                            break;
                        }
                        await(left);
                    }
                    if (posted == filled && writesInFlight == 0 && failure == null && !peerDisconnected) {
                        if (postControl(IMM_CONTROL | IMM_FIN | (int) (freed & COUNT_MASK), KIND_FIN) == 0) {
                            finPosted = true;
                            while (!finDone && failure == null && !peerDisconnected) {
                                long left = deadline - System.nanoTime();
                                if (left <= 0) {
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
            if ((failure != null || peerDisconnected) && !finReceived && (posted < filled || writesInFlight > 0)) {
                undelivered = new PeerLostException("closing the channel to " + peerName() + ": "
                        + (filled - posted) + " staged slots and " + writesInFlight + " WRITEs were not delivered", failure);
            } else if (peerReady && !finReceived && !peerDisconnected && failure == null && (!finDone || posted < filled)) {
                undelivered = new ChannelException("closing the channel to " + peerName() + " timed out after "
                        + Duration.ofNanos(closeTimeoutNanos) + " with " + writesInFlight + " WRITEs in flight", null);
            }
            if (!disconnectCalled) {
                disconnectCalled = true;
                try {
                    id.disconnect();
                } catch (RuntimeException e) {
                    // not connected (the peer went first): nothing to tell it
                }
            }
            closed = true;
            notifyAll();
        }
        group.unregister(this);
        try {
            id.close();
        } finally {
            ring.close();
            words.close();
            MemoryRegion s = stage;
            if (s != null) {
                s.close();
            }
            if (ownsGroup) {
                group.close();
            }
        }
        if (undelivered != null) {
            throw undelivered;
        }
    }

    /** Closes after a failed setup: no handshake happened. */
    void abandon() {
        synchronized (this) {
            closed = true;
        }
        group.unregister(this);
        try {
            id.close();
        } finally {
            ring.close();
            words.close();
            if (stage != null) {
                stage.close();
            }
        }
    }

    /** Whether {@link #close()} ran. */
    public synchronized boolean isClosed() {
        return closed;
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
