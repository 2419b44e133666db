package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.EnumMap;
import java.util.EnumSet;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * On-demand paging: {@link Access#ON_DEMAND} regions over fresh file mappings (never touched
 * before the device writes them), an implicit region and memory mapped after it was registered,
 * memory unmapped after registration (a completion error, not a crash), a peer's operations racing
 * a thread that unmaps and maps the target again (the JVM lives), {@link MemoryRegion#advise}
 * and the device's {@link OdpCapabilities}. Runs where the device reports ODP (softrdma); skips,
 * saying so, where it does not (kernel rxe on Linux 6.1, siw): the check is the device's own
 * {@code odp_caps}, never its name.
 */
class OnDemandPagingTest {

    private static final int SIZE = 1 << 20;

    /** The device's ODP caps; skips unless it pages RC SEND/RECV/WRITE/READ on demand. */
    private static OdpCapabilities requireOdp(Rig rig) {
        OdpCapabilities caps = rig.ctx.odpCapabilities();
        assumeTrue(caps.supported() && caps.rc().containsAll(EnumSet.of(OdpCapabilities.Operation.SEND,
                OdpCapabilities.Operation.RECV, OdpCapabilities.Operation.WRITE, OdpCapabilities.Operation.READ)),
                () -> rig.ctx.device().name() + " reports no on-demand paging for RC SEND/RECV/WRITE/READ (odp_caps "
                        + caps + "; kernel rxe on Linux 6.1 has none (later kernels added it), siw none)");
        return caps;
    }

    private static void requireImplicit(Rig rig) {
        OdpCapabilities caps = requireOdp(rig);
        assumeTrue(caps.implicitSupported(), () -> rig.ctx.device().name() + " reports no implicit ODP (odp_caps " + caps + ")");
    }

    /** A shared mapping of a new sparse file of {@code size} bytes: no page of it is present yet. */
    private static MemorySegment mapFresh(FileChannel ch, long size, Arena arena) throws IOException {
        ch.write(ByteBuffer.wrap(new byte[1]), size - 1);
        return ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
    }

    private static FileChannel tempFile() throws IOException {
        Path f = Files.createTempFile("verbs4j-odp", ".bin");
        return FileChannel.open(f, StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.DELETE_ON_CLOSE);
    }

    private static void fill(MemorySegment s, long offset, int n, int seed) {
        for (int i = 0; i < n; i++) {
            s.set(ValueLayout.JAVA_BYTE, offset + i, (byte) (i * 31 + seed));
        }
    }

    private static byte[] bytes(MemorySegment s, long offset, int n) {
        return s.asSlice(offset, n).toArray(ValueLayout.JAVA_BYTE);
    }

    @Test
    void capabilitiesAreConsistentAndExactOnSoftrdma() {
        try (Context ctx = Rig.open()) {
            OdpCapabilities caps = ctx.odpCapabilities();
            if (caps.implicitSupported()) {
                assertTrue(caps.supported(), "implicit ODP without ODP: " + caps);
            }
            if (!caps.supported()) {
                assertTrue(caps.rc().isEmpty() && caps.ud().isEmpty(), "per-transport caps without ODP: " + caps);
            }
            if (Rig.onSoftrdma()) {
                assertEquals(new OdpCapabilities(3, 0x3f, 0, 0x3, 0), caps);
                assertEquals(EnumSet.allOf(OdpCapabilities.Operation.class), caps.rc());
                assertEquals(EnumSet.of(OdpCapabilities.Operation.SEND, OdpCapabilities.Operation.RECV), caps.ud());
                assertTrue(caps.uc().isEmpty() && caps.xrc().isEmpty());
            }
        }
    }

    /**
     * rdma-core's tests/test_odp.py (OdpRdmaRC): the regions and the QPs have the same access
     * flags, ON_DEMAND among them (the kernel takes any bits on a QP), then RC RDMA WRITE, READ,
     * FETCH_AND_ADD and CMP_AND_SWP on the on-demand regions, byte-exact.
     */
    @Test
    void rcReadWriteAndAtomicsOnOdpRegionsWithTheRegionsFlagsOnTheQps() {
        Access[] flags = {Access.LOCAL_WRITE, Access.ON_DEMAND, Access.REMOTE_ATOMIC, Access.REMOTE_READ,
                Access.REMOTE_WRITE};
        try (Rig probe = Rig.rc()) {
            requireOdp(probe);
        }
        try (Rig rig = Rig.create(QpType.RC, ConnectOptions.defaults().withAccess(flags), flags)) {
            assertTrue(rig.mrA.isOnDemand() && rig.mrB.isOnDemand());
            fill(rig.mrA.segment(), 0, 4096, 11);
            rig.a.postSend(SendRequest.rdmaWrite().id(1).local(rig.mrA, 0, 4096).remote(rig.mrB.remote(), 8192).signaled());
            rig.ok(rig.cqA);
            assertArrayEquals(bytes(rig.mrA.segment(), 0, 4096), bytes(rig.mrB.segment(), 8192, 4096));
            fill(rig.mrB.segment(), 20_000, 4096, 12);
            rig.a.postSend(SendRequest.rdmaRead().id(2).local(rig.mrA, 40_000, 4096).remote(rig.mrB.remote(), 20_000).signaled());
            rig.ok(rig.cqA);
            assertArrayEquals(bytes(rig.mrB.segment(), 20_000, 4096), bytes(rig.mrA.segment(), 40_000, 4096));

            assumeTrue(rig.ctx.odpCapabilities().rc().contains(OdpCapabilities.Operation.ATOMIC),
                    () -> rig.ctx.device().name() + " pages no RC atomics on demand");
            rig.mrB.segment().set(ValueLayout.JAVA_LONG, 64, 1L);
            rig.a.postSend(SendRequest.fetchAndAdd(2).id(3).local(rig.mrA, 0, 8).remote(rig.mrB.remote(), 64).signaled());
            rig.ok(rig.cqA);
            assertEquals(1L, rig.mrA.segment().get(ValueLayout.JAVA_LONG, 0));
            assertEquals(3L, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 64));
            rig.a.postSend(SendRequest.compareAndSwap(3, 9).id(4).local(rig.mrA, 8, 8).remote(rig.mrB.remote(), 64).signaled());
            rig.ok(rig.cqA);
            assertEquals(3L, rig.mrA.segment().get(ValueLayout.JAVA_LONG, 8));
            assertEquals(9L, rig.mrB.segment().get(ValueLayout.JAVA_LONG, 64));
        }
    }

    @Test
    void explicitOdpOverAFreshFileMappingIsByteExactAndReachesTheFile() throws IOException {
        try (Rig rig = Rig.rc(); FileChannel ch = tempFile(); Arena arena = Arena.ofShared()) {
            requireOdp(rig);
            MemorySegment file = mapFresh(ch, SIZE, arena);
            try (MemoryRegion odp = rig.pd.registerUnsafe(file, Access.ON_DEMAND, Access.LOCAL_WRITE,
                    Access.REMOTE_WRITE, Access.REMOTE_READ)) {
                assertTrue(odp.isOnDemand());
                assertFalse(odp.isImplicit());
                assertEquals(SIZE, odp.length());
                // A's WRITE lands in pages of B's file that were never touched
                fill(rig.mrA.segment(), 0, 40_000, 3);
                rig.a.postSend(SendRequest.rdmaWrite().id(1).local(rig.mrA, 0, 40_000).remote(odp.remote(), 500_001).signaled());
                rig.ok(rig.cqA);
                assertArrayEquals(bytes(rig.mrA.segment(), 0, 40_000), bytes(file, 500_001, 40_000));
                ByteBuffer back = ByteBuffer.allocate(40_000);
                assertEquals(40_000, ch.read(back, 500_001));
                assertArrayEquals(bytes(rig.mrA.segment(), 0, 40_000), back.array(), "the WRITE reached the file");
                // READ of untouched file pages gives zeros; READ of written ones the data
                rig.a.postSend(SendRequest.rdmaRead().id(2).local(rig.mrA, 0, 8192).remote(odp.remote(), 900_000).signaled());
                rig.ok(rig.cqA);
                assertArrayEquals(new byte[8192], bytes(rig.mrA.segment(), 0, 8192));
                rig.a.postSend(SendRequest.rdmaRead().id(3).local(rig.mrA, 10_000, 20_000).remote(odp.remote(), 500_001).signaled());
                rig.ok(rig.cqA);
                assertArrayEquals(bytes(file, 500_001, 20_000), bytes(rig.mrA.segment(), 10_000, 20_000));
                // B receives a SEND into untouched ODP memory and sends from ODP memory
                rig.b.postRecv(ReceiveRequest.create().id(4).local(odp, 700_000, 6000));
                fill(rig.mrA.segment(), 0, 5000, 9);
                rig.a.postSend(SendRequest.send().id(5).local(rig.mrA, 0, 5000).signaled());
                rig.ok(rig.cqA);
                Completion wc = rig.ok(rig.cqB);
                assertEquals(4, wc.wrId());
                assertEquals(5000, wc.byteLength());
                assertArrayEquals(bytes(rig.mrA.segment(), 0, 5000), bytes(file, 700_000, 5000));
                rig.a.postRecv(ReceiveRequest.create().id(6).local(rig.mrA, 20_000, 5000));
                rig.b.postSend(SendRequest.send().id(7).local(odp, 700_000, 5000).signaled());
                rig.ok(rig.cqB);
                rig.ok(rig.cqA);
                assertArrayEquals(bytes(file, 700_000, 5000), bytes(rig.mrA.segment(), 20_000, 5000));
            }
        }
    }

    @Test
    void implicitOdpReachesMemoryMappedAfterRegistrationAndFailsCleanlyOnceItIsUnmapped() throws IOException {
        try (Rig rig = Rig.rc(); FileChannel ch = tempFile()) {
            requireImplicit(rig);
            try (MemoryRegion all = rig.pd.registerImplicitOnDemand(Access.LOCAL_WRITE, Access.REMOTE_WRITE,
                    Access.REMOTE_READ)) {
                assertTrue(all.isImplicit());
                assertTrue(all.isOnDemand());
                assertEquals(0, all.address());
                assertEquals(Long.MAX_VALUE, all.length());
                assertThrows(IllegalStateException.class, all::segment);
                Arena arena = Arena.ofShared();
                MemorySegment file = mapFresh(ch, SIZE, arena); // mapped after the registration
                RemoteBuffer target = all.remote(file.asSlice(4096 * 3 + 7, 70_000));
                assertEquals(file.address() + 4096 * 3 + 7, target.address());
                assertEquals(70_000, target.length());
                fill(rig.mrA.segment(), 0, 60_000, 5);
                rig.a.postSend(SendRequest.rdmaWrite().id(1).local(rig.mrA, 0, 60_000).remote(target).signaled());
                rig.ok(rig.cqA);
                assertArrayEquals(bytes(rig.mrA.segment(), 0, 60_000), bytes(file, 4096 * 3 + 7, 60_000));
                // local use: a gather from the mapping through the implicit region's lkey
                rig.a.postRecv(ReceiveRequest.create().id(2).local(rig.mrA, 0, 10_000));
                rig.b.postSend(SendRequest.send().id(3).local(all.slice(file.asSlice(4096 * 3 + 7, 9000))).signaled());
                rig.ok(rig.cqB);
                assertEquals(9000, rig.ok(rig.cqA).byteLength());
                assertArrayEquals(bytes(file, 4096 * 3 + 7, 9000), bytes(rig.mrA.segment(), 0, 9000));

                // the mapping goes away (Arena.close unmaps it); a peer still holding the address
                // gets the remote access error of an unresolvable page fault, and the process lives
                arena.close();
                rig.a.postSend(SendRequest.rdmaWrite().id(4).local(rig.mrA, 0, 100).remote(target).signaled());
                Completion wc = rig.next(rig.cqA);
                assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status(), wc.toString());
            }
        }
    }

    @Test
    void explicitOdpUnmappedAfterRegistrationGivesRemoteAccessErrors() throws IOException {
        try (Rig rig = Rig.rc(); FileChannel ch = tempFile()) {
            requireOdp(rig);
            Arena arena = Arena.ofShared();
            MemorySegment file = mapFresh(ch, SIZE, arena);
            try (MemoryRegion odp = rig.pd.registerUnsafe(file, Access.ON_DEMAND, Access.LOCAL_WRITE,
                    Access.REMOTE_WRITE, Access.REMOTE_READ)) {
                RemoteBuffer remote = odp.remote();
                arena.close();
                rig.a.postSend(SendRequest.rdmaRead().id(1).local(rig.mrA, 0, 64).remote(remote, 4096).signaled());
                Completion wc = rig.next(rig.cqA);
                assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status(), wc.toString());
                // Java refuses local use of the region once its memory's arena is closed
                assertThrows(IllegalStateException.class, () -> rig.b.postRecv(ReceiveRequest.create().id(2).local(odp, 0, 64)));
            }
        }
    }

    @Test
    void adviseAndItsErrors() throws IOException {
        try (Rig rig = Rig.rc(); FileChannel ch = tempFile(); Arena arena = Arena.ofShared()) {
            requireOdp(rig);
            MemorySegment file = mapFresh(ch, SIZE, arena);
            try (MemoryRegion odp = rig.pd.registerUnsafe(file, Access.ON_DEMAND, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
                 MemoryRegion readOnly = rig.pd.registerUnsafe(file, Access.ON_DEMAND, Access.REMOTE_READ)) {
                odp.advise(MemoryRegion.Advice.PREFETCH_WRITE, 0, 65536, true);
                odp.advise(MemoryRegion.Advice.PREFETCH, 65536, 65536, false);
                odp.advise(MemoryRegion.Advice.PREFETCH_NO_FAULT, 0, SIZE, true);
                readOnly.advise(MemoryRegion.Advice.PREFETCH, 0, 4096, true);
                assertThrows(IllegalArgumentException.class,
                        () -> readOnly.advise(MemoryRegion.Advice.PREFETCH_WRITE, 0, 4096, true));
                assertThrows(IndexOutOfBoundsException.class,
                        () -> odp.advise(MemoryRegion.Advice.PREFETCH, SIZE - 100, 200, true));
                IllegalStateException pinned = assertThrows(IllegalStateException.class,
                        () -> rig.mrA.advise(MemoryRegion.Advice.PREFETCH, 0, 100, true));
                assertTrue(pinned.getMessage().contains("not an on-demand region"), pinned.getMessage());
                // the file ends at SIZE: past that, the mapping would be SIGBUS for the CPU
                try (Arena big = Arena.ofShared(); FileChannel ch2 = tempFile()) {
                    ch2.write(ByteBuffer.wrap(new byte[1]), 8191);
                    MemorySegment beyond = ch2.map(FileChannel.MapMode.READ_WRITE, 0, 16384, big);
                    ch2.truncate(4096);
                    try (MemoryRegion r = rig.pd.registerUnsafe(beyond, Access.ON_DEMAND, Access.LOCAL_WRITE)) {
                        r.advise(MemoryRegion.Advice.PREFETCH_WRITE, 0, 4096, true);
                        VerbsException e = assertThrows(VerbsException.class,
                                () -> r.advise(MemoryRegion.Advice.PREFETCH_WRITE, 0, 16384, true));
                        assertTrue(e.is(Errno.EFAULT), e.getMessage());
                        assertTrue(e.getMessage().contains("ibv_advise_mr"), e.getMessage());
                        // without FLUSH the prefetch is deferred: nothing to report
                        r.advise(MemoryRegion.Advice.PREFETCH_WRITE, 0, 16384, false);
                    }
                }
            }
        }
    }

    @Test
    void implicitRegistrationRefusesWhatAnImplicitRegionCannotBe() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd()) {
            assertThrows(IllegalArgumentException.class, () -> pd.registerImplicitOnDemand(Access.LOCAL_WRITE, Access.ZERO_BASED));
            assertThrows(IllegalArgumentException.class, () -> pd.registerImplicitOnDemand(Access.LOCAL_WRITE, Access.MW_BIND));
            assertThrows(IllegalArgumentException.class, () -> pd.registerImplicitOnDemand(Access.REMOTE_WRITE));
            if (!ctx.odpCapabilities().implicitSupported()) {
                // a device without implicit ODP refuses it with the verb and errno named
                VerbsException e = assertThrows(VerbsException.class, () -> pd.registerImplicitOnDemand().close());
                assertTrue(e.getMessage().contains("ibv_reg_mr"), e.getMessage());
            } else {
                try (MemoryRegion all = pd.registerImplicitOnDemand()) {
                    assertEquals(EnumSet.of(Access.LOCAL_WRITE, Access.ON_DEMAND), all.access());
                    assertTrue(all.toString().contains("implicit"), all.toString());
                    assertThrows(IllegalArgumentException.class, () -> all.slice(MemorySegment.ofArray(new byte[4])));
                }
            }
        }
    }
    private static final long PROT_NONE = 0;
    private static final int PROT_RW = 0x1 | 0x2;
    private static final int MAP_PRIVATE_ANON = 0x02 | 0x20;
    private static final int MAP_FIXED = 0x10;
    private static final int MAP_FIXED_NOREPLACE = 0x100000;
    private static final long CHURN_LEN = 64 * 1024;

    /** mmap(2) and munmap(2), for a test that unmaps memory under the device's feet. */
    private static final class Mapper {
        final MethodHandle mmap;
        final MethodHandle munmap;

        Mapper() {
            Linker linker = Linker.nativeLinker();
            mmap = linker.downcallHandle(linker.defaultLookup().find("mmap").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG,
                            ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG));
            munmap = linker.downcallHandle(linker.defaultLookup().find("munmap").orElseThrow(),
                    FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
        }

        /** mmap's address, or -1 (MAP_FAILED). */
        long map(long at, int prot, int flags) throws Throwable {
            return ((MemorySegment) mmap.invokeExact(MemorySegment.ofAddress(at), CHURN_LEN, prot, flags, -1, 0L)).address();
        }

        void unmap(long at) throws Throwable {
            int rc = (int) munmap.invokeExact(MemorySegment.ofAddress(at), CHURN_LEN);
            assertEquals(0, rc, "munmap");
        }
    }

    /**
     * A JVM thread unmaps the target and maps it again where it was (MAP_FIXED_NOREPLACE: a range
     * another mapping took meanwhile is never clobbered; the churn moves elsewhere then), or
     * replaces it by an inaccessible mapping and a fresh one (MAP_FIXED), in a tight loop, while
     * the peer WRITEs, READs, compares-and-swaps and fetches-and-adds there through the implicit
     * region. Every operation succeeds or fails with the remote access error of an unresolvable
     * page fault, both outcomes occur for each, and the JVM lives (a device touching the hole
     * itself would kill it with SIGSEGV in native code). Once the churn stops, a WRITE and a READ
     * back through the same rkey are byte-exact.
     */
    @Test
    void peerOperationsRacingTheApplicationsMunmapNeverCrashTheJvm() throws Throwable {
        Mapper mapper = new Mapper();
        try (Rig probe = Rig.rc()) {
            requireImplicit(probe);
            assumeTrue(probe.ctx.odpCapabilities().rc().contains(OdpCapabilities.Operation.ATOMIC),
                    () -> probe.ctx.device().name() + " pages no RC atomics on demand");
        }
        long first = mapper.map(0, PROT_RW, MAP_PRIVATE_ANON);
        assertTrue(first != -1, "mmap");
        AtomicLong base = new AtomicLong(first);
        AtomicBoolean stop = new AtomicBoolean();
        AtomicLong cycles = new AtomicLong();
        Throwable[] churnFailure = new Throwable[1];
        Thread churn = Thread.ofPlatform().name("odp-churn").start(() -> {
            try {
                for (long i = 0; !stop.get(); i++) {
                    long at = base.get();
                    if ((i & 1) == 0) {
                        assertEquals(at, mapper.map(at, (int) PROT_NONE, MAP_PRIVATE_ANON | MAP_FIXED));
                        assertEquals(at, mapper.map(at, PROT_RW, MAP_PRIVATE_ANON | MAP_FIXED));
                    } else {
                        mapper.unmap(at);
                        if (i % 8 == 1) {
                            LockSupport.parkNanos(20_000); // a hole that lasts, now and then
                        }
                        long got = mapper.map(at, PROT_RW, MAP_PRIVATE_ANON | MAP_FIXED_NOREPLACE);
                        if (got != at) {
                            // something else took the range: churn a fresh one from now on
                            if (got != -1) {
                                mapper.unmap(got);
                            }
                            long fresh = mapper.map(0, PROT_RW, MAP_PRIVATE_ANON);
                            assertTrue(fresh != -1, "mmap");
                            base.set(fresh);
                        }
                    }
                    cycles.incrementAndGet();
                    if (i % 64 == 63) {
                        Thread.sleep(1); // a calm spell now and then: operations that meet no hole
                    }
                }
            } catch (Throwable t) {
                churnFailure[0] = t;
            }
        });
        SendOpcode[] ops = { SendOpcode.RDMA_WRITE, SendOpcode.RDMA_READ, SendOpcode.ATOMIC_CMP_AND_SWP,
                SendOpcode.ATOMIC_FETCH_AND_ADD };
        Map<SendOpcode, long[]> outcomes = new EnumMap<>(SendOpcode.class);
        Rig rig = Rig.rc();
        MemoryRegion all = rig.pd.registerImplicitOnDemand(Access.LOCAL_WRITE, Access.REMOTE_WRITE,
                Access.REMOTE_READ, Access.REMOTE_ATOMIC);
        try {
            for (SendOpcode op : ops) {
                long[] n = new long[2]; // successes, remote access errors
                outcomes.put(op, n);
                long start = System.nanoTime();
                long enough = start + 1_000_000_000L; // long enough to meet the window between admission and access
                long deadline = start + 8_000_000_000L;
                for (int i = 0; System.nanoTime() < deadline
                        && (System.nanoTime() < enough || n[0] < 200 || n[1] < 20); i++) {
                    RemoteBuffer target = all.remote().slice(base.get(), CHURN_LEN);
                    SendRequest wr = switch (op) {
                        case RDMA_WRITE -> SendRequest.rdmaWrite().local(rig.mrA, 0, 8192).remote(target, 100);
                        case RDMA_READ -> SendRequest.rdmaRead().local(rig.mrA, 0, 8192).remote(target, 4096);
                        case ATOMIC_CMP_AND_SWP -> SendRequest.compareAndSwap(0, i).local(rig.mrA, 0, 8).remote(target, 64);
                        default -> SendRequest.fetchAndAdd(1).local(rig.mrA, 0, 8).remote(target, 64);
                    };
                    rig.a.postSend(wr.id(i).signaled());
                    Completion wc = rig.next(rig.cqA);
                    if (wc.status() == WcStatus.SUCCESS) {
                        n[0]++;
                        continue;
                    }
                    assertEquals(WcStatus.REMOTE_ACCESS_ERROR, wc.status(), wc.toString());
                    n[1]++;
                    // both QPs are in the error state now: a fresh pair (and region) goes on
                    all.close();
                    rig.close();
                    rig = Rig.rc();
                    all = rig.pd.registerImplicitOnDemand(Access.LOCAL_WRITE, Access.REMOTE_WRITE,
                            Access.REMOTE_READ, Access.REMOTE_ATOMIC);
                }
            }
        } finally {
            stop.set(true);
            churn.join();
        }
        if (churnFailure[0] != null) {
            throw churnFailure[0];
        }
        for (SendOpcode op : ops) {
            long[] n = outcomes.get(op);
            System.out.printf("%s racing munmap: %d succeeded, %d remote access errors%n", op, n[0], n[1]);
            assertTrue(n[0] > 0 && n[1] > 0, op + " racing munmap (" + cycles.get() + " replacements): " + n[0]
                    + " succeeded, " + n[1] + " remote access errors; both outcomes expected");
        }
        try {
            // the churn has stopped: the memory is mapped, and the same rkey is byte-exact there
            RemoteBuffer target = all.remote().slice(base.get(), CHURN_LEN);
            fill(rig.mrA.segment(), 0, 20_000, 11);
            rig.a.postSend(SendRequest.rdmaWrite().id(1).local(rig.mrA, 0, 20_000).remote(target, 333).signaled());
            rig.ok(rig.cqA);
            rig.a.postSend(SendRequest.rdmaRead().id(2).local(rig.mrA, 30_000, 20_000).remote(target, 333).signaled());
            rig.ok(rig.cqA);
            assertArrayEquals(bytes(rig.mrA.segment(), 0, 20_000), bytes(rig.mrA.segment(), 30_000, 20_000));
        } finally {
            all.close();
            rig.close();
            mapper.unmap(base.get());
        }
    }
}
