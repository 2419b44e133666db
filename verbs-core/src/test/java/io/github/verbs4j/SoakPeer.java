package io.github.verbs4j;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import java.util.zip.CRC32C;

/**
 * One side of {@link SoakTest}, in its own JVM (so that each process has its own softrdma with
 * its own fault injection). Lines on stdout and stdin carry the endpoints; every payload is
 * derived from a seed and a sequence number, so both sides can check every byte.
 *
 * <ul>
 *   <li>{@code target}: posts receives and checks each SEND (sequence, length, CRC32C carried
 *       as immediate data, content); exposes a 4 MiB region for the driver's WRITEs and READs.</li>
 *   <li>{@code driver}: SENDs {@code messages} messages with a window of outstanding requests,
 *       then moves {@code bytes} bytes as WRITE + READ-back pairs of random sizes and offsets,
 *       comparing what it read with what it wrote.</li>
 * </ul>
 * Each runs {@code cycles} cycles (new context, PD, CQ, QP, regions each time) and prints its
 * file descriptors and malloc'd bytes after each, so leaks show as growth between cycles.
 */
final class SoakPeer {

    static final int TARGET_SIZE = 4 << 20;
    static final int MAX_SEND = 4096;
    static final int RECEIVES = 256;
    static final int WINDOW = 32;
    static final int MAX_BULK = 1 << 20;

    private SoakPeer() {
    }

    public static void main(String[] args) throws Exception {
        String role = args[0];
        long messages = Long.parseLong(args[1]);
        long bytes = Long.parseLong(args[2]);
        int cycles = Integer.parseInt(args[3]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (int cycle = 1; cycle <= cycles; cycle++) {
            if (role.equals("target")) {
                target(in, messages, cycle);
            } else {
                driver(in, messages, bytes, cycle);
            }
            System.gc();
            // off-heap first: the attach of jcmd opens the JVM's attach socket once, for good
            long offHeap = offHeapBytes();
            System.out.println("RES cycle=" + cycle + " fds=" + openFds() + " offHeap=" + offHeap
                    + " malloc=" + mallocedBytes());
        }
        System.out.println("BYE");
    }

    /** The n-th SEND's payload: its sequence number, then bytes derived from it. */
    static int fillMessage(MemorySegment buffer, long seq) {
        SplittableRandom r = new SplittableRandom(seq * 0x9E3779B97F4A7C15L);
        int length = 8 + r.nextInt(MAX_SEND - 8 + 1);
        buffer.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, seq);
        for (int i = 8; i < length; i++) {
            buffer.set(ValueLayout.JAVA_BYTE, i, (byte) r.nextInt());
        }
        return length;
    }

    static int crc(MemorySegment data, int length) {
        CRC32C crc = new CRC32C();
        crc.update(data.asSlice(0, length).asByteBuffer());
        return (int) crc.getValue();
    }

    private static void target(BufferedReader in, long messages, int cycle) throws IOException {
        try (Context ctx = Verbs.openFirst(); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue cq = ctx.createCq(RECEIVES * 2);
             MemoryRegion window = pd.allocate(TARGET_SIZE, Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ);
             MemoryRegion receives = pd.allocate((long) RECEIVES * MAX_SEND, Access.LOCAL_WRITE);
             QueuePair qp = pd.queuePair(QpType.RC).cq(cq).maxRecvWr(RECEIVES).build()) {
            System.out.println("EP " + qp.endpoint());
            System.out.println("MR " + window.remote());
            Endpoint driver = Endpoint.parse(expectLine(in, "EP "));
            qp.init();
            ReceiveRequest[] requests = new ReceiveRequest[RECEIVES];
            for (int i = 0; i < RECEIVES; i++) {
                requests[i] = ReceiveRequest.create().id(i).local(receives, (long) i * MAX_SEND, MAX_SEND);
                qp.postRecv(requests[i]);
            }
            qp.connect(driver);
            MemorySegment reference = Arena.ofAuto().allocate(MAX_SEND);
            Completions wcs = cq.completions(64);
            long received = 0;
            long payloadBytes = 0;
            long deadline = System.nanoTime() + 3_600_000_000_000L;
            while (received < messages) {
                int n = cq.poll(wcs);
                for (int k = 0; k < n; k++) {
                    Completion wc = wcs.get(k);
                    if (!wc.ok()) {
                        fail("cycle " + cycle + ": receive completed with " + wc.status() + " after " + received + " messages");
                    }
                    int slot = (int) wc.wrId();
                    MemorySegment got = receives.segment().asSlice((long) slot * MAX_SEND, MAX_SEND);
                    int length = fillMessage(reference, received);
                    if (wc.byteLength() != length) {
                        fail("cycle " + cycle + ": message " + received + " has " + wc.byteLength() + " bytes, expected " + length
                                + " (sequence in it: " + got.get(ValueLayout.JAVA_LONG_UNALIGNED, 0) + ")");
                    }
                    if (!wc.hasImmediate() || wc.immediate() != crc(got, length)) {
                        fail("cycle " + cycle + ": message " + received + ": CRC32C carried " + wc.immediate()
                                + ", computed " + crc(got, length));
                    }
                    if (MemorySegment.mismatch(got, 0, length, reference, 0, length) != -1) {
                        fail("cycle " + cycle + ": message " + received + " differs from what was sent (sequence "
                                + got.get(ValueLayout.JAVA_LONG_UNALIGNED, 0) + ")");
                    }
                    received++;
                    payloadBytes += length;
                    qp.postRecv(requests[slot]);
                }
                if (n == 0 && System.nanoTime() > deadline) {
                    fail("cycle " + cycle + ": only " + received + " of " + messages + " messages arrived");
                }
            }
            System.out.println("RECEIVED cycle=" + cycle + " messages=" + received + " bytes=" + payloadBytes);
            // the driver's WRITEs and READs into the window go on until it says it is done
            expectLine(in, "CLOSE");
        }
    }

    private static void driver(BufferedReader in, long messages, long bytes, int cycle) throws IOException {
        SplittableRandom random = new SplittableRandom(cycle * 7919L);
        try (Context ctx = Verbs.openFirst(); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue cq = ctx.createCq(WINDOW * 4);
             MemoryRegion sends = pd.allocate((long) WINDOW * MAX_SEND, Access.LOCAL_WRITE);
             MemoryRegion bulk = pd.allocate(2L * MAX_BULK, Access.LOCAL_WRITE);
             QueuePair qp = pd.queuePair(QpType.RC).cq(cq).maxSendWr(WINDOW * 2).build()) {
            System.out.println("EP " + qp.endpoint());
            Endpoint target = Endpoint.parse(expectLine(in, "EP "));
            RemoteBuffer window = RemoteBuffer.parse(expectLine(in, "MR "));
            qp.connect(target);
            Completions wcs = cq.completions(64);
            SendRequest[] requests = new SendRequest[WINDOW];
            for (int i = 0; i < WINDOW; i++) {
                requests[i] = SendRequest.sendWithImm(0).signaled();
            }
            // ---- messages: SEND with immediate, WINDOW outstanding
            long posted = 0;
            long completed = 0;
            long sentBytes = 0;
            boolean[] busy = new boolean[WINDOW];
            int free = WINDOW;
            int next = 0;
            while (completed < messages) {
                while (posted < messages && free > 0) {
                    while (busy[next]) {
                        next = (next + 1) % WINDOW;
                    }
                    MemorySegment buffer = sends.segment().asSlice((long) next * MAX_SEND, MAX_SEND);
                    int length = fillMessage(buffer, posted);
                    SendRequest wr = requests[next].id(next).local(sends, (long) next * MAX_SEND, length)
                            .immediate(crc(buffer, length));
                    qp.postSend(wr);
                    busy[next] = true;
                    free--;
                    posted++;
                    sentBytes += length;
                }
                int n = cq.poll(wcs);
                for (int k = 0; k < n; k++) {
                    Completion wc = wcs.get(k);
                    if (!wc.ok()) {
                        fail("cycle " + cycle + ": SEND completed with " + wc.status() + " after " + completed);
                    }
                    busy[(int) wc.wrId()] = false;
                    free++;
                    completed++;
                }
            }
            // ---- bulk: WRITE a random block, READ it back, compare
            MemorySegment src = bulk.segment().asSlice(0, MAX_BULK);
            MemorySegment dst = bulk.segment().asSlice(MAX_BULK, MAX_BULK);
            SendRequest write = SendRequest.rdmaWrite().id(1).signaled();
            SendRequest read = SendRequest.rdmaRead().id(2).signaled();
            long moved = 0;
            long operations = 0;
            while (moved < bytes) {
                int length = 1 + random.nextInt(MAX_BULK);
                long offset = random.nextLong(TARGET_SIZE - length + 1);
                for (int i = 0; i < length; i += 8) {
                    src.set(ValueLayout.JAVA_LONG_UNALIGNED, i, random.nextLong());
                }
                qp.postSend(write.local(bulk, 0, length).remote(window, offset));
                awaitOne(cq, wcs, 1, cycle);
                dst.asSlice(0, length).fill((byte) 0x5A);
                qp.postSend(read.local(bulk, MAX_BULK, length).remote(window, offset));
                awaitOne(cq, wcs, 2, cycle);
                if (MemorySegment.mismatch(src, 0, length, dst, 0, length) != -1) {
                    fail("cycle " + cycle + ": READ of " + length + " bytes at " + offset + " differs from the WRITE"
                            + " at byte " + MemorySegment.mismatch(src, 0, length, dst, 0, length));
                }
                moved += 2L * length;
                operations += 2;
            }
            System.out.println("SENT cycle=" + cycle + " messages=" + completed + " sendBytes=" + sentBytes
                    + " rdmaOps=" + operations + " rdmaBytes=" + moved);
            expectLine(in, "CLOSE");
        }
    }

    private static void awaitOne(CompletionQueue cq, Completions wcs, long id, int cycle) {
        long deadline = System.nanoTime() + 600_000_000_000L;
        while (true) {
            if (cq.poll(wcs) > 0) {
                Completion wc = wcs.get(0);
                if (!wc.ok() || wc.wrId() != id) {
                    fail("cycle " + cycle + ": request " + id + " completed as " + wc.wrId() + " with " + wc.status());
                }
                return;
            }
            if (System.nanoTime() > deadline) {
                fail("cycle " + cycle + ": request " + id + " did not complete in 600 s");
            }
        }
    }

    private static String expectLine(BufferedReader in, String prefix) throws IOException {
        String line = in.readLine();
        if (line == null || !line.startsWith(prefix)) {
            fail("expected '" + prefix + "...' on stdin, got " + line);
        }
        return line.substring(prefix.length());
    }

    private static void fail(String message) {
        System.out.println("FAIL " + message);
        System.out.flush();
        System.exit(3);
    }

    /**
     * Open file descriptors: the fewest of ten looks 50 ms apart, so that descriptors the JVM
     * holds for a moment (the attach connection of jcmd, a class file being read) do not count.
     */
    static long openFds() {
        long fewest = Long.MAX_VALUE;
        for (int i = 0; i < 10; i++) {
            try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
                fewest = Math.min(fewest, fds.count());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        return fewest;
    }

    /**
     * Bytes the JVM's native memory tracking counts under "Other": the off-heap memory FFM arenas
     * allocate (every region, request and completion batch of verbs4j). -1 without tracking.
     */
    static long offHeapBytes() {
        try {
            Path jcmd = Path.of(System.getProperty("java.home"), "bin", "jcmd");
            Process p = new ProcessBuilder(jcmd.toString(), Long.toString(ProcessHandle.current().pid()),
                    "VM.native_memory", "summary", "scale=b").redirectErrorStream(true).start();
            String summary = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor();
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("-\\s+Other \\(reserved=(\\d+)").matcher(summary);
            return m.find() ? Long.parseLong(m.group(1)) : -1;
        } catch (IOException | InterruptedException e) {
            return -1;
        }
    }

    /** glibc {@code mallinfo2()}: bytes in use from the heap ({@code uordblks}) and from mmap ({@code hblkhd}). */
    static long mallocedBytes() {
        Linker linker = Linker.nativeLinker();
        MemorySegment fn = linker.defaultLookup().find("mallinfo2").orElse(null);
        if (fn == null) {
            return -1;
        }
        // struct mallinfo2 { size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost; }
        var layout = java.lang.foreign.MemoryLayout.sequenceLayout(10, ValueLayout.JAVA_LONG);
        var struct = java.lang.foreign.MemoryLayout.structLayout(layout);
        MethodHandle h = linker.downcallHandle(fn, FunctionDescriptor.of(struct));
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment info = (MemorySegment) h.invokeExact((java.lang.foreign.SegmentAllocator) arena);
            return info.getAtIndex(ValueLayout.JAVA_LONG, 7) + info.getAtIndex(ValueLayout.JAVA_LONG, 4);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }
}
