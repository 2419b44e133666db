package io.github.verbs4j.examples.transfer;

import io.github.verbs4j.RdmaTimeoutException;
import io.github.verbs4j.transfer.Batch;
import io.github.verbs4j.transfer.RemoteSegment;
import io.github.verbs4j.transfer.Segment;
import io.github.verbs4j.transfer.TransferEngine;
import io.github.verbs4j.transfer.TransferOptions;
import io.github.verbs4j.transfer.TransferPeer;
import io.github.verbs4j.transfer.TransferStatus;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.PrintStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j transfer-bench}: the transfer engine's bandwidth, perftest style. The server
 * registers a segment and serves until it is stopped; the client connects with {@code -q} queue
 * pairs and runs {@code -n} batches of {@code -b} requests of {@code -s} bytes each (READ or
 * WRITE), split into chunks of {@code -c} bytes, and prints one table row, then the client
 * thread's cost per chunk (CPU time and bytes allocated, over the timed batches). The timed
 * batches follow an untimed warm-up ({@link WarmUp}: a tenth of {@code -n}, then rounds until the
 * JIT is quiet; with {@code -V} a tenth only), whose line says how much it took.
 *
 * <p>With {@code -w} the client keeps that many batches in flight: it awaits the oldest, refills
 * and resubmits it while the others stream (each batch of the window covers the same ranges, as
 * perftest's iterations do). With {@code -w 1} (the default) each batch is awaited before the
 * next is submitted.
 *
 * <p>With {@code --same-range} every request moves the same {@code -s} bytes at offset 0 of both
 * segments, as perftest moves every message of over 2 KiB (half its cycle buffer, a page) from and
 * to one buffer on each side: on one host, where softrdma copies every byte, the copies then run on
 * cache-hot memory as perftest's do, so the two compare like with like. Without it the requests of
 * a batch cover {@code -s} x {@code -b} bytes on each side (4 MiB at 64 KiB x 64, more than a
 * core's L2), as an application moving distinct data would.
 *
 * <p>With {@code -V} the data is checked, request by request: the server fills its segment with a
 * known pattern; a READ client clears its buffer before every batch and compares each request's
 * bytes with the pattern after it; a WRITE client writes a pattern of its own per batch, reads
 * every batch back into a second buffer and compares. Bandwidth is then not meaningful (the
 * checks and read-backs are timed too). When the client is done it writes a done word after the
 * segment, carrying the last WRITE batch's pattern; a server given {@code --once} waits for that
 * word, checks its segment holds that batch (with {@code -V}) and exits: 0 when it matched.
 */
@Command(name = "transfer-bench", mixinStandardHelpOptions = true,
        description = "Bandwidth of the verbs4j transfer engine (batches of RDMA READ or WRITE).")
public final class TransferBenchCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Parameters(index = "0", arity = "0..1", paramLabel = "<server>", description = "the server's address (client side); none: be the server")
    String server;

    @CommandLine.Mixin
    TransferCli.Bind bind;

    @Option(names = {"-p", "--port"}, paramLabel = "<port>", defaultValue = "0",
            description = "rdma_cm port: the server listens on it (0: a free one, printed), the client connects to it")
    String port;

    @Option(names = {"-s", "--size"}, paramLabel = "<bytes>", defaultValue = "65536", description = "bytes per request (default: ${DEFAULT-VALUE})")
    int size;

    @Option(names = {"-b", "--batch"}, paramLabel = "<n>", defaultValue = "64", description = "requests per batch (default: ${DEFAULT-VALUE})")
    int batchSize;

    @Option(names = {"-c", "--chunk"}, paramLabel = "<bytes>", defaultValue = "1048576", description = "chunk size (default: ${DEFAULT-VALUE})")
    int chunk;

    @Option(names = {"-q", "--qps"}, paramLabel = "<n>", defaultValue = "2", description = "queue pairs per peer (default: ${DEFAULT-VALUE})")
    int qps;

    @Option(names = {"-t", "--outstanding"}, paramLabel = "<n>", defaultValue = "16", description = "chunks in flight per queue pair (default: ${DEFAULT-VALUE})")
    int outstanding;

    @Option(names = {"-n", "--iters"}, paramLabel = "<n>", defaultValue = "100", description = "batches (default: ${DEFAULT-VALUE})")
    int iterations;

    @Option(names = {"-o", "--op"}, paramLabel = "READ|WRITE", defaultValue = "WRITE", description = "operation, or several in order (WRITE,READ) over one connection (default: ${DEFAULT-VALUE})")
    String op;

    @Option(names = {"-w", "--window"}, paramLabel = "<n>", defaultValue = "1", description = "batches in flight on the client (default: ${DEFAULT-VALUE}: each awaited before the next)")
    int window;

    @Option(names = {"-V", "--verify"}, description = "check every request's data (see the command's description)")
    boolean verify;

    @Option(names = "--same-range", description = "every request moves the same -s bytes at offset 0 of both segments,"
            + " as perftest moves every message of over 2 KiB from and to one buffer (default: each request of a"
            + " batch a range of its own)")
    boolean sameRange;

    @Option(names = "--once", description = "server: exit after one client has finished (0 when its data checked out)")
    boolean once;

    /** Bytes after the requests' area: the client's done word. */
    private static final long DONE_WORD = 8;
    /** The done word's top half; its low half is the last WRITE batch's seed + 1 (0: no WRITE). */
    private static final long DONE_MAGIC = 0x5645524900000000L;
    /** The server's pattern when nothing has been written (READ traffic). */
    private static final int SERVER_SEED = 0x7f4a7c15;

    /** Fills {@code s} with the pattern of {@code seed}: every 8-byte word a mix of its index and the seed. */
    static void fill(MemorySegment s, long seed) {
        long words = s.byteSize() / 8;
        for (long i = 0; i < words; i++) {
            s.set(ValueLayout.JAVA_LONG_UNALIGNED, i * 8, mix(i, seed));
        }
        for (long o = words * 8; o < s.byteSize(); o++) {
            s.set(ValueLayout.JAVA_BYTE, o, (byte) mix(words, seed));
        }
    }

    private static long mix(long i, long seed) {
        long z = i * 0x9E3779B97F4A7C15L + seed * 0xBF58476D1CE4E5B9L + 1;
        z = (z ^ (z >>> 31)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 29);
    }

    /** The first request (0-based) whose bytes differ between the two buffers, or -1. */
    private int firstMismatch(MemorySegment got, MemorySegment expected) {
        for (int i = 0; i < batchSize; i++) {
            long from = (long) i * size;
            if (MemorySegment.mismatch(got, from, from + size, expected, from, from + size) >= 0) {
                return i;
            }
        }
        return -1;
    }

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        TransferCli.require(spec, size >= 1 && batchSize >= 1 && iterations >= 1 && window >= 1,
                "size, batch, iterations and window must be positive");
        TransferCli.require(spec, window == 1 || !verify, "-V checks one batch at a time: use it with --window 1");
        TransferCli.require(spec, !(sameRange && verify), "-V checks each request's own range: not with --same-range");
        List<Boolean> writes = new ArrayList<>(); // the operations in order: true = WRITE
        for (String one : op.split(",")) {
            writes.add(switch (one.trim().toUpperCase()) {
                case "WRITE" -> true;
                case "READ" -> false;
                default -> throw TransferCli.usage(spec, "--op is READ, WRITE or a list of them (WRITE,READ), not " + op);
            });
        }
        int port = TransferCli.port(spec, "--port", this.port);
        long segmentBytes = (long) size * batchSize;
        TransferOptions options;
        try {
            options = TransferOptions.defaults().withQpsPerPeer(qps).withMaxOutstanding(outstanding).withChunkSize(chunk)
                    .withMaxBatches(Math.max(window, TransferOptions.defaults().maxBatches()));
        } catch (IllegalArgumentException e) {
            throw TransferCli.usage(spec, e.getMessage());
        }
        if (server == null) {
            try (TransferEngine engine = TransferEngine.open("bench-server", bind.at(port), options)) {
                Segment served = engine.allocate("bench", segmentBytes + DONE_WORD);
                MemorySegment data = served.memory().asSlice(0, segmentBytes);
                if (verify) {
                    fill(data, SERVER_SEED);
                }
                out.println("PORT " + engine.localAddress().getPort());
                out.println("serving segment 'bench' of " + segmentBytes + " bytes on " + engine.localAddress()
                        + (once ? " until a client is done" : " until stopped"));
                out.flush();
                if (!once) {
                    Thread.sleep(Long.MAX_VALUE);
                }
                return awaitDone(out, served.memory().asSlice(segmentBytes, DONE_WORD), data);
            }
        }
        InetSocketAddress target = new InetSocketAddress(TransferCli.address(spec, "<server>", server), port);
        try (TransferEngine engine = TransferEngine.open("bench-client", bind.at(0), options)) {
            Segment segment = engine.allocate("local", segmentBytes);
            TransferPeer peer = engine.connect(target);
            RemoteSegment remote = peer.lookup("bench", Duration.ofSeconds(10));
            TransferCli.require(spec, remote.length() >= segmentBytes + DONE_WORD, "the server's segment has "
                    + remote.length() + " bytes; run both sides with the same -s and -b");
            Batch batch = engine.batch(batchSize);
            Batch[] windowBatches = new Batch[window];
            windowBatches[0] = batch;
            for (int k = 1; k < window; k++) {
                windowBatches[k] = engine.batch(batchSize);
            }
            Segment check = verify ? engine.allocate("check", segmentBytes) : null;
            long lastSeed = -1; // the last WRITE batch's pattern; -1: the server's own
            for (boolean write : writes) {
                long seed = window > 1 ? runWindow(out, write, windowBatches, segment, remote, lastSeed)
                        : runOperation(out, write, batch, segment, check, remote, lastSeed);
                if (seed == Long.MIN_VALUE) {
                    return 1;
                }
                lastSeed = seed;
            }
            if (!signalDone(out, engine, batch, remote, segmentBytes, lastSeed)) {
                return 1;
            }
        }
        return 0;
    }

    /**
     * Runs the batches of one operation and prints its row. With -V a WRITE reads every batch back
     * into {@code check} and compares; a READ clears its buffer before every batch and compares
     * with the pattern the server's segment holds ({@code lastSeed}'s, or the server's own).
     * Returns the pattern the server's segment holds afterwards, or Long.MIN_VALUE after a failure.
     */
    private long runOperation(PrintStream out, boolean write, Batch batch, Segment segment, Segment check,
            RemoteSegment remote, long lastSeed) {
        long segmentBytes = (long) size * batchSize;
        MemorySegment local = segment.memory().asSlice(0, segmentBytes);
        if (verify && !write) {
            fill(check.memory(), lastSeed < 0 ? SERVER_SEED : lastSeed);
        }
        // -V checks every batch: its warm-up is the minimum only (its figures are not bandwidth)
        WarmUp warmUp = new WarmUp(Math.max(1, iterations / 10), !verify);
        int warmup = -1; // the batches run before the timed part: known once the warm-up ends
        long start = 0;
        ThreadCost cost = null;
        for (int k = 0; warmup < 0 || k < warmup + iterations; k++) {
            if (warmup < 0 && warmUp.over(k)) {
                warmup = k;
                start = System.nanoTime();
                cost = ThreadCost.start();
            }
            int it = warmup < 0 ? -1 : k - warmup; // as printed in a failure: -1 for the warm-up's
            if (verify) {
                if (write) {
                    lastSeed = lastSeed < 0 ? 0 : lastSeed + 1; // every batch a pattern of its own
                    fill(local, lastSeed);
                } else {
                    local.fill((byte) 0);
                }
            }
            if (!run(out, batch, segment, remote, write, "batch " + it)) {
                return Long.MIN_VALUE;
            }
            if (verify) {
                MemorySegment got = local;
                if (write) {
                    check.memory().fill((byte) 0);
                    if (!run(out, batch, check, remote, false, "read-back of batch " + it)) {
                        return Long.MIN_VALUE;
                    }
                    got = check.memory();
                }
                int bad = firstMismatch(got, write ? local : check.memory());
                if (bad >= 0) {
                    out.println("batch " + it + ": request " + bad + " (" + size + " bytes at offset "
                            + (long) bad * size + ") " + (write ? "read back" : "read") + " other bytes than "
                            + (write ? "were written" : "the server's segment holds (is the server run with -V?)"));
                    return Long.MIN_VALUE;
                }
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        ThreadCost.Measured spent = cost.stop();
        if (verify) {
            out.printf("verified %d %s requests of %d bytes (%s)%n", (long) (iterations + warmup) * batchSize,
                    write ? "WRITE" : "READ", size, write ? "each written, read back and compared"
                            : "each read and compared with what the server's segment holds");
        }
        out.println(warmUp.describe());
        printRow(out, write, seconds, spent);
        return lastSeed;
    }

    /** The table row of one operation, and the client thread's cost per chunk. */
    private void printRow(PrintStream out, boolean write, double seconds, ThreadCost.Measured spent) {
        double bytes = (double) size * batchSize * iterations;
        TransferCli.rule(out, 87);
        out.printf(" verbs4j transfer-bench %s, %d QPs, %d chunks in flight per QP, chunk %d bytes, %d batch%s in flight%s%n",
                write ? "WRITE" : "READ", qps, outstanding, chunk, window, window == 1 ? "" : "es",
                sameRange ? ", one range" : "");
        TransferCli.rule(out, 87);
        out.println(" #bytes     #batch     #iterations    BW average[GB/sec]    BW average[Gb/sec]   MsgRate[Mpps]");
        out.printf(" %-10d %-10d %-14d %-21.3f %-20.3f %.6f%n", size, batchSize, iterations, bytes / seconds / 1e9,
                bytes * 8 / seconds / 1e9, batchSize * (double) iterations / seconds / 1e6);
        TransferCli.rule(out, 87);
        long chunks = (long) iterations * batchSize * ((size + (long) chunk - 1) / chunk);
        out.printf(" client thread per chunk: %.0f ns CPU, %.1f B allocated (%d chunks, %.2f s)%n",
                spent.cpuNanos() / (double) chunks, spent.allocatedBytes() / (double) chunks, chunks, seconds);
    }

    /**
     * Runs the batches of one operation with {@link #window} batches in flight (no -V): submits the
     * window, then awaits the oldest, refills and resubmits it, until every batch ran; prints the
     * row. Returns the pattern the server holds afterwards (unchanged: nothing is verified), or
     * Long.MIN_VALUE after a failure.
     */
    private long runWindow(PrintStream out, boolean write, Batch[] batches, Segment segment, RemoteSegment remote,
            long lastSeed) {
        WarmUp warmUp = new WarmUp(Math.max(window, iterations / 10), true);
        int submitted = 0;
        for (; submitted < window; submitted++) {
            fillBatch(batches[submitted], segment, remote, write);
        }
        int timedFrom = -1; // the batches completed before the timed part: known once the warm-up ends
        long start = 0;
        ThreadCost cost = null;
        int done = 0;
        for (; timedFrom < 0 || done < timedFrom + iterations; done++) {
            if (timedFrom < 0 && warmUp.over(done)) {
                // the timed part: the batches still in flight from the warm-up count from here
                timedFrom = done;
                start = System.nanoTime();
                cost = ThreadCost.start();
            }
            Batch b = batches[done % window];
            if (!finished(out, b, done - timedFrom, timedFrom < 0)) {
                return Long.MIN_VALUE;
            }
            if (timedFrom < 0 || submitted < timedFrom + iterations) {
                fillBatch(b, segment, remote, write);
                submitted++;
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        ThreadCost.Measured spent = cost.stop();
        // fewer timed batches than the window: the rest were submitted during the warm-up
        for (; done < submitted; done++) {
            if (!finished(out, batches[done % window], done - timedFrom, false)) {
                return Long.MIN_VALUE;
            }
        }
        out.println(warmUp.describe());
        printRow(out, write, seconds, spent);
        return lastSeed;
    }

    /** Whether batch {@code b} completed whole within a minute; prints the failure otherwise. */
    private boolean finished(PrintStream out, Batch b, int index, boolean warmingUp) {
        if (finishesInAMinute(b) && b.count(TransferStatus.DONE) == batchSize) {
            return true;
        }
        out.println((warmingUp ? "warm-up batch" : "batch " + index) + " failed: " + b.count(TransferStatus.DONE)
                + " of " + batchSize + " done, first status " + b.status(0) + " " + b.completionStatus(0));
        return false;
    }

    /**
     * Resets {@code batch}, adds one request per slot (READ or WRITE between {@code local} and the
     * server; with --same-range all at offset 0) and submits it.
     */
    private void fillBatch(Batch batch, Segment local, RemoteSegment remote, boolean write) {
        batch.reset();
        for (int i = 0; i < batchSize; i++) {
            long at = sameRange ? 0 : (long) i * size;
            if (write) {
                batch.write(local, at, remote, at, size);
            } else {
                batch.read(local, at, remote, at, size);
            }
        }
        batch.submit();
    }

    /** Adds one request per slot of the batch (READ or WRITE between {@code local} and the server), submits and awaits it. */
    private boolean run(PrintStream out, Batch batch, Segment local, RemoteSegment remote, boolean write, String what) {
        fillBatch(batch, local, remote, write);
        if (!finishesInAMinute(batch) || batch.count(TransferStatus.DONE) != batchSize) {
            out.println(what + " failed: " + batch.count(TransferStatus.DONE) + " of " + batchSize
                    + " done, first status " + batch.status(0) + " " + batch.completionStatus(0));
            return false;
        }
        return true;
    }

    /** Whether every request of the submitted {@code batch} is final within a minute (the late ones are then TIMED_OUT). */
    private static boolean finishesInAMinute(Batch batch) {
        try {
            batch.await(Duration.ofSeconds(60));
            return true;
        } catch (RdmaTimeoutException late) {
            return false; // the caller reports the statuses
        }
    }

    /** Writes the done word after the server's requests' area: the magic and the last WRITE seed + 1. */
    private boolean signalDone(PrintStream out, TransferEngine engine, Batch batch, RemoteSegment remote,
            long segmentBytes, long lastSeed) {
        Segment word = engine.allocate("done", DONE_WORD);
        try {
            word.memory().set(ValueLayout.JAVA_LONG_UNALIGNED, 0, DONE_MAGIC | ((lastSeed + 1) & 0xffffffffL));
            batch.reset();
            batch.write(word, 0, remote, segmentBytes, DONE_WORD);
            batch.submit();
            if (!finishesInAMinute(batch) || batch.count(TransferStatus.DONE) != 1) {
                out.println("the done word failed: " + batch.status(0) + " " + batch.completionStatus(0));
                return false;
            }
            return true;
        } finally {
            engine.unregister(word);
        }
    }

    /** --once: waits for a client's done word, then (with -V) checks the last WRITE batch landed whole. */
    private int awaitDone(PrintStream out, MemorySegment doneWord, MemorySegment data) throws InterruptedException {
        long word;
        while (((word = doneWord.get(ValueLayout.JAVA_LONG_UNALIGNED, 0)) & 0xffffffff00000000L) != DONE_MAGIC) {
            Thread.sleep(20);
        }
        long seedPlusOne = word & 0xffffffffL;
        if (verify) {
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment expected = arena.allocate(data.byteSize(), 8);
                fill(expected, seedPlusOne == 0 ? SERVER_SEED : seedPlusOne - 1);
                int bad = firstMismatch(data, expected);
                if (bad >= 0) {
                    out.println("the client is done, but request " + bad + " of its last batch (" + size
                            + " bytes at offset " + (long) bad * size + ") holds other bytes than it wrote");
                    return 1;
                }
            }
            out.println("the client is done; the segment holds " + (seedPlusOne == 0 ? "the server's pattern, unchanged"
                    : "its last WRITE batch, every byte checked"));
        } else {
            out.println("the client is done");
        }
        return 0;
    }
}
