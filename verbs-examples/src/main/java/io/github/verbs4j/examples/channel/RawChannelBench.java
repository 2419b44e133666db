package io.github.verbs4j.examples.channel;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.Errno;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.WcOpcode;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventType;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.github.verbs4j.cm.QpInit;

import java.io.PrintWriter;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;

/**
 * {@code channel-bench --raw}: the channel's traffic on bare verbs4j verbs, to show what the
 * channel layer costs over the loop it is built on. Same two processes, message size, count,
 * window and round trips as {@link ChannelBench}, one connection, one thread per side that posts
 * and busy-polls its completion queues itself:
 *
 * <ul>
 *   <li>the server registers a ring of {@code slots} slots of {@code size} bytes (rounded up to
 *       64) and tells the client its address and rkey in the accept's private data;</li>
 *   <li>the client RDMA-WRITEs message {@code i} WITH_IMM (immediate: {@code i}) into slot
 *       {@code i % slots} from a registered buffer of {@code window} slots, every WRITE signaled,
 *       at most {@code window} of them in flight;</li>
 *   <li>each WRITE consumes one receive request at the server (posted without buffers,
 *       reposted at once); the server checks every message's length (the completion's byte
 *       count), immediate and the sequence number in its first 8 bytes, and returns credits as a
 *       zero-length WRITE_WITH_IMM (immediate: messages consumed) every quarter of the ring: the
 *       client never has more than {@code slots} messages unconsumed;</li>
 *   <li>after the last message the server writes a summary (count, and its allocation) into the
 *       client's small ring; then round trips: the client WRITEs a message into the server's
 *       ring, the server writes it back into the client's ring.</li>
 * </ul>
 *
 * Requests and completions are reused: nothing is allocated per message.
 */
final class RawChannelBench {

    /** "VCHR": the raw client's private data. */
    private static final int TAG = 0x5643_4852;
    private static final int VERSION = 1;
    /** Immediates of the server's WRITEs to the client: the top two bits say what it is. */
    private static final int IMM_KIND = 0xC000_0000;
    private static final int IMM_CREDIT = 0;
    private static final int IMM_DONE = 0x4000_0000;
    private static final int IMM_PONG = 0x8000_0000;
    private static final int COUNT_MASK = 0x3FFF_FFFF;
    /** The summary's size: count, allocated bytes, messages they were counted over. */
    private static final int DONE_BYTES = 24;
    private static final int CLIENT_RECVS = 32;
    private static final int SERVER_SEND_DEPTH = 32;
    private static final int EXTRA_SERVER_RECVS = 8;
    private static final ValueLayout.OfLong LONG = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    private final PrintWriter out;
    private final InetAddress host;
    private final int port;
    private final int size;
    private final long messages;
    private final int window;
    private final int slots;
    private final int pings;
    private final int warmup;
    private final Duration timeout;
    private final long streamWarmUpNanos;

    RawChannelBench(PrintWriter out, InetAddress host, int port, int size, long messages, int window, int slots,
            int pings, int warmup, Duration timeout, long streamWarmUpNanos) {
        if (window < 1 || window > 4096) {
            throw new IllegalArgumentException("the window must be within 1..4096, got " + window);
        }
        if (slots < 4 || slots > (1 << 20)) {
            throw new IllegalArgumentException("the ring needs 4 to 2^20 slots, got " + slots);
        }
        this.out = out;
        this.host = host;
        this.port = port;
        this.size = size;
        this.messages = messages;
        this.window = window;
        this.slots = slots;
        this.pings = pings;
        this.warmup = pings == 0 ? 0 : warmup;
        this.timeout = timeout;
        this.streamWarmUpNanos = streamWarmUpNanos;
    }

    private static int stride(int size) {
        return (Math.max(size, DONE_BYTES) + 63) & ~63;
    }

    /** How long a wait goes without progress before it looks at the peer's connection. */
    private static final long STALL_NANOS = 100_000_000L;
    private static final Duration CM_PEEK = Duration.ofMillis(1);

    /**
     * Watches a busy-polling wait (called every 4096 empty polls): whether its deadline passed,
     * and, once it has waited {@link #STALL_NANOS} for one thing, whether the peer disconnected
     * (then it throws): a peer that died ends the run at once instead of at the deadline.
     * Allocates only when it looks at the connection, after such a stall.
     */
    private static final class Watch {
        private final CmId id;
        private long stalledSince;
        private long looked;

        Watch(CmId id) {
            this.id = id;
        }

        /** Starts a wait. */
        void begin() {
            stalledSince = 0;
        }

        /** Whether the wait's {@code deadline} passed; throws when the peer disconnected. */
        boolean expired(long deadline) {
            long now = System.nanoTime();
            if (now - deadline > 0) {
                return true;
            }
            if (stalledSince == 0) {
                stalledSince = now;
            } else if (now - stalledSince > STALL_NANOS && now - looked > STALL_NANOS) {
                looked = now;
                CmEvent e = id.awaitEvent(CM_PEEK);
                if (e != null && (e.type() == CmEventType.DISCONNECTED || e.type() == CmEventType.DEVICE_REMOVAL)) {
                    throw new IllegalStateException("the peer disconnected (" + e.type() + ") while this side waited");
                }
            }
            return false;
        }
    }

    // ---- server --------------------------------------------------------------------------------

    int runServer() {
        try (EventChannel events = EventChannel.create();
             CmId listener = events.createId(PortSpace.TCP)) {
            listener.bind(new InetSocketAddress(host, port));
            listener.listen(1);
            out.printf("channel-bench --raw server listening on %s (port %d)%n", listener.localAddress(),
                    listener.localAddress().getPort());
            out.flush();
            CmEvent request = listener.getRequest(timeout.multipliedBy(10));
            if (request == null) {
                out.println("no client connected");
                return 1;
            }
            try (CmId id = request.id()) {
                return serve(id, request.privateData());
            }
        }
    }

    private int serve(CmId id, byte[] setupBytes) {
        ByteBuffer setup = ByteBuffer.wrap(setupBytes).order(ByteOrder.LITTLE_ENDIAN);
        if (setupBytes.length < 44 || setup.getInt(0) != TAG || setup.getInt(4) != VERSION) {
            id.reject(null);
            throw new IllegalStateException("not a channel-bench --raw " + VERSION + " client (private data of "
                    + setupBytes.length + " bytes)");
        }
        int msgSize = setup.getInt(8);
        long count = setup.getLong(12);
        int rounds = setup.getInt(24);
        long peerRing = setup.getLong(28);
        int peerRkey = setup.getInt(36);
        int peerStride = setup.getInt(40);
        if (msgSize < ChannelBench.MIN_SIZE || count < 1 || rounds < 0 || peerStride < stride(msgSize)) {
            id.reject(null);
            throw new IllegalStateException("the client announced size " + msgSize + ", count " + count + ", pings "
                    + rounds + ", a ring stride of " + peerStride);
        }
        int stride = stride(msgSize);
        Context ctx = id.context();
        if (lacksImmediateData(ctx)) {
            id.reject(null);
            throw noImmediateData(ctx);
        }
        try (ProtectionDomain pd = ctx.allocatePd();
             // confined, as the QP: this thread posts, polls and closes them (docs/guide.md,
             // "8.1 Confining a queue pair and its queues"), and closes the id after them
             CompletionQueue sendCq = ctx.createCq(SERVER_SEND_DEPTH * 2).confine();
             CompletionQueue recvCq = ctx.createCq(slots + EXTRA_SERVER_RECVS).confine();
             MemoryRegion ring = pd.allocate((long) slots * stride, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
             MemoryRegion summary = pd.allocate(64, Access.LOCAL_WRITE)) {
            try (QueuePair qp = id.createQueuePair(pd, sendCq, recvCq,
                    QpInit.defaults().withMaxSendWr(SERVER_SEND_DEPTH)
                            .withMaxRecvWr(slots + EXTRA_SERVER_RECVS)).confine()) {
                return serve(id, qp, sendCq, recvCq, ring, summary, msgSize, count, rounds, peerRing, peerRkey, peerStride);
            }
        }
    }

    private int serve(CmId id, QueuePair qp, CompletionQueue sendCq, CompletionQueue recvCq, MemoryRegion ring,
            MemoryRegion summary, int msgSize, long count, int rounds, long peerRing, int peerRkey, int peerStride) {
        int stride = stride(msgSize);
        ReceiveRequest recv = ReceiveRequest.create();
        for (int i = 0; i < slots + EXTRA_SERVER_RECVS; i++) {
            qp.postRecv(recv);
        }
        ByteBuffer accept = ByteBuffer.allocate(20).order(ByteOrder.LITTLE_ENDIAN);
        accept.putInt(TAG).putLong(ring.address()).putInt(ring.rkey()).putInt(slots);
        id.accept(ConnectParameters.defaults().withPrivateData(accept.array()), timeout);

        Server s = new Server(new Watch(id), qp, sendCq, recvCq, ring, recv, msgSize, stride, peerRing, peerRkey, peerStride);
        long warm = count / 5;
        long deadline = System.nanoTime() + streamWarmUpNanos + timeout.multipliedBy(10).toNanos();
        long before = 0;
        // the client's untimed warm-up first (marked in the message: StreamWarmUp), then count timed messages
        long seq = 0;
        long warmedUp = 0;
        for (long timed = 0; timed < count; seq++) {
            if (timed == warm) {
                before = Allocation.total();
            }
            if (s.receive(seq, deadline)) {
                if (timed > 0) {
                    throw new IllegalStateException("warm-up message " + seq + " after " + timed + " timed ones");
                }
                warmedUp++;
            } else {
                timed++;
            }
            s.consumed(seq + 1);
        }
        long streamed = seq;
        long allocated = Allocation.supported() ? Allocation.total() - before : -1;
        // the summary: the count and the allocation over the steady state
        summary.segment().set(LONG, 0, count);
        summary.segment().set(LONG, 8, allocated);
        summary.segment().set(LONG, 16, count - warm);
        s.post(s.reply.immediate(IMM_DONE).local(summary, 0, DONE_BYTES).remote(peerRing, peerRkey));
        // round trips: echo each into the client's ring (its second slot)
        for (int i = 0; i < rounds; i++) {
            long ping = streamed + i;
            s.receive(ping, System.nanoTime() + timeout.toNanos());
            long slot = (ping % slots) * stride;
            s.post(s.reply.immediate(IMM_PONG | (i & COUNT_MASK)).local(ring, slot, msgSize)
                    .remote(peerRing + peerStride, peerRkey));
        }
        s.drainSends(System.nanoTime() + timeout.toNanos());
        out.printf(Locale.ROOT, "received %d messages of %d bytes on 1 connection (and %d of untimed warm-up before them); "
                + "%.1f B/msg allocated%n", count, msgSize, warmedUp, Allocation.perMessage(allocated, count - warm));
        out.flush();
        // the client disconnects when it has its numbers
        CmEvent e = id.awaitEvent(timeout);
        if (e == null || e.type() != CmEventType.DISCONNECTED) {
            out.println("the client did not disconnect within " + timeout + (e == null ? "" : ": " + e));
            return 1;
        }
        return 0;
    }

    /** The server's loop state: one receive queue to take WRITEs from, a send queue for credits and replies. */
    private final class Server {
        final Watch watch;
        final QueuePair qp;
        final CompletionQueue sendCq;
        final CompletionQueue recvCq;
        final MemoryRegion ring;
        final ReceiveRequest recv;
        final int msgSize;
        final int stride;
        final SendRequest credit;
        final SendRequest reply = SendRequest.rdmaWriteWithImm(0).signaled();
        final Completions recvs = new Completions(64);
        final Completions sends = new Completions(16);
        final int batch = Math.max(1, slots / 4);
        int taken;
        int sendsInFlight;
        long reported;

        Server(Watch watch, QueuePair qp, CompletionQueue sendCq, CompletionQueue recvCq, MemoryRegion ring,
                ReceiveRequest recv, int msgSize, int stride, long peerRing, int peerRkey, int peerStride) {
            this.watch = watch;
            this.qp = qp;
            this.sendCq = sendCq;
            this.recvCq = recvCq;
            this.ring = ring;
            this.recv = recv;
            this.msgSize = msgSize;
            this.stride = stride;
            this.credit = SendRequest.rdmaWriteWithImm(0).signaled().sgeCount(0).remote(peerRing, peerRkey);
        }

        /**
         * Waits for message {@code seq}, checks it and reposts its receive; returns whether it is
         * one of the warm-up's (its sequence number has the top bit set: {@link Client#post}).
         */
        boolean receive(long seq, long deadline) {
            int spins = 0;
            watch.begin();
            while (taken == recvs.count()) {
                taken = 0;
                if (recvCq.poll(recvs) == 0 && (++spins & 0xfff) == 0 && watch.expired(deadline)) {
                    throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, "message " + seq
                            + " did not arrive within " + timeout);
                }
                reapSends();
            }
            Completion wc = recvs.get(taken++);
            if (!wc.ok()) {
                throw wc.error();
            }
            long slot = (seq % slots) * stride;
            long stamped = ring.segment().get(LONG, slot);
            if (wc.opcode() != WcOpcode.RECV_RDMA_WITH_IMM || wc.byteLength() != msgSize || wc.immediate() != (int) seq
                    || (stamped & Long.MAX_VALUE) != seq) {
                throw new IllegalStateException("message " + seq + ": " + wc.opcode() + " of " + wc.byteLength()
                        + " bytes, immediate " + wc.immediate() + ", sequence " + Long.toHexString(stamped));
            }
            qp.postRecv(recv);
            return stamped < 0;
        }

        /** Messages up to {@code consumed} were checked: return credits every quarter ring. */
        void consumed(long consumed) {
            if (consumed - reported >= batch) {
                post(credit.immediate(IMM_CREDIT | (int) (consumed & COUNT_MASK)));
                reported = consumed;
            }
        }

        void post(SendRequest request) {
            long deadline = System.nanoTime() + timeout.toNanos();
            int spins = 0;
            watch.begin();
            while (sendsInFlight >= SERVER_SEND_DEPTH) {
                if (reapSends() == 0 && (++spins & 0xfff) == 0 && watch.expired(deadline)) {
                    throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, "the send queue did not drain within "
                            + timeout);
                }
            }
            qp.postSend(request);
            sendsInFlight++;
        }

        int reapSends() {
            int n = sendCq.poll(sends);
            for (int i = 0; i < n; i++) {
                Completion wc = sends.get(i);
                if (!wc.ok()) {
                    throw wc.error();
                }
            }
            sendsInFlight -= n;
            return n;
        }

        void drainSends(long deadline) {
            int spins = 0;
            watch.begin();
            while (sendsInFlight > 0) {
                if (reapSends() == 0 && (++spins & 0xfff) == 0 && watch.expired(deadline)) {
                    throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, sendsInFlight
                            + " WRITEs did not complete within " + timeout);
                }
            }
        }
    }

    /** Whether the device reports the iWARP transport ({@code enum ibv_transport_type} 1), which has no immediate data. */
    private static boolean lacksImmediateData(Context ctx) {
        return ctx.device().transport() == io.github.verbs4j.TransportType.IWARP;
    }

    private static UnsupportedOperationException noImmediateData(Context ctx) {
        return new UnsupportedOperationException("channel-bench --raw sends RDMA WRITE with immediate data, which "
                + ctx.device().name() + " (iWARP) does not have; the channel itself (channel-bench without --raw) "
                + "notifies by SEND there");
    }

    // ---- client --------------------------------------------------------------------------------

    int runClient() {
        int stride = stride(size);
        try (EventChannel events = EventChannel.create();
             CmId id = events.createId(PortSpace.TCP)) {
            InetSocketAddress server = new InetSocketAddress(host, port);
            id.resolveAddress(null, server, timeout);
            id.resolveRoute(timeout);
            Context ctx = id.context();
            if (lacksImmediateData(ctx)) {
                throw noImmediateData(ctx);
            }
            try (ProtectionDomain pd = ctx.allocatePd();
                 // confined, as the QP: this thread posts, polls and closes them (docs/guide.md,
                 // "8.1 Confining a queue pair and its queues"), and closes the id after them
                 CompletionQueue sendCq = ctx.createCq(window + 1).confine();
                 CompletionQueue recvCq = ctx.createCq(CLIENT_RECVS).confine();
                 MemoryRegion source = pd.allocate((long) window * stride, Access.LOCAL_WRITE);
                 MemoryRegion ring = pd.allocate(2L * stride, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
                try (QueuePair qp = id.createQueuePair(pd, sendCq, recvCq,
                        QpInit.defaults().withMaxSendWr(window).withMaxRecvWr(CLIENT_RECVS)).confine()) {
                    int rc = connectAndRun(id, qp, sendCq, recvCq, source, ring, stride);
                    id.disconnect();
                    return rc;
                }
            }
        }
    }

    private int connectAndRun(CmId id, QueuePair qp, CompletionQueue sendCq, CompletionQueue recvCq,
            MemoryRegion source, MemoryRegion ring, int stride) {
        ReceiveRequest recv = ReceiveRequest.create();
        for (int i = 0; i < CLIENT_RECVS; i++) {
            qp.postRecv(recv);
        }
        ByteBuffer setup = ByteBuffer.allocate(44).order(ByteOrder.LITTLE_ENDIAN);
        setup.putInt(TAG).putInt(VERSION).putInt(size).putLong(messages).putInt(1).putInt(warmup + pings)
                .putLong(ring.address()).putInt(ring.rkey()).putInt(stride);
        CmEvent established = id.connect(ConnectParameters.defaults().withPrivateData(setup.array()), timeout);
        ByteBuffer answer = ByteBuffer.wrap(established.privateData()).order(ByteOrder.LITTLE_ENDIAN);
        if (answer.capacity() < 20 || answer.getInt(0) != TAG) {
            throw new IllegalStateException("the server is not a channel-bench --raw server (private data of "
                    + answer.capacity() + " bytes)");
        }
        long peerRing = answer.getLong(4);
        int peerRkey = answer.getInt(12);
        int peerSlots = answer.getInt(16);
        if (peerSlots < 4) {
            throw new IllegalStateException("the server's ring has " + peerSlots + " slots");
        }
        Client c = new Client(new Watch(id), qp, sendCq, recvCq, source, ring, recv, stride, peerRing, peerRkey, peerSlots);
        printHeader(id.remoteAddress(), peerSlots, stride);
        return c.run();
    }

    /** The client's loop state. */
    private final class Client {
        final Watch watch;
        final QueuePair qp;
        final CompletionQueue sendCq;
        final CompletionQueue recvCq;
        final MemoryRegion source;
        final MemoryRegion ring;
        final ReceiveRequest recv;
        final int stride;
        final long peerRing;
        final int peerRkey;
        final int peerSlots;
        final SendRequest write = SendRequest.rdmaWriteWithImm(0).signaled();
        final Completions sends = new Completions(64);
        final Completions recvs = new Completions(16);
        long sent;
        long completed;
        /** Messages the server consumed, as its credits said. */
        long credited;
        boolean done;
        long pongs;
        /** Whether {@link #post} marks its messages as the warm-up's. */
        boolean warmingUp;
        StreamWarmUp warmUp;

        Client(Watch watch, QueuePair qp, CompletionQueue sendCq, CompletionQueue recvCq, MemoryRegion source,
                MemoryRegion ring, ReceiveRequest recv, int stride, long peerRing, int peerRkey, int peerSlots) {
            this.watch = watch;
            this.qp = qp;
            this.sendCq = sendCq;
            this.recvCq = recvCq;
            this.source = source;
            this.ring = ring;
            this.recv = recv;
            this.stride = stride;
            this.peerRing = peerRing;
            this.peerRkey = peerRkey;
            this.peerSlots = peerSlots;
        }

        int run() {
            // the untimed warm-up, as the channel's run streams it (ChannelBench), then the timed stream
            warmUp = new StreamWarmUp(streamWarmUpNanos);
            long warmUpDeadline = System.nanoTime() + streamWarmUpNanos + timeout.toNanos();
            warmingUp = true;
            int spins = 0;
            watch.begin();
            while (!warmUp.over(sent)) {
                while (sent - completed >= window || sent - credited >= peerSlots) {
                    if (poll() == 0 && (++spins & 0xfff) == 0 && watch.expired(warmUpDeadline)) {
                        throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, "the warm-up's WRITEs did not "
                                + "complete within " + timeout);
                    }
                }
                post(sent);
                watch.begin();
            }
            warmingUp = false;
            long total = sent + messages;
            long warm = sent + messages / 5;
            long before = 0;
            long start = System.nanoTime();
            long deadline = start + timeout.multipliedBy(10).toNanos();
            spins = 0;
            watch.begin();
            while (completed < total) {
                while (sent < total && sent - completed < window && sent - credited < peerSlots) {
                    if (sent == warm) {
                        before = Allocation.total();
                    }
                    post(sent);
                    watch.begin();
                }
                if (poll() == 0 && (++spins & 0xfff) == 0 && watch.expired(deadline)) {
                    throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, (total - completed)
                            + " WRITEs not completed within " + timeout.multipliedBy(10));
                }
            }
            long allocated = Allocation.total() - before;
            spins = 0;
            watch.begin();
            while (!done) {
                if (poll() == 0 && (++spins & 0xfff) == 0 && watch.expired(deadline)) {
                    throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, "the server did not confirm "
                            + messages + " messages");
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            long peerCount = ring.segment().get(LONG, 0);
            long peerAllocated = ring.segment().get(LONG, 8);
            long peerCounted = ring.segment().get(LONG, 16);
            if (peerCount != messages || peerCounted < 1) {
                throw new IllegalStateException("the server confirmed " + peerCount + " of " + messages + " messages");
            }
            long[] rtt = new long[pings];
            long[] rttStart = new long[pings]; // for RoundTripTail: when each began
            // the warm-up's round trips first, not timed, as in the channel's run (ChannelBench)
            for (int i = 0; i < warmup + pings; i++) {
                long pingDeadline = System.nanoTime() + timeout.toNanos();
                long s = System.nanoTime();
                spins = 0;
                watch.begin();
                while (sent - completed >= window) {
                    if (poll() == 0 && (++spins & 0xfff) == 0 && watch.expired(pingDeadline)) {
                        throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, "WRITEs did not complete within "
                                + timeout);
                    }
                }
                post(total + i);
                spins = 0;
                watch.begin();
                while (pongs <= i) {
                    if (poll() == 0 && (++spins & 0xfff) == 0 && watch.expired(pingDeadline)) {
                        throw new VerbsException("channel-bench --raw", Errno.ETIMEDOUT, "pong " + i
                                + " did not come back within " + timeout);
                    }
                }
                if (i >= warmup) {
                    rtt[i - warmup] = System.nanoTime() - s;
                    rttStart[i - warmup] = s;
                }
                if (ring.segment().get(LONG, stride) != total + i) {
                    throw new IllegalStateException("pong " + i + " carried sequence " + ring.segment().get(LONG, stride));
                }
            }
            if (RoundTripTail.ENABLED) {
                RoundTripTail.print(out, rttStart, rtt);
            }
            Arrays.sort(rtt);
            double mbps = messages * (double) size / seconds / 1e6;
            double mpps = messages / seconds / 1e6;
            double half = pings == 0 ? Double.NaN : rtt[pings / 2] / 2e3;
            double p99 = pings == 0 ? Double.NaN : rtt[Math.min(pings - 1, (int) (pings * 0.99))] / 2e3;
            ChannelBench.printRow(out, size, messages, 1, mbps, mpps, half, p99,
                    Allocation.perMessage(allocated, total - warm),
                    peerAllocated < 0 ? Double.NaN : (double) peerAllocated / peerCounted);
            out.println(warmUp.describe());
            out.flush();
            return 0;
        }

        /** WRITEs message {@code seq} into its slot of the server's ring (the warm-up's with the top bit set). */
        void post(long seq) {
            long local = (seq % window) * stride;
            source.segment().set(LONG, local, warmingUp ? Long.MIN_VALUE | seq : seq);
            qp.postSend(write.immediate((int) seq).id(seq).local(source, local, size)
                    .remote(peerRing + (seq % peerSlots) * stride, peerRkey));
            sent = seq + 1;
        }

        /** Takes what both queues have; returns how many completions. */
        int poll() {
            int n = sendCq.poll(sends);
            for (int i = 0; i < n; i++) {
                Completion wc = sends.get(i);
                if (!wc.ok()) {
                    throw wc.error();
                }
                if (wc.wrId() != completed) {
                    throw new IllegalStateException("WRITE " + wc.wrId() + " completed where " + completed + " was next");
                }
                completed++;
            }
            int m = recvCq.poll(recvs);
            for (int i = 0; i < m; i++) {
                Completion wc = recvs.get(i);
                if (!wc.ok()) {
                    throw wc.error();
                }
                int imm = wc.immediate();
                switch (imm & IMM_KIND) {
                    case IMM_CREDIT -> credited += ((imm & COUNT_MASK) - credited) & COUNT_MASK;
                    case IMM_DONE -> {
                        if (wc.byteLength() != DONE_BYTES) {
                            throw new IllegalStateException("the server's summary has " + wc.byteLength() + " bytes");
                        }
                        done = true;
                    }
                    case IMM_PONG -> {
                        if ((imm & COUNT_MASK) != (int) (pongs & COUNT_MASK) || wc.byteLength() != size) {
                            throw new IllegalStateException("pong " + (imm & COUNT_MASK) + " of " + wc.byteLength()
                                    + " bytes where pong " + pongs + " of " + size + " was next");
                        }
                        pongs++;
                    }
                    default -> throw new IllegalStateException("unexpected immediate 0x" + Integer.toHexString(imm));
                }
                qp.postRecv(recv);
            }
            return n + m;
        }
    }

    private void printHeader(InetSocketAddress peer, int peerSlots, int stride) {
        out.println(ChannelBench.SEPARATOR);
        out.println("          verbs4j channel-bench --raw: the same WRITE_WITH_IMM traffic on bare verbs");
        out.printf(" Peer           : %s%n", peer);
        out.printf(" Connections    : 1 (one busy-polling thread per side)%n");
        out.printf(" Ring           : %d slots of %d bytes; %d WRITEs in flight, every one signaled%n", peerSlots, stride,
                window);
        out.printf(Locale.ROOT, " Stream         : timed after an untimed warm-up until the JIT is quiet (%.1f s at most)%n",
                streamWarmUpNanos / 1e9);
        out.printf(" Round trips    : %d timed, after %d of warm-up%n", pings, warmup);
        out.println(ChannelBench.SEPARATOR);
        out.println(ChannelBench.HEADER);
        out.flush();
    }
}
