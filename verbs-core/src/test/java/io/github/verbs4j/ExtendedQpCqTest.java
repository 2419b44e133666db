package io.github.verbs4j;

import io.github.verbs4j.testsupport.ThreadMeter;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The extended QP (post-send API over {@code ibv_qp_ex}) and the extended CQ (polling over
 * {@code ibv_cq_ex}): byte-exact data through every builder, the completions read through the
 * {@code read_*} accessors, and the bad flows. Runs on softrdma and rxe; on an iWARP device (siw)
 * it is skipped: the pairs are connected by hand.
 */
class ExtendedQpCqTest {

    private static final SendOp[] RC_OPS = {SendOp.SEND, SendOp.SEND_WITH_IMM, SendOp.RDMA_WRITE,
            SendOp.RDMA_WRITE_WITH_IMM, SendOp.RDMA_READ, SendOp.ATOMIC_CMP_AND_SWP, SendOp.ATOMIC_FETCH_AND_ADD};
    private static final WcField[] FIELDS = {WcField.BYTE_LEN, WcField.IMM, WcField.QP_NUM, WcField.SRC_QP,
            WcField.SLID, WcField.SL, WcField.DLID_PATH_BITS};
    private static final int SIZE = 1 << 20;

    private final Random random = new Random(13);
    private Context ctx;
    private ProtectionDomain pd;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private QueuePair a;
    private QueuePair b;
    private MemoryRegion mrA;
    private MemoryRegion mrB;

    /** One completion as read in a poll session. */
    record Wc(long id, WcStatus status, WcOpcode opcode, int byteLen, int qp, int srcQp, int flags, int imm) {
    }

    private void up(QpType type, SendOp... ops) {
        ctx = Rig.open();
        Rig.assumeHandConnect(ctx);
        pd = ctx.allocatePd();
        cqA = ctx.createExtendedCq(64, null, 0, FIELDS);
        cqB = ctx.createExtendedCq(64, null, 0, FIELDS);
        a = pd.queuePair(type).cq(cqA).maxSendWr(16).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64)
                .sendOps(ops).build();
        b = pd.queuePair(type).cq(cqB).maxSendWr(16).maxRecvWr(32).maxSendSge(4).maxRecvSge(4).maxInline(64)
                .sendOps(ops).build();
        Access[] all = {Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC};
        mrA = pd.allocate(SIZE, all);
        mrB = pd.allocate(SIZE, all);
        if (type == QpType.UD) {
            a.activate(ConnectOptions.defaults());
            b.activate(ConnectOptions.defaults());
        } else {
            Endpoint ea = a.endpoint();
            Endpoint eb = b.endpoint();
            a.connect(eb);
            b.connect(ea);
        }
    }

    @AfterEach
    void down() {
        Rig.closeQuietly(mrB, mrA, b, a, cqB, cqA, pd, ctx);
    }

    private byte[] fill(MemoryRegion mr, long offset, int length) {
        byte[] data = new byte[length];
        random.nextBytes(data);
        MemorySegment.copy(MemorySegment.ofArray(data), 0, mr.segment(), offset, length);
        return data;
    }

    private static byte[] read(MemoryRegion mr, long offset, int length) {
        return mr.segment().asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
    }

    /**
     * Polls {@code n} completions within 5 s through start/next/end_poll. On softrdma a pass
     * takes every completion there is (ibv_next_poll until ENOENT); on a kernel device one per
     * pass: the rxe provider of rdma-core before 55 (Debian 12's 44 in the rxe tier) moves the
     * consumer index one entry too far when ibv_end_poll follows an ENOENT from ibv_next_poll
     * (PollSession, docs/substrates.md).
     */
    private static List<Wc> poll(CompletionQueue cq, int n) {
        List<Wc> out = new ArrayList<>();
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        boolean drain = Rig.onSoftrdma();
        while (out.size() < n && System.nanoTime() < deadline) {
            try (PollSession p = cq.startPoll()) {
                int before = out.size();
                while (out.size() < n && (drain || out.size() == before) && p.next()) {
                    out.add(new Wc(p.wrId(), p.status(), p.opcode(), p.byteLen(), p.qpNumber(), p.sourceQp(), p.wcFlags(),
                            p.immediate()));
                }
            }
        }
        if (out.size() < n) {
            fail("only " + out.size() + " of " + n + " completions on " + cq + " within 5 s: " + out);
        }
        return out;
    }

    private static void assertEmpty(CompletionQueue cq) {
        try (PollSession p = cq.startPoll()) {
            assertFalse(p.next(), () -> "no completion expected on " + cq);
            assertTrue(p.isEmpty());
        }
    }

    @Test
    void aBatchOfSendWriteAndReadMovesTheBytesExactly() {
        up(QpType.RC, RC_OPS);
        for (int n : new int[] {1, 1024, 5000, 300_000}) {
            byte[] sent = fill(mrA, 0, n);
            byte[] written = fill(mrA, 400_000, n);
            byte[] remote = fill(mrB, 700_000, n);
            b.postRecv(ReceiveRequest.create().id(70).local(mrB, 0, n));
            try (PostSession s = a.startPosting()) {
                s.id(1).signaled(true).send().sge(mrA, 0, n);
                s.id(2).rdmaWrite(mrB.address() + 400_000, mrB.rkey()).sge(mrA, 400_000, n);
                s.id(3).rdmaRead(mrB.address() + 700_000, mrB.rkey()).sge(mrA.slice(700_000, n));
            }
            List<Wc> wcs = poll(cqA, 3);
            assertEquals(List.of(1L, 2L, 3L), wcs.stream().map(Wc::id).toList(), "completions in order");
            assertEquals(List.of(WcOpcode.SEND, WcOpcode.RDMA_WRITE, WcOpcode.RDMA_READ),
                    wcs.stream().map(Wc::opcode).toList());
            wcs.forEach(w -> assertEquals(WcStatus.SUCCESS, w.status()));
            assertEquals(n, wcs.get(2).byteLen(), "READ byte_len");
            assertEquals(a.qpNumber(), wcs.get(0).qp());
            Wc r = poll(cqB, 1).getFirst();
            assertEquals(70, r.id());
            assertEquals(WcStatus.SUCCESS, r.status());
            assertEquals(WcOpcode.RECV, r.opcode());
            assertEquals(n, r.byteLen(), "receive byte_len");
            assertEquals(b.qpNumber(), r.qp());
            // libibverbs defines src_qp for UD only; rxe's kernel fills it from a DETH (UD) alone
            // and leaves 0 for RC, and softrdma does the same
            assertEquals(0, r.srcQp(), "src_qp of an RC receive");
            assertArrayEquals(sent, read(mrB, 0, n), "SEND data of " + n + " bytes");
            assertArrayEquals(written, read(mrB, 400_000, n), "WRITE data of " + n + " bytes");
            assertArrayEquals(remote, read(mrA, 700_000, n), "READ data of " + n + " bytes");
        }
    }

    @Test
    void immediatesAtomicsInlineAndGather() {
        up(QpType.RC, RC_OPS);
        b.postRecv(ReceiveRequest.create().id(71).local(mrB, 0, 64));
        b.postRecv(ReceiveRequest.create().id(72).local(mrB, 64, 64));
        byte[] imm = fill(mrA, 0, 16);
        byte[] wimm = fill(mrA, 100, 100);
        try (PostSession s = a.startPosting()) {
            s.id(4).sendImm(0xa1b2c3d4).sge(mrA, 0, 16);
            s.id(5).rdmaWriteImm(mrB.address() + 65_536, mrB.rkey(), 0x01020304).sge(mrA, 100, 100);
        }
        assertEquals(List.of(4L, 5L), poll(cqA, 2).stream().map(Wc::id).toList());
        List<Wc> r = poll(cqB, 2);
        assertEquals(WcOpcode.RECV, r.get(0).opcode());
        assertEquals(0xa1b2c3d4, r.get(0).imm(), "the immediate reads back in host order");
        assertEquals(16, r.get(0).byteLen());
        assertEquals(WcOpcode.RECV_RDMA_WITH_IMM, r.get(1).opcode());
        assertEquals(0x01020304, r.get(1).imm());
        assertEquals(100, r.get(1).byteLen());
        assertArrayEquals(imm, read(mrB, 0, 16));
        assertArrayEquals(wimm, read(mrB, 65_536, 100));

        MemorySegment target = mrB.segment().asSlice(128 * 1024, 8);
        target.set(ValueLayout.JAVA_LONG, 0, 40);
        try (PostSession s = a.startPosting()) {
            s.id(6).atomicFetchAdd(mrB.address() + 128 * 1024, mrB.rkey(), 2).sge(mrA, 0, 8);
            s.id(7).atomicCmpSwp(mrB.address() + 128 * 1024, mrB.rkey(), 42, 7).sge(mrA, 8, 8);
        }
        List<Wc> at = poll(cqA, 2);
        assertEquals(List.of(WcOpcode.ATOMIC_FETCH_AND_ADD, WcOpcode.ATOMIC_CMP_AND_SWP), at.stream().map(Wc::opcode).toList());
        assertEquals(40, mrA.segment().get(ValueLayout.JAVA_LONG, 0), "fetch-add returns the old value");
        assertEquals(42, mrA.segment().get(ValueLayout.JAVA_LONG, 8), "compare-swap returns the old value");
        assertEquals(7, target.get(ValueLayout.JAVA_LONG, 0));

        // inline pieces from unregistered memory, copied when set; an SGE list gathered in order.
        // The list's entries differ in length on softrdma only: rxe's wr_set_sge_list before
        // rdma-core 64 (Debian 12 has 44) takes the first entry's length for every entry, so 5,
        // 7 and 9 bytes would send 15 (docs/substrates.md); entries of one length work there.
        int[] lengths = Rig.onSoftrdma() ? new int[] {5, 7, 9} : new int[] {7, 7, 7};
        b.postRecv(ReceiveRequest.create().id(73).local(mrB, 0, 256));
        b.postRecv(ReceiveRequest.create().id(74).local(mrB, 1024, 256));
        byte[] p1 = new byte[10];
        byte[] p2 = new byte[30];
        random.nextBytes(p1);
        random.nextBytes(p2);
        byte[] g = fill(mrA, 0, 256);
        try (Arena arena = Arena.ofConfined(); PostSession s = a.startPosting()) {
            MemorySegment s1 = arena.allocate(10).copyFrom(MemorySegment.ofArray(p1));
            MemorySegment s2 = arena.allocate(30).copyFrom(MemorySegment.ofArray(p2));
            s.id(8).send().inlineData(s1).inlineData(s2);
            s1.fill((byte) 0); // copied already
            s2.fill((byte) 0);
            s.id(9).send().sge(mrA, 200, lengths[0]).sge(mrA, 0, lengths[1]).sge(mrA, 50, lengths[2]);
        }
        List<Wc> sg = poll(cqA, 2);
        assertEquals(List.of(8L, 9L), sg.stream().map(Wc::id).toList());
        sg.forEach(w -> assertEquals(WcStatus.SUCCESS, w.status(), w::toString));
        List<Wc> rg = poll(cqB, 2);
        int total = lengths[0] + lengths[1] + lengths[2];
        assertEquals(40, rg.get(0).byteLen(), "byte_len of the two-piece inline send");
        assertEquals(total, rg.get(1).byteLen(), "byte_len of the gathered send");
        byte[] expectInline = new byte[40];
        System.arraycopy(p1, 0, expectInline, 0, 10);
        System.arraycopy(p2, 0, expectInline, 10, 30);
        assertArrayEquals(expectInline, read(mrB, 0, 40));
        byte[] expectGather = new byte[total];
        System.arraycopy(g, 200, expectGather, 0, lengths[0]);
        System.arraycopy(g, 0, expectGather, lengths[0], lengths[1]);
        System.arraycopy(g, 50, expectGather, lengths[0] + lengths[1], lengths[2]);
        assertArrayEquals(expectGather, read(mrB, 1024, total));

        // one inline piece, and an inline RDMA WRITE
        byte[] one = new byte[24];
        byte[] w24 = new byte[24];
        random.nextBytes(one);
        random.nextBytes(w24);
        b.postRecv(ReceiveRequest.create().id(76).local(mrB, 0, 256));
        try (Arena arena = Arena.ofConfined(); PostSession s = a.startPosting()) {
            s.id(11).send().inlineData(arena.allocate(24).copyFrom(MemorySegment.ofArray(one)));
            s.id(12).rdmaWrite(mrB.address() + 2048, mrB.rkey()).inlineData(arena.allocate(24).copyFrom(MemorySegment.ofArray(w24)));
        }
        List<Wc> si = poll(cqA, 2);
        assertEquals(List.of(11L, 12L), si.stream().map(Wc::id).toList());
        si.forEach(w -> assertEquals(WcStatus.SUCCESS, w.status(), w::toString));
        Wc ri = poll(cqB, 1).getFirst();
        assertEquals(76, ri.id());
        assertEquals(24, ri.byteLen());
        assertArrayEquals(one, read(mrB, 0, 24));
        assertArrayEquals(w24, read(mrB, 2048, 24));

        // unsignaled: delivered, no send completion
        b.postRecv(ReceiveRequest.create().id(75).local(mrB, 0, 64));
        try (PostSession s = a.startPosting()) {
            s.id(10).signaled(false).send().sge(mrA, 0, 4);
        }
        assertEquals(75, poll(cqB, 1).getFirst().id());
        assertEmpty(cqA);
    }

    @Test
    void aWrongRkeyCompletesWithRemoteAccessError() {
        up(QpType.RC, RC_OPS);
        fill(mrA, 0, 8);
        try (PostSession s = a.startPosting()) {
            s.id(12).rdmaWrite(mrB.address(), mrB.rkey() + 1000).sge(mrA, 0, 8);
        }
        Wc w = poll(cqA, 1).getFirst();
        assertEquals(12, w.id());
        assertEquals(WcStatus.REMOTE_ACCESS_ERROR, w.status());
    }

    @Test
    void udSendThroughSetUdAddr() {
        up(QpType.UD, SendOp.SEND, SendOp.SEND_WITH_IMM);
        Endpoint eb = b.endpoint(1, 1);
        try (AddressHandle ah = pd.createAh(AddressVector.to(eb).port(1).sgidIndex(1))) {
            byte[] msg = fill(mrA, 0, 512);
            b.postRecv(ReceiveRequest.create().id(5).local(mrB, 0, 40 + 1024));
            try (PostSession s = a.startPosting()) {
                s.id(6).sendImm(0x5151).udAddress(ah, eb.qpn(), ConnectOptions.DEFAULT_QKEY).sge(mrA, 0, 512);
            }
            assertEquals(6, poll(cqA, 1).getFirst().id());
            Wc r = poll(cqB, 1).getFirst();
            assertEquals(5, r.id());
            assertEquals(40 + 512, r.byteLen());
            assertEquals(a.qpNumber(), r.srcQp());
            assertEquals(0x5151, r.imm());
            assertArrayEquals(msg, read(mrB, 40, 512));
        }
    }

    @Test
    void udSendLongerThanTheActiveMtuIsRefusedInTheSession() {
        up(QpType.UD, SendOp.SEND);
        int mtu = ctx.port(1).query().activeMtu().bytes();
        Endpoint eb = b.endpoint(1, 1);
        try (AddressHandle ah = pd.createAh(AddressVector.to(eb).port(1).sgidIndex(1))) {
            PostSession s = a.startPosting();
            s.id(7).send().udAddress(ah, eb.qpn(), ConnectOptions.DEFAULT_QKEY).sge(mrA, 0, mtu);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> s.sge(mrA, mtu, 1),
                    "a second entry taking the message past the MTU");
            assertTrue(e.getMessage().contains("active MTU (" + mtu + " bytes)"), e.getMessage());
            assertThrows(IllegalStateException.class, s::commit, "the refusal aborted the batch");
            // nothing was posted: an MTU-sized send that follows is the first completion
            byte[] msg = fill(mrA, 0, mtu);
            b.postRecv(ReceiveRequest.create().id(8).local(mrB, 0, 40 + mtu));
            try (PostSession t = a.startPosting()) {
                t.id(9).send().udAddress(ah, eb.qpn(), ConnectOptions.DEFAULT_QKEY).sge(mrA, 0, mtu);
            }
            assertEquals(9, poll(cqA, 1).getFirst().id());
            Wc r = poll(cqB, 1).getFirst();
            assertEquals(40 + mtu, r.byteLen());
            assertArrayEquals(msg, read(mrB, 40, mtu));
        }
    }

    @Test
    void aChannelSignalsAnExtendedCq() {
        ctx = Rig.open();
        Rig.assumeHandConnect(ctx);
        try (CompletionChannel ch = ctx.createCompletionChannel()) {
            pd = ctx.allocatePd();
            cqA = ctx.createExtendedCq(16, null, 0, WcField.BYTE_LEN);
            cqB = ctx.createExtendedCq(16, ch, 0, FIELDS);
            a = pd.queuePair(QpType.RC).cq(cqA).sendOps(SendOp.SEND).build();
            b = pd.queuePair(QpType.RC).cq(cqB).sendOps(SendOp.SEND).build();
            mrA = pd.allocate(4096, Access.LOCAL_WRITE);
            mrB = pd.allocate(4096, Access.LOCAL_WRITE);
            Endpoint ea = a.endpoint();
            Endpoint eb = b.endpoint();
            a.connect(eb);
            b.connect(ea);
            assertTrue(cqB.isExtended());
            cqB.requestNotify(false);
            b.postRecv(ReceiveRequest.create().id(1).local(mrB, 0, 64));
            try (PostSession s = a.startPosting()) {
                s.id(2).send().sge(mrA, 0, 33);
            }
            assertSame(cqB, ch.await(Duration.ofSeconds(5)), "the channel names the extended CQ");
            Wc r = poll(cqB, 1).getFirst();
            assertEquals(1, r.id());
            assertEquals(33, r.byteLen());
            // the classic poll works on an extended queue too
            Completions wcs = cqA.completions(4);
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            while (cqA.poll(wcs) == 0 && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertEquals(1, wcs.count());
            assertEquals(2, wcs.get(0).wrId());
            assertEquals(WcOpcode.SEND, wcs.get(0).opcode());
            // the channel closes after the queue that uses it (which acknowledges the event)
            b.close();
            cqB.close();
        }
    }

    @Test
    void misuseIsRefusedBeforeTheProvider() {
        up(QpType.RC, SendOp.SEND, SendOp.RDMA_WRITE);
        // an operation the QP was not created for: refused, and the batch dropped
        b.postRecv(ReceiveRequest.create().id(1).local(mrB, 0, 64));
        PostSession s = a.startPosting();
        s.id(1).send().sge(mrA, 0, 8);
        IllegalStateException notEnabled = assertThrows(IllegalStateException.class,
                () -> s.rdmaRead(mrB.address(), mrB.rkey()));
        assertTrue(notEnabled.getMessage().contains("RDMA_READ"), notEnabled.getMessage());
        assertFalse(s.isOpen(), "the batch was aborted");
        assertThrows(IllegalStateException.class, s::commit);
        // a setter before any operation
        PostSession s2 = a.startPosting();
        assertSame(s, s2, "one session object per QP");
        assertThrows(IllegalStateException.class, () -> s2.sge(mrA, 0, 8));
        // too much inline data, too many entries, a region of another PD, out of range
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment big = arena.allocate(65);
            assertThrows(IllegalArgumentException.class, () -> a.startPosting().send().inlineData(big));
        }
        assertThrows(IllegalArgumentException.class,
                () -> a.startPosting().send().sge(mrA, 0, 1).sge(mrA, 1, 1).sge(mrA, 2, 1).sge(mrA, 3, 1).sge(mrA, 4, 1));
        try (ProtectionDomain other = ctx.allocatePd(); MemoryRegion foreign = other.allocate(64, Access.LOCAL_WRITE)) {
            assertThrows(IllegalArgumentException.class, () -> a.startPosting().send().sge(foreign, 0, 8));
        }
        assertThrows(IndexOutOfBoundsException.class, () -> a.startPosting().send().sge(mrA, SIZE - 4, 8));
        // a second session while one is open
        PostSession open = a.startPosting();
        assertThrows(IllegalStateException.class, a::startPosting);
        open.abort();
        // nothing of all that reached the device
        sleep(20);
        assertEmpty(cqA);
        assertEmpty(cqB);
        // the receive is still there for a real send
        try (PostSession ok = a.startPosting()) {
            ok.id(3).send().sge(mrA, 0, 8);
        }
        assertEquals(3, poll(cqA, 1).getFirst().id());
        assertEquals(1, poll(cqB, 1).getFirst().id());

        // more requests than the send queue holds: the provider refuses the whole batch
        PostSession many = a.startPosting();
        // (4x the granted size: a device may round its ring up beyond what it reports)
        for (int i = 0; i <= 4 * a.capabilities().maxSendWr(); i++) {
            many.id(100 + i).rdmaWrite(mrB.address(), mrB.rkey()).sge(mrA, 0, 8);
        }
        VerbsException full = assertThrows(VerbsException.class, many::commit);
        assertEquals(Errno.ENOSPC.code(), full.errno(), full.getMessage());
        sleep(20);
        assertEmpty(cqA);

        // classic objects have no extended interface
        try (CompletionQueue classic = ctx.createCq(4);
             QueuePair plain = pd.queuePair(QpType.RC).cq(classic).build()) {
            assertThrows(IllegalStateException.class, classic::startPoll);
            assertThrows(IllegalStateException.class, plain::startPosting);
            assertFalse(plain.isExtended());
        }
        // a QP not yet in RTS
        try (QueuePair fresh = pd.queuePair(QpType.RC).cq(cqA).sendOps(SendOp.SEND).build()) {
            assertTrue(fresh.isExtended());
            assertThrows(IllegalStateException.class, fresh::startPosting);
        }
        // polling: accessors need a current completion and a field asked for
        try (CompletionQueue few = ctx.createExtendedCq(4, null, 0, WcField.QP_NUM)) {
            try (PollSession p = few.startPoll()) {
                assertThrows(IllegalStateException.class, p::wrId);
                assertFalse(p.next());
                assertThrows(IllegalStateException.class, p::byteLen);
                assertThrows(IllegalStateException.class, few::startPoll, "one pass at a time");
            }
        }
        // a field the device cannot report: refused as rxe refuses it
        VerbsException ts = assertThrows(VerbsException.class,
                () -> ctx.createExtendedCq(4, null, 0, WcField.COMPLETION_TIMESTAMP));
        assertEquals(Errno.EOPNOTSUPP.code(), ts.errno(), ts.getMessage());
        // an operation the QP type cannot do: refused at creation
        VerbsException udWrite = assertThrows(VerbsException.class,
                () -> pd.queuePair(QpType.UD).cq(cqA).sendOps(SendOp.RDMA_WRITE).build());
        assertEquals(Errno.EOPNOTSUPP.code(), udWrite.errno(), udWrite.getMessage());
    }

    // ---------------------------------------------------------------- close and sessions

    @Test
    void closingTheQpInsideItsOwnPostingSessionIsRefusedAndTheBatchStillPosts() {
        up(QpType.RC, SendOp.RDMA_WRITE);
        byte[] data = fill(mrA, 0, 64);
        PostSession s = a.startPosting();
        s.id(41).rdmaWrite(mrB.address() + 128, mrB.rkey()).sge(mrA, 0, 64);
        IllegalStateException inside = assertThrows(IllegalStateException.class, a::close);
        assertTrue(inside.getMessage().contains("posting session"), inside.getMessage());
        assertFalse(a.isClosed());
        assertTrue(s.isOpen(), "the refused close leaves the batch as it was");
        s.commit();
        Wc wc = poll(cqA, 1).getFirst();
        assertEquals(41, wc.id());
        assertEquals(WcStatus.SUCCESS, wc.status());
        assertArrayEquals(data, read(mrB, 128, 64));
        // once the session ended the QP closes, and refuses new sessions
        a.close();
        assertTrue(a.isClosed());
        IllegalStateException after = assertThrows(IllegalStateException.class, a::startPosting);
        assertTrue(after.getMessage().contains("closed"), after.getMessage());
    }

    @Test
    void aCloseOnAnotherThreadWaitsForTheOpenPostingSession() throws Exception {
        up(QpType.RC, SendOp.RDMA_WRITE);
        byte[] data = fill(mrA, 0, 64);
        PostSession s = a.startPosting();
        s.id(42).rdmaWrite(mrB.address() + 256, mrB.rkey()).sge(mrA, 0, 64);
        long[] closedAt = new long[1];
        Throwable[] failure = new Throwable[1];
        Thread closer = new Thread(() -> {
            try {
                a.close();
                closedAt[0] = System.nanoTime();
            } catch (Throwable t) {
                failure[0] = t;
            }
        }, "closer");
        closer.start();
        // the close has begun (the QP refuses new work: here a receive, harmless) but waits for this session's end
        String refused = null;
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (refused == null && System.nanoTime() < deadline) {
            try {
                a.postRecv(ReceiveRequest.create().id(7).local(mrA, 1024, 8));
                Thread.yield();
            } catch (IllegalStateException closing) {
                refused = closing.getMessage();
            } catch (VerbsException receiveQueueFull) {
                Thread.yield();
            }
        }
        assertTrue(refused != null && refused.contains("being closed"), "the close began: " + refused);
        sleep(200);
        assertTrue(closer.isAlive(), "the close waits for the open posting session");
        assertFalse(a.isClosed());
        long committedAt = System.nanoTime();
        s.commit();
        closer.join(Duration.ofSeconds(10).toMillis());
        assertFalse(closer.isAlive(), "the close finished once the session ended");
        if (failure[0] != null) {
            throw new AssertionError("close failed", failure[0]);
        }
        assertTrue(a.isClosed());
        assertTrue(closedAt[0] - committedAt > 0, "the QP was destroyed only after the commit");
        IllegalStateException after = assertThrows(IllegalStateException.class, a::startPosting);
        assertTrue(after.getMessage().contains("closed"), after.getMessage());
        if (Rig.onSoftrdma()) {
            // softrdma executes an in-process WRITE inside the post: the bytes landed before the destroy
            assertArrayEquals(data, read(mrB, 256, 64));
        }
    }

    @Test
    void aFieldNotAskedForIsRefused() {
        up(QpType.RC, SendOp.SEND);
        try (CompletionQueue few = ctx.createExtendedCq(4, null, 0, WcField.QP_NUM);
             QueuePair x = pd.queuePair(QpType.RC).sendCq(few).recvCq(cqA).sendOps(SendOp.SEND).build();
             QueuePair y = pd.queuePair(QpType.RC).cq(cqB).build()) {
            x.connect(y.endpoint());
            y.connect(x.endpoint());
            y.postRecv(ReceiveRequest.create().id(1).local(mrB, 0, 64));
            try (PostSession s = x.startPosting()) {
                s.id(9).send().sge(mrA, 0, 8);
            }
            long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
            boolean seen = false;
            while (!seen && System.nanoTime() < deadline) {
                try (PollSession p = few.startPoll()) {
                    if (p.next()) {
                        seen = true;
                        assertEquals(9, p.wrId());
                        assertEquals(x.qpNumber(), p.qpNumber());
                        assertEquals(WcOpcode.SEND, p.opcode());
                        IllegalStateException e = assertThrows(IllegalStateException.class, p::byteLen);
                        assertTrue(e.getMessage().contains("BYTE_LEN"), e.getMessage());
                        IllegalStateException inside = assertThrows(IllegalStateException.class, few::close);
                        assertTrue(inside.getMessage().contains("polling session"), inside.getMessage());
                    }
                }
            }
            assertTrue(seen, "the send completed");
        }
    }

    // ---------------------------------------------------------------- allocation

    @Test
    void postingAndPollingSessionsAllocateNothing() {
        up(QpType.RC, RC_OPS);
        long checksum = 0;
        for (int i = 0; i < 3; i++) {
            checksum += loop(10_000);
        }
        long allocated = Long.MAX_VALUE;
        for (int window = 0; window < 3; window++) {
            long before = ThreadMeter.allocatedBytes();
            checksum += loop(20_000);
            allocated = Math.min(allocated, ThreadMeter.allocatedBytes() - before);
        }
        assertTrue(checksum > 0);
        assertTrue(allocated < 1024, "steady-state session post/poll allocated " + allocated
                + " bytes over 20 000 iterations (the least of three windows)");
    }

    private long loop(int iterations) {
        long sum = 0;
        long remote = mrB.address();
        int rkey = mrB.rkey();
        boolean drain = Rig.onSoftrdma(); // one completion per pass elsewhere: see poll()
        for (int i = 0; i < iterations; i++) {
            try (PostSession s = a.startPosting()) {
                s.id(i).rdmaWrite(remote, rkey).sge(mrA, 0, 64);
            }
            boolean done = false;
            while (!done) {
                try (PollSession p = cqA.startPoll()) {
                    while (p.next()) {
                        if (!p.ok()) {
                            throw new IllegalStateException("completion " + p.status());
                        }
                        sum += p.wrId() + p.byteLen();
                        done = true;
                        if (!drain) {
                            break;
                        }
                    }
                }
            }
        }
        return sum + 1;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
