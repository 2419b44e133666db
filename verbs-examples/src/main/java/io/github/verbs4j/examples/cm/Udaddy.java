package io.github.verbs4j.examples.cm;

import io.github.verbs4j.Access;
import io.github.verbs4j.AddressHandle;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.WcOpcode;
import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventException;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.ConnectParameters;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.github.verbs4j.cm.QpInit;
import io.github.verbs4j.cm.UdAddress;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The rdma_cm side of {@link UdaddyCommand}: one run of the client or the server.
 */
final class Udaddy {

    /** A UD receive starts with the 40-byte GRH slot. */
    static final int GRH = 40;
    /** rdma_cm's Q_Key for the RDMA_PS_UDP port space ({@code RDMA_UDP_QKEY}). */
    static final int UDP_QKEY = 0x01234567;
    private static final ValueLayout.OfInt NUMBER = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.BIG_ENDIAN);

    private final PrintWriter out;
    private final PrintWriter err;
    private final int count;
    private final int size;
    private final boolean validate;
    private final Duration step;

    Udaddy(PrintWriter out, PrintWriter err, int count, int size, boolean validate, Duration step) {
        this.out = out;
        this.err = err;
        this.count = count;
        this.size = size;
        this.validate = validate;
        this.step = step;
    }

    private void say(String line) {
        out.println(line);
        out.flush();
    }

    /** The resources of one end: a UD QP with {@code count} receives of {@code size + GRH} bytes. */
    private final class End implements AutoCloseable {
        final ProtectionDomain pd;
        final CompletionQueue cq;
        final MemoryRegion receives;
        final MemoryRegion sends;
        final QueuePair qp;
        final Completions wcs;

        End(CmId id) {
            Context ctx = id.context();
            ProtectionDomain p = ctx.allocatePd();
            CompletionQueue c = null;
            MemoryRegion r = null;
            MemoryRegion s = null;
            try {
                // Confined: the thread that makes an end posts, polls and closes it (close()), so
                // its posts and polls skip the close guard's mark (docs/guide.md, "8.1 Confining a
                // queue pair and its queues"); the id is closed on this thread too, after the end
                c = ctx.createCq(2 * count).confine();
                r = p.allocate((long) count * (size + GRH), Access.LOCAL_WRITE);
                s = p.allocate((long) count * size, Access.LOCAL_WRITE);
                qp = id.createQueuePair(p, c, c, QpInit.defaults().withMaxSendWr(count).withMaxRecvWr(count)).confine();
            } catch (RuntimeException | Error e) {
                for (AutoCloseable a : new AutoCloseable[] {s, r, c, p}) {
                    closeQuietly(a, e);
                }
                throw e;
            }
            pd = p;
            cq = c;
            receives = r;
            sends = s;
            wcs = c.completions(Math.min(2 * count, 64));
        }

        void postReceives() {
            for (int i = 0; i < count; i++) {
                qp.postRecv(ReceiveRequest.create().id(i).local(receives, (long) i * (size + GRH), size + GRH));
            }
        }

        /** The payload of receive {@code i} (after the GRH slot). */
        MemorySegment received(int i, int length) {
            return receives.segment().asSlice((long) i * (size + GRH) + GRH, length);
        }

        /** Sends datagram {@code i} from the send buffer: SEND with this QP's number as immediate data. */
        void send(int i, AddressHandle ah, int remoteQpn, int remoteQkey) {
            qp.postSend(SendRequest.sendWithImm(qp.qpNumber()).id(count + i).local(sends, (long) i * size, size)
                    .ud(ah, remoteQpn, remoteQkey).signaled());
        }

        /**
         * Polls until {@code sends} SEND and {@code recvs} RECV completions arrived (the queue is
         * shared: a reply may come before the last send's completion); each RECV goes to {@code onRecv}.
         */
        void await(int sends, int recvs, String what, java.util.function.Consumer<Completion> onRecv) {
            long deadline = System.nanoTime() + step.toNanos();
            int sent = 0;
            int received = 0;
            int idle = 0;
            while (sent < sends || received < recvs) {
                int k = cq.poll(wcs);
                if (k == 0) {
                    if (System.nanoTime() - deadline > 0) {
                        throw failure(what + ": " + sent + " of " + sends + " send and " + received + " of " + recvs
                                + " receive completions within " + step.toSeconds() + " s");
                    }
                    if (++idle > 1000) {
                        LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(50));
                    }
                    continue;
                }
                idle = 0;
                for (int j = 0; j < k; j++) {
                    Completion wc = wcs.get(j);
                    if (!wc.ok()) {
                        throw wc.error();
                    }
                    if (wc.opcode() == WcOpcode.SEND && sent < sends) {
                        sent++;
                    } else if (wc.opcode() == WcOpcode.RECV && received < recvs) {
                        received++;
                        onRecv.accept(wc);
                    } else {
                        throw failure(what + ": an unexpected completion: " + wc);
                    }
                }
            }
        }

        @Override
        public void close() {
            RuntimeException first = null;
            for (AutoCloseable a : new AutoCloseable[] {sends, receives}) {
                try {
                    a.close();
                } catch (Exception e) {
                    first = first == null ? new RuntimeException(e) : first;
                }
            }
            // the QP belongs to the id (rdma_destroy_qp when the id closes); the CQ and PD outlive it
            qp.close();
            cq.close();
            pd.close();
            if (first != null) {
                throw first;
            }
        }
    }

    private static void closeQuietly(AutoCloseable a, Throwable into) {
        if (a == null) {
            return;
        }
        try {
            a.close();
        } catch (Exception e) {
            into.addSuppressed(e);
        }
    }

    int runClient(InetAddress bind, InetAddress server, int port) {
        say("udaddy: starting client");
        // a server that is not listening yet answers UNREACHABLE or REJECTED: tried again until
        // the step's time is up (its JVM may start slower than this one)
        long deadline = System.nanoTime() + step.toNanos();
        while (true) {
            int status = attempt(bind, server, port, deadline);
            if (status >= 0) {
                return status;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(500));
        }
    }

    /** One connection attempt: the exit status, or -1 for another try. */
    private int attempt(InetAddress bind, InetAddress server, int port, long deadline) {
        try (EventChannel channel = EventChannel.create(); CmId id = channel.createId(PortSpace.UDP)) {
            id.resolveAddress(bind == null ? null : new InetSocketAddress(bind, 0), new InetSocketAddress(server, port), step);
            id.resolveRoute(step);
            say("udaddy: connecting");
            try (End end = new End(id)) {
                end.postReceives();
                CmEvent established;
                try {
                    established = id.connect(ConnectParameters.defaults(),
                            Duration.ofNanos(Math.max(TimeUnit.MILLISECONDS.toNanos(100), deadline - System.nanoTime())));
                } catch (io.github.verbs4j.VerbsException e) {
                    if (!(e instanceof CmEventException) && !e.errnoName().equals("ETIMEDOUT")) {
                        throw e;
                    }
                    if (System.nanoTime() - deadline < 0) {
                        return -1;
                    }
                    err.println("udaddy: unable to connect to " + server.getHostAddress() + ":" + port + " within "
                            + step.toSeconds() + " s: " + e.getMessage());
                    err.flush();
                    return 1;
                }
                UdAddress peer = established.udAddress();
                if (peer == null) {
                    throw failure("the ESTABLISHED event carries no address handle attributes (ah_attr)");
                }
                say("udaddy: peer QP 0x" + Integer.toHexString(peer.qpNumber()) + ", Q_Key 0x" + Integer.toHexString(peer.qkey())
                        + (peer.dgid() == null ? "" : ", GID " + peer.dgid() + " from local GID index " + peer.sgidIndex()));
                try (AddressHandle ah = peer.createAh(end.pd)) {
                    for (int i = 0; i < count; i++) {
                        fill(end.sends.segment().asSlice((long) i * size, size), i);
                    }
                    say("initiating data transfers");
                    for (int i = 0; i < count; i++) {
                        end.send(i, ah, peer.qpNumber(), peer.qkey());
                    }
                    say("receiving data transfers");
                    boolean[] seen = new boolean[count];
                    end.await(count, count, "sending and receiving the replies", wc -> check(end, wc, seen, "reply"));
                    say("data transfers complete");
                    if (validate) {
                        say("udaddy: " + count + " replies of " + size + " bytes validated");
                    }
                }
            }
        }
        say("test complete");
        say("return status 0");
        return 0;
    }

    int runServer(InetAddress bind, int port) {
        say("udaddy: starting server");
        try (EventChannel channel = EventChannel.create(); CmId listener = channel.createId(PortSpace.UDP)) {
            listener.bind(new InetSocketAddress(bind == null ? InetAddress.getByAddress(new byte[4]) : bind, port));
            listener.listen(1);
            CmEvent request = null;
            while (request == null) {
                try {
                    request = listener.getRequest(step);
                } catch (io.github.verbs4j.VerbsException e) {
                    // udaddy's server waits for its client without a bound: only a timed-out wait is retried
                    if (!e.errnoName().equals("ETIMEDOUT")) {
                        throw e;
                    }
                }
            }
            try (CmId child = request.id(); End end = new End(child)) {
                end.postReceives();
                child.accept(ConnectParameters.defaults(), step);
                say("receiving data transfers");
                boolean[] seen = new boolean[count];
                int[] order = new int[count];
                int[] lengths = new int[count];
                int[] received = {0};
                AddressHandle[] ah = {null};
                int[] remoteQpn = {0};
                end.await(0, count, "receiving", wc -> {
                    if (ah[0] == null) {
                        // the way back: the completion and the GRH the first receive starts with
                        int slot = (int) wc.wrId();
                        ah[0] = end.pd.createAhFromCompletion(wc,
                                end.receives.segment().asSlice((long) slot * (size + GRH), GRH), child.portNumber());
                        remoteQpn[0] = wc.sourceQp();
                    }
                    check(end, wc, seen, "datagram");
                    order[received[0]] = (int) wc.wrId();
                    lengths[received[0]++] = wc.byteLength() - GRH;
                });
                try (AddressHandle back = ah[0]) {
                    say("sending replies");
                    for (int k = 0; k < count; k++) {
                        // the reply to receive k: its payload, echoed
                        int slot = order[k];
                        MemorySegment.copy(end.received(slot, lengths[k]), 0, end.sends.segment(), (long) k * size,
                                lengths[k]);
                        end.send(k, back, remoteQpn[0], UDP_QKEY);
                    }
                    end.await(count, 0, "sending the replies", wc -> { });
                }
                say("data transfers complete");
                if (validate) {
                    say("udaddy: " + count + " datagrams of " + size + " bytes validated");
                }
            }
        } catch (java.net.UnknownHostException e) {
            throw new AssertionError(e);
        }
        say("test complete");
        say("return status 0");
        return 0;
    }

    /** A received datagram: its length, and with -V its number (each once) and every byte. */
    private void check(End end, Completion wc, boolean[] seen, String what) {
        int length = wc.byteLength() - GRH;
        if (length != size) {
            throw failure("a " + what + " of " + length + " bytes, expected " + size);
        }
        if (!validate) {
            return;
        }
        MemorySegment data = end.received((int) wc.wrId(), length);
        int n = data.get(NUMBER, 0);
        if (n < 0 || n >= count) {
            throw failure("a " + what + " numbered " + n + ", outside 0.." + (count - 1));
        }
        if (seen[n]) {
            throw failure(what + " " + n + " arrived twice");
        }
        seen[n] = true;
        for (int j = MIN; j < size; j++) {
            byte want = pattern(n, j);
            if (data.get(ValueLayout.JAVA_BYTE, j) != want) {
                throw failure(what + " " + n + ": byte " + j + " is " + data.get(ValueLayout.JAVA_BYTE, j) + ", expected " + want);
            }
        }
    }

    private static final int MIN = UdaddyCommand.MIN_VALIDATED_SIZE;

    /** Datagram {@code n}: its number (big-endian) in the first 4 bytes when there is room, then the pattern. */
    static void fill(MemorySegment m, int n) {
        int from = 0;
        if (m.byteSize() >= MIN) {
            m.set(NUMBER, 0, n);
            from = MIN;
        }
        for (int j = from; j < m.byteSize(); j++) {
            m.set(ValueLayout.JAVA_BYTE, j, pattern(n, j));
        }
    }

    /** Byte {@code j} of datagram {@code n}: letters A..z, shifted by the datagram's number. */
    static byte pattern(int n, int j) {
        return (byte) ('A' + (n * 7 + j) % 58);
    }

    /** The exchange went wrong: one line from the tool (its handler reports UncheckedIOException). */
    private static UncheckedIOException failure(String why) {
        return new UncheckedIOException(why, new IOException(why));
    }
}
