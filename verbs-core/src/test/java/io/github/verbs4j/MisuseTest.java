package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Misuse never crashes the JVM: each case ends in a named exception, before the device sees it. */
class MisuseTest {

    private static void assertClosed(Object owner, org.junit.jupiter.api.function.Executable use) {
        IllegalStateException e = assertThrows(IllegalStateException.class, use);
        assertEquals(owner + " is closed", e.getMessage());
    }

    @Test
    void useAfterCloseOfEveryType() {
        Context ctx = Rig.open();
        if (Rig.iwarp(ctx)) {
            ctx.close();
            Rig.assumeNotIwarp(ctx, "it has no UD queue pairs (this test closes one with its address handle)");
        }
        ProtectionDomain pd = ctx.allocatePd();
        CompletionChannel ch = ctx.createCompletionChannel();
        CompletionQueue cq = ctx.createCq(8, ch, 0);
        SharedReceiveQueue srq = pd.createSrq(8, 1);
        QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build();
        QueuePair ud = pd.queuePair(QpType.UD).cq(cq).build();
        ud.activate();
        AddressHandle ah = pd.createAh(AddressVector.to(ud.endpoint()).port(1).sgidIndex(1));
        MemoryRegion mr = pd.allocate(4096);
        Completions wcs = cq.completions(4);

        mr.close();
        assertClosed(mr, mr::segment);
        assertClosed(mr, mr::remote);
        ReceiveRequest recvOnClosedMr = ReceiveRequest.create().local(mr, 0, 8);

        ah.close();
        qp.close();
        assertClosed(qp, () -> qp.postSend(SendRequest.send()));
        assertClosed(qp, () -> qp.postRecv(ReceiveRequest.create()));
        assertClosed(qp, qp::query);
        assertClosed(qp, qp::toError);
        ud.close();
        srq.close();
        assertClosed(srq, () -> srq.postRecv(ReceiveRequest.create()));
        assertClosed(srq, srq::query);
        assertClosed(srq, () -> srq.limit(1));
        cq.close();
        assertClosed(cq, () -> cq.poll(wcs));
        assertClosed(cq, () -> cq.requestNotify(false));
        assertClosed(cq, () -> cq.resize(16));
        ch.close();
        assertClosed(ch, ch::fd);
        assertClosed(ch, () -> ch.await(Duration.ZERO));
        pd.close();
        assertClosed(pd, () -> pd.allocate(64));
        assertClosed(pd, () -> pd.queuePair(QpType.RC));
        assertClosed(pd, () -> pd.createSrq(1, 1));
        ctx.close();
        assertClosed(ctx, ctx::allocatePd);
        assertClosed(ctx, ctx::queryDevice);
        assertClosed(ctx, () -> ctx.createCq(1));
        assertClosed(ctx, () -> ctx.port(1));
        assertClosed(ctx, () -> ctx.pollAsyncEvent(Duration.ZERO));
        assertTrue(recvOnClosedMr.toString().contains("ReceiveRequest"));

        // double close is a no-op for every type
        for (AutoCloseable c : new AutoCloseable[] {mr, ah, qp, ud, srq, cq, ch, pd, ctx}) {
            assertDoesNotThrow(c::close);
        }
    }

    @Test
    void closingParentsWithLiveChildrenIsRefusedNamingThem() {
        try (Context ctx = Rig.open()) {
            ProtectionDomain pd = ctx.allocatePd();
            CompletionChannel ch = ctx.createCompletionChannel();
            CompletionQueue cq = ctx.createCq(8, ch, 0);
            MemoryRegion mr = pd.allocate(4096);
            QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build();

            IllegalStateException e = assertThrows(IllegalStateException.class, pd::close);
            assertTrue(e.getMessage().startsWith("cannot close " + pd + ": still in use by 2 objects: "), e.getMessage());
            assertTrue(e.getMessage().contains(mr.toString()), e.getMessage());
            assertTrue(e.getMessage().contains(qp.toString()), e.getMessage());
            assertFalse(pd.isClosed(), "a refused close leaves the domain usable");
            pd.allocate(64).close();

            IllegalStateException c = assertThrows(IllegalStateException.class, cq::close);
            assertEquals("cannot close " + cq + ": still in use by 1 object: " + qp + "; close them first", c.getMessage());
            IllegalStateException h = assertThrows(IllegalStateException.class, ch::close);
            assertTrue(h.getMessage().contains(cq.toString()), h.getMessage());
            IllegalStateException x = assertThrows(IllegalStateException.class, ctx::close);
            assertTrue(x.getMessage().contains(pd.toString()) && x.getMessage().contains(cq.toString())
                    && x.getMessage().contains(ch.toString()), x.getMessage());

            qp.close();
            mr.close();
            pd.close();
            cq.close();
            ch.close();
        }
    }

    @Test
    void srqWithLiveQpRefusesToClose() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(8);
             SharedReceiveQueue srq = pd.createSrq(8, 1)) {
            QueuePair qp = pd.queuePair(QpType.RC).cq(cq).srq(srq).build();
            IllegalStateException e = assertThrows(IllegalStateException.class, srq::close);
            assertTrue(e.getMessage().contains(qp.toString()), e.getMessage());
            qp.close();
        }
    }

    @Test
    void buffersOutsideTheirRegionAreRejectedWhenSet() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); MemoryRegion mr = pd.allocate(4096)) {
            SendRequest wr = SendRequest.send();
            IndexOutOfBoundsException e = assertThrows(IndexOutOfBoundsException.class, () -> wr.local(mr, 4000, 97));
            assertTrue(e.getMessage().contains("[4000, 4097) is outside " + mr), e.getMessage());
            assertThrows(IndexOutOfBoundsException.class, () -> wr.local(mr, -1, 8));
            assertThrows(IndexOutOfBoundsException.class, () -> mr.slice(4096, 1));
            assertThrows(IndexOutOfBoundsException.class, () -> ReceiveRequest.create().local(mr, 0, 4097));
            assertThrows(IndexOutOfBoundsException.class, () -> wr.sge(SendRequest.DEFAULT_MAX_SGE, mr, 0, 1));
            // a negative int length is 2^32 - n bytes unsigned: outside too
            assertThrows(IndexOutOfBoundsException.class, () -> wr.local(mr, 0, -1));
            assertDoesNotThrow(() -> wr.local(mr, 4088, 8));
            assertDoesNotThrow(() -> wr.local(mr.slice(0, 4096)));
        }
    }

    @Test
    void aRegionOfAnotherDomainIsRejectedBeforeTheDevice() {
        try (Rig rig = Rig.rc(); ProtectionDomain other = rig.ctx.allocatePd(); MemoryRegion foreign = other.allocate(64)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> rig.a.postSend(SendRequest.send().id(4).local(foreign, 0, 8)));
            assertTrue(e.getMessage().contains("registered in another protection domain"), e.getMessage());
            assertThrows(IllegalArgumentException.class,
                    () -> rig.b.postRecv(ReceiveRequest.create().local(foreign, 0, 8)));
            assertEquals(0, rig.cqA.poll(rig.wcs), "the device saw nothing");
        }
    }

    @Test
    void aClosedRegionInARequestIsRejectedWhenPosted() {
        try (Rig rig = Rig.rc()) {
            MemoryRegion temp = rig.pd.allocate(64);
            SendRequest wr = SendRequest.send().local(temp, 0, 8).signaled();
            temp.close();
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.postSend(wr));
            assertEquals(temp + " is closed", e.getMessage());
            // a chain is checked as a whole: a bad request later in the chain stops all of it
            SendRequest good = SendRequest.send().id(1).local(rig.mrA, 0, 8).signaled();
            good.next(wr);
            assertThrows(IllegalStateException.class, () -> rig.a.postSend(good));
            assertEquals(0, rig.cqA.poll(rig.wcs), "nothing was posted");
        }
    }

    @Test
    void aRegionWhoseArenaWasClosedIsRejectedWhenPosted() {
        try (Rig rig = Rig.rc()) {
            Arena arena = Arena.ofShared();
            MemorySegment memory = arena.allocate(4096, 4096);
            MemoryRegion mr = rig.pd.register(memory, Access.LOCAL_WRITE);
            try {
                SendRequest wr = SendRequest.send().local(mr, 0, 64).signaled();
                ReceiveRequest recv = ReceiveRequest.create().local(mr, 0, 64);
                arena.close();
                IllegalStateException e = assertThrows(IllegalStateException.class, () -> rig.a.postSend(wr));
                assertTrue(e.getMessage().contains("arena of its memory was closed"), e.getMessage());
                assertThrows(IllegalStateException.class, () -> rig.b.postRecv(recv));
            } finally {
                mr.close();
            }
        }
    }

    @Test
    void aRegionKeepsAnAutomaticArenasMemoryAlive() {
        try (Rig rig = Rig.rc()) {
            // the only reference to this memory is the region's: without it the GC could free it
            MemoryRegion mr = rig.pd.register(Arena.ofAuto().allocate(4096, 4096), Access.LOCAL_WRITE);
            try {
                for (int i = 0; i < 5; i++) {
                    System.gc();
                    byte[] garbage = new byte[1 << 20];
                    garbage[i] = 1;
                }
                mr.segment().setString(0, "still here");
                rig.a.postSend(SendRequest.rdmaWrite().id(1).local(mr, 0, 11).remote(rig.mrB.remote()).signaled());
                rig.ok(rig.cqA);
                assertEquals("still here", rig.mrB.segment().getString(0));
            } finally {
                mr.close();
            }
        }
    }

    @Test
    void remoteAccessToMemoryTheCallerCanCloseIsRefusedUnlessUnsafe() {
        // Before: accepted, and a peer's RDMA WRITE after arena.close() landed in freed memory
        // (heap corruption or SIGSEGV in the provider), out of Java's reach.
        try (Rig rig = Rig.rc()) {
            for (Arena closeable : new Arena[] {Arena.ofConfined(), Arena.ofShared()}) {
                try (closeable) {
                    MemorySegment memory = closeable.allocate(4096, 4096);
                    for (Access remote : new Access[] {Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC}) {
                        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                                () -> rig.pd.register(memory, Access.LOCAL_WRITE, remote));
                        assertTrue(e.getMessage().contains("arena the caller can close")
                                && e.getMessage().contains("registerUnsafe"), e.getMessage());
                    }
                    // local access to the same memory is fine: every local use is checked at post
                    try (MemoryRegion local = rig.pd.register(memory, Access.LOCAL_WRITE)) {
                        assertEquals(java.util.Set.of(Access.LOCAL_WRITE), local.access());
                    }
                    // the explicit opt-in, with the caller closing the region before the arena
                    try (MemoryRegion unsafe = rig.pd.registerUnsafe(memory, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
                        rig.a.postSend(SendRequest.rdmaWrite().id(3).local(rig.mrA, 0, 8).remote(unsafe.remote()).signaled());
                        rig.ok(rig.cqA);
                    }
                }
            }
            // memory the region keeps alive: automatic and global arenas, and the library's own
            try (MemoryRegion auto = rig.pd.register(Arena.ofAuto().allocate(4096), Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                 MemoryRegion global = rig.pd.register(Arena.global().allocate(4096), Access.LOCAL_WRITE, Access.REMOTE_READ)) {
                assertTrue(auto.access().contains(Access.REMOTE_WRITE));
                assertTrue(global.access().contains(Access.REMOTE_READ));
            }
        }
    }

    @Test
    void registeringMemoryThatIsNotMappedFailsWithEfault() throws Throwable {
        // an address range the process does not map: mmap three pages, unmap the middle one
        java.lang.foreign.Linker linker = java.lang.foreign.Linker.nativeLinker();
        var lookup = linker.defaultLookup();
        java.lang.invoke.MethodHandle mmap = linker.downcallHandle(lookup.find("mmap").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                        ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
        java.lang.invoke.MethodHandle munmap = linker.downcallHandle(lookup.find("munmap").orElseThrow(),
                java.lang.foreign.FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        long page = 4096;
        // PROT_READ|PROT_WRITE = 3, MAP_PRIVATE|MAP_ANONYMOUS = 0x22
        MemorySegment m = (MemorySegment) mmap.invokeExact(MemorySegment.NULL, 3 * page, 3, 0x22, -1, 0L);
        assertTrue(m.address() != -1L, "mmap");
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd()) {
            assertEquals(0, (int) munmap.invokeExact(MemorySegment.ofAddress(m.address() + page), page));
            MemorySegment withHole = MemorySegment.ofAddress(m.address()).reinterpret(3 * page);
            VerbsException e = assertThrows(VerbsException.class, () -> pd.register(withHole, Access.LOCAL_WRITE));
            assertEquals(Errno.EFAULT, e.error(), e.getMessage());
            try (MemoryRegion first = pd.register(MemorySegment.ofAddress(m.address()).reinterpret(page), Access.LOCAL_WRITE)) {
                assertEquals(page, first.length());
            }
        } finally {
            int ignored = (int) munmap.invokeExact(MemorySegment.ofAddress(m.address()), 3 * page);
        }
    }

    @Test
    void registrationArgumentsAreChecked() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); Arena arena = Arena.ofConfined()) {
            assertThrows(IllegalArgumentException.class, () -> pd.register(MemorySegment.ofArray(new byte[64])));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> pd.register(arena.allocate(64), Access.REMOTE_WRITE));
            assertTrue(e.getMessage().contains("need LOCAL_WRITE"), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> pd.allocate(0));
            try (MemoryRegion mr = pd.register(arena.allocate(64))) {
                assertEquals(java.util.Set.of(Access.LOCAL_WRITE), mr.access(), "default is local access only");
            }
        }
    }

    @Test
    void opcodesAndShapesTheQpCannotCarryAreRejected() {
        try (Rig rig = Rig.rc()) {
            IllegalArgumentException noRemote = assertThrows(IllegalArgumentException.class,
                    () -> rig.a.postSend(SendRequest.rdmaWrite().id(9).local(rig.mrA, 0, 8)));
            assertEquals("RDMA_WRITE needs remote(address, rkey) (request 9)", noRemote.getMessage());
            IllegalArgumentException wide = assertThrows(IllegalArgumentException.class,
                    () -> rig.a.postSend(SendRequest.fetchAndAdd(1).local(rig.mrA, 0, 16).remote(rig.mrB.remote())));
            assertTrue(wide.getMessage().contains("exactly one local buffer of 8 bytes"), wide.getMessage());
            IllegalArgumentException unaligned = assertThrows(IllegalArgumentException.class,
                    () -> rig.a.postSend(SendRequest.fetchAndAdd(1).local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 4)));
            assertTrue(unaligned.getMessage().contains("8-byte aligned"), unaligned.getMessage());
            IllegalArgumentException tooLong = assertThrows(IllegalArgumentException.class,
                    () -> rig.a.postSend(SendRequest.send().local(rig.mrA, 0, 4096).inline(true)));
            assertTrue(tooLong.getMessage().contains("inlines 4096 bytes"), tooLong.getMessage());
        }
        try (Rig uc = Rig.create(QpType.UC, ConnectOptions.defaults(), Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> uc.a.postSend(SendRequest.rdmaRead().local(uc.mrA, 0, 8).remote(uc.mrB.remote())));
            assertEquals("RDMA_READ is not supported on UC QPs (request 0)", e.getMessage());
        }
        try (Rig ud = Rig.create(QpType.UD, ConnectOptions.defaults(), Access.LOCAL_WRITE)) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> ud.a.postSend(SendRequest.send().local(ud.mrA, 0, 8)));
            assertTrue(e.getMessage().contains("needs ud(addressHandle"), e.getMessage());
        }
    }

    @Test
    void aChainWithACycleIsRejected() {
        try (Rig rig = Rig.rc()) {
            SendRequest x = SendRequest.send().local(rig.mrA, 0, 8);
            SendRequest y = SendRequest.send().local(rig.mrA, 0, 8);
            x.next(y);
            y.next(x);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> rig.a.postSend(x));
            assertTrue(e.getMessage().contains("a cycle?"), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> x.next(x));
        }
    }

    @Test
    void openingAnUnknownDeviceNamesThoseThatExist() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Verbs.open("nosuchdev9"));
        assertTrue(e.getMessage().startsWith("no RDMA device named nosuchdev9 (devices: "), e.getMessage());
        assertTrue(e.getMessage().contains(Verbs.devices().getFirst().name()), e.getMessage());
    }

    @Test
    void queueCreationArgumentsAreChecked() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd()) {
            assertThrows(IllegalArgumentException.class, () -> ctx.createCq(0));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> pd.queuePair(QpType.RC).build());
            assertEquals("QueuePairBuilder: sendCq is required", e.getMessage());
            VerbsException tooBig = assertThrows(VerbsException.class, () -> ctx.createCq(Integer.MAX_VALUE));
            assertEquals("ibv_create_cq", tooBig.verb());
            assertEquals("EINVAL", tooBig.errnoName());
        }
    }
}
