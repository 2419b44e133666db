package io.github.verbs4j.examples.transfer;

import io.github.verbs4j.cm.CmEventException;
import io.github.verbs4j.examples.JitCompilation;
import io.github.verbs4j.transfer.collective.ElementType;
import io.github.verbs4j.transfer.collective.ReduceOp;
import io.github.verbs4j.transfer.collective.Ring;
import io.github.verbs4j.transfer.collective.RingOptions;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * {@code verbs4j allreduce}: ring allreduce of float32 over {@code -N} ranks (or, with
 * {@code --op}, reduce-scatter or all-gather), nccl-tests style: algorithm bandwidth (bytes /
 * time, bytes being the whole array: reduce-scatter's input, all-gather's output) and bus
 * bandwidth, what each link carries: {@code algbw * 2 (N-1) / N} for allreduce,
 * {@code algbw * (N-1) / N} for reduce-scatter and all-gather. The result is checked element by
 * element on every rank: the first warm-up run's, and that of the last timed run (of each stretch
 * between two fills). Three ways to
 * place the ranks:
 * <ul>
 * <li>default: each rank a thread of this process, with a ring connection of its own;</li>
 * <li>{@code --processes}: each rank a JVM of its own, started here (rank 0 first, the others
 * given its rendezvous); the table takes the slowest rank's time;</li>
 * <li>{@code --rank R --rendezvous host:port}: this process is rank R alone (rank 0 opens the
 * rendezvous there, port 0 picking a free one, printed as {@code RENDEZVOUS host:port}); the
 * ranks may run on different hosts, e.g. one per rxe VM.</li>
 * </ul>
 * A rank alone prints its warm-up line and {@code RESULT <rank> <mean> <min> <max>} (nanoseconds
 * per run) before its table.
 *
 * <p>What is timed is the steady state, as nccl-tests times it ({@link #run}): an untimed warm-up
 * until the JIT is quiet, then the runs back to back after a barrier, every element checked after
 * the last; the table gives the mean per run and the shortest and longest run.
 */
@Command(name = "allreduce", mixinStandardHelpOptions = true,
        description = "Ring allreduce (sum of float32) over N ranks: threads here, processes here, or one rank"
                + " of a ring across hosts; algbw and busbw.")
public final class AllreduceCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = {"-N", "--ranks"}, paramLabel = "<ranks>", defaultValue = "4", description = "ranks (default: ${DEFAULT-VALUE})")
    int ranks;

    @CommandLine.Mixin
    TransferCli.Bind bind;

    @Option(names = {"-s", "--size"}, paramLabel = "<bytes>", defaultValue = "67108864",
            description = "bytes per rank, a multiple of 4 (default: ${DEFAULT-VALUE})")
    long bytes;

    @Option(names = {"-n", "--iters"}, paramLabel = "<n>", defaultValue = "5", description = "timed runs (default: ${DEFAULT-VALUE})")
    int iterations;

    @Option(names = "--rank", paramLabel = "<r>", defaultValue = "-1",
            description = "be rank r (0..N-1) alone in this process; needs --rendezvous")
    int rank;

    @Option(names = "--rendezvous", paramLabel = "<host:port>",
            description = "rank 0's rendezvous: where rank 0 listens (port 0: a free one, printed) and the others connect")
    String rendezvous;

    @Option(names = "--processes", description = "run each rank as a JVM of its own on this host")
    boolean processes;

    /** The collective measured, with nccl-tests' bus-bandwidth factor. */
    enum Op {
        allreduce, reduce_scatter, all_gather;

        double busFactor(int n) {
            return (this == allreduce ? 2.0 : 1.0) * (n - 1) / n;
        }

        String label() {
            return name().replace('_', '-');
        }
    }

    @Option(names = "--op", paramLabel = "<op>", defaultValue = "allreduce", converter = OpConverter.class,
            description = "allreduce, reduce-scatter or all-gather (default: ${DEFAULT-VALUE})")
    Op op;

    static final class OpConverter implements CommandLine.ITypeConverter<Op> {
        @Override
        public Op convert(String value) {
            return Op.valueOf(value.replace('-', '_'));
        }
    }

    @Option(names = "--workspace", description = "allreduce in the ring's registered workspace"
            + " (Ring.allreduceInWorkspace): no copy into the ring's buffer and back")
    boolean workspace;

    @Option(names = "--timeout", paramLabel = "<seconds>", defaultValue = "120",
            description = "how long forming the ring, and each collective, may take (default: ${DEFAULT-VALUE})")
    int timeoutSeconds;

    /**
     * Where {@code --workspace}'s array begins in the ring's workspace: after the bytes of the
     * one-element allreduces of the warm-up's agreement and the barrier, which are copied into the
     * workspace's start.
     */
    static final long WORKSPACE_OFFSET = 64;

    /** The ring's options: {@code join} for forming it, {@code --timeout} for each collective. */
    private RingOptions ringOptions(Duration join) {
        return RingOptions.defaults().withMaxBytes(workspace ? WORKSPACE_OFFSET + bytes : bytes).withJoinTimeout(join)
                .withOperationTimeout(Duration.ofSeconds(timeoutSeconds));
    }

    @Override
    public Integer call() throws Exception {
        TransferCli.require(spec, ranks >= 2 && ranks <= Ring.MAX_RANKS && bytes >= 4 && bytes % 4 == 0
                && bytes / 4 <= Integer.MAX_VALUE && iterations >= 1 && timeoutSeconds >= 1, "need 2.." + Ring.MAX_RANKS
                + " ranks, a size that is a positive multiple of 4, at least one iteration and a positive timeout");
        TransferCli.require(spec, !(processes && rank >= 0), "--processes starts every rank; --rank is for one");
        TransferCli.require(spec, !workspace || op == Op.allreduce, "--workspace is for --op allreduce");
        TransferCli.require(spec, op == Op.allreduce || bytes % (4L * ranks) == 0,
                "--op " + op.label() + " cuts the array into " + ranks + " blocks: the size must be a multiple of 4 x ranks");
        Duration timeout = Duration.ofSeconds(timeoutSeconds);
        if (rank >= 0) {
            TransferCli.require(spec, rank < ranks, "--rank must be within 0.." + (ranks - 1));
            TransferCli.require(spec, rendezvous != null, "--rank needs --rendezvous host:port");
            return oneRank(TransferCli.hostPort(spec, "--rendezvous", rendezvous), timeout);
        }
        TransferCli.require(spec, rendezvous == null, "--rendezvous goes with --rank");
        Timing slowest = processes ? forkRanks(timeout) : threadRanks(timeout);
        print(slowest, ranks + (processes ? " processes" : " threads") + " on " + bind.bind);
        return 0;
    }

    /** Every rank a thread here; the slowest rank's times. */
    private Timing threadRanks(Duration timeout) throws Exception {
        int count = (int) (bytes / 4);
        List<CompletableFuture<Timing>> results = new ArrayList<>();
        try (Ring.Rendezvous rv = Ring.rendezvous(bind.at(0))) {
            InetSocketAddress at = rv.address();
            for (int r = 0; r < ranks; r++) {
                int me = r;
                results.add(CompletableFuture.supplyAsync(() -> {
                    try (Ring ring = me == 0 ? rv.join(ranks, ringOptions(timeout)) : Ring.join(at, me, ranks, ringOptions(timeout))) {
                        return run(ring, count);
                    }
                }, task -> Thread.ofPlatform().name("rank-" + me).start(task)));
            }
            Timing slowest = null;
            for (CompletableFuture<Timing> f : results) {
                slowest = slower(slowest, f.get());
            }
            return slowest;
        }
    }

    /** This process is rank {@link #rank}; prints its RESULT line and its own table. */
    private int oneRank(InetSocketAddress at, Duration timeout) {
        PrintStream out = System.out;
        int count = (int) (bytes / 4);
        long deadline = System.nanoTime() + timeout.toNanos();
        Ring ring;
        if (rank == 0) {
            try (Ring.Rendezvous rv = Ring.rendezvous(at)) {
                InetSocketAddress listening = rv.address();
                out.println("RENDEZVOUS " + listening.getAddress().getHostAddress() + ":" + listening.getPort());
                out.flush();
                ring = rv.join(ranks, ringOptions(timeout));
            }
        } else {
            ring = joinRetrying(at, deadline);
        }
        try (ring) {
            Timing t = run(ring, count);
            out.println(t.warmUp());
            out.println(t.resultLine(rank));
            print(t, "rank " + rank + " of " + ranks + " alone, rendezvous " + at);
        }
        return 0;
    }

    /** Joins, retrying while rank 0's rendezvous is not up yet (rejected or unreachable). */
    private Ring joinRetrying(InetSocketAddress at, long deadline) {
        while (true) {
            Duration left = Duration.ofNanos(deadline - System.nanoTime());
            try {
                return Ring.join(at, rank, ranks, ringOptions(left));
            } catch (CmEventException e) {
                if (System.nanoTime() - deadline > -1_000_000_000L) {
                    throw e;
                }
                try {
                    Thread.sleep(200);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    /** Starts rank 0's JVM, then the others with its rendezvous; the slowest rank's times. */
    private Timing forkRanks(Duration timeout) throws Exception {
        List<Process> children = new ArrayList<>();
        try {
            Process zero = start(0, bind.bind + ":0");
            children.add(zero);
            BufferedReader zeroOut = reader(zero);
            String first = line(zeroOut, zero, timeout);
            TransferCli.require(spec, first.startsWith("RENDEZVOUS "), "rank 0 said '" + first + "', not RENDEZVOUS");
            String at = first.substring("RENDEZVOUS ".length()).trim();
            List<BufferedReader> outs = new ArrayList<>(List.of(zeroOut));
            for (int r = 1; r < ranks; r++) {
                Process p = start(r, at);
                children.add(p);
                outs.add(reader(p));
            }
            Timing slowest = null;
            for (int r = 0; r < ranks; r++) {
                slowest = slower(slowest, result(r, outs.get(r), children.get(r), timeout.multipliedBy(2 + iterations)));
            }
            for (int r = 0; r < ranks; r++) {
                Process p = children.get(r);
                if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS) || p.exitValue() != 0) {
                    throw new IllegalStateException("rank " + r + "'s JVM ended with "
                            + (p.isAlive() ? "no exit" : "status " + p.exitValue()));
                }
            }
            return slowest;
        } finally {
            for (Process p : children) {
                p.destroyForcibly();
            }
        }
    }

    /** A JVM of this tool running {@code allreduce --rank r}, with this JVM's options and class path. */
    private Process start(int r, String at) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(ProcessHandle.current().info().command().orElse(
                Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        List<String> jvm = ManagementFactory.getRuntimeMXBean().getInputArguments();
        cmd.addAll(jvm);
        if (jvm.stream().noneMatch(a -> a.startsWith("--enable-native-access"))) {
            cmd.add("--enable-native-access=ALL-UNNAMED"); // what the jar's manifest gave this JVM
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), "io.github.verbs4j.examples.Verbs4jTool",
                "allreduce", "--op", op.label(), "-N", Integer.toString(ranks), "-s", Long.toString(bytes), "-n",
                Integer.toString(iterations), "-a", bind.bind, "--timeout", Integer.toString(timeoutSeconds),
                "--rank", Integer.toString(r), "--rendezvous", at));
        if (workspace) {
            cmd.add("--workspace");
        }
        return new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
    }

    private static BufferedReader reader(Process p) {
        return new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
    }

    /** The next line of a child, within {@code timeout}. */
    private static String line(BufferedReader in, Process p, Duration timeout) throws Exception {
        CompletableFuture<String> f = CompletableFuture.supplyAsync(() -> {
            try {
                return in.readLine();
            } catch (java.io.IOException e) {
                return null;
            }
        });
        try {
            String s = f.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
            if (s == null) {
                throw new IllegalStateException("a rank's JVM ended early (pid " + p.pid() + ")");
            }
            return s;
        } catch (java.util.concurrent.TimeoutException e) {
            throw new IllegalStateException("a rank's JVM said nothing for " + timeout + " (pid " + p.pid() + ")");
        }
    }

    /** Rank {@code r}'s times: its RESULT line, with the warm-up line before it; the rest of its table skipped. */
    private static Timing result(int r, BufferedReader in, Process p, Duration timeout) throws Exception {
        String warmUp = null;
        while (true) {
            String s = line(in, p, timeout);
            if (s.startsWith(" warm-up")) {
                warmUp = s;
            } else if (s.startsWith("RESULT ")) {
                return Timing.parse(s, r, warmUp);
            }
        }
    }

    /** The slower of two ranks' times by their means ({@code a} may be {@code null}: none yet). */
    private static Timing slower(Timing a, Timing b) {
        return a == null || b.mean() > a.mean() ? b : a;
    }

    private void print(Timing t, String where) {
        PrintStream out = System.out;
        double algbw = bytes / t.mean() / 1e9;
        double busbw = algbw * op.busFactor(ranks);
        TransferCli.rule(out, 99);
        out.printf(" verbs4j %s: ring, float32%s, %d ranks, %s%s%n", op.label(), op == Op.all_gather ? "" : " sum", ranks,
                where, workspace ? ", in the ring's workspace (no copies)" : "");
        if (t.warmUp() != null) {
            out.println(t.warmUp());
        }
        out.println(" timed: the runs back to back after a barrier (the slowest rank's mean, and its shortest and"
                + " longest run); every element checked after the last");
        TransferCli.rule(out, 99);
        out.println(" #bytes         #count       #iterations  time[ms]    min[ms]     max[ms]     algbw[GB/s]  busbw[GB/s]");
        out.printf(" %-14d %-12d %-12d %-11.3f %-11.3f %-11.3f %-12.3f %.3f%n", bytes, bytes / 4, iterations,
                t.mean() * 1e3, t.min() * 1e3, t.max() * 1e3, algbw, busbw);
        TransferCli.rule(out, 99);
    }

    /**
     * What one rank measured, in seconds: the mean over the timed runs, the shortest and the
     * longest; and the line describing its warm-up ({@code null} where the table's reader was
     * not told).
     */
    record Timing(double mean, double min, double max, String warmUp) {
        Timing {
            if (!(mean > 0 && min > 0 && max >= min)) {
                throw new IllegalStateException("no time measured: mean " + mean + ", min " + min + ", max " + max);
            }
        }

        /** The {@code RESULT} line a rank alone prints for {@code --processes}' parent. */
        String resultLine(int rank) {
            return "RESULT " + rank + " " + Math.round(mean * 1e9) + " " + Math.round(min * 1e9) + " " + Math.round(max * 1e9);
        }

        /** A rank's {@code RESULT} line read back, with the warm-up line seen before it. */
        static Timing parse(String line, int rank, String warmUp) {
            String[] w = line.split(" ");
            if (w.length != 5 || !w[0].equals("RESULT") || !w[1].equals(Integer.toString(rank))) {
                throw new IllegalStateException("rank " + rank + " said '" + line + "'");
            }
            return new Timing(Long.parseLong(w[2]) / 1e9, Long.parseLong(w[3]) / 1e9, Long.parseLong(w[4]) / 1e9, warmUp);
        }
    }

    /** Warm-up runs before the first round that may end it. */
    static final int WARM_UP_MIN = 3;
    /** Runs per warm-up round: the ranks agree after each whether another is needed. */
    static final int WARM_UP_ROUND = 3;
    /** The longest the warm-up rounds after the minimum may take (a loaded machine makes each slow). */
    static final long WARM_UP_MAX_EXTRA_NANOS = 3_000_000_000L;

    /**
     * Measures the steady state, as nccl-tests does: an untimed warm-up until the JIT is quiet,
     * then the timed runs back to back after a barrier, checked afterwards.
     *
     * <p>Warm-up: {@link #WARM_UP_MIN} runs (the first checked element by element at once, so a
     * wrong result fails before anything is timed), then rounds of {@link #WARM_UP_ROUND} until a
     * round compiled nothing on any rank (a one-element MAX allreduce of each rank's "the JIT
     * moved" after each round: every rank must run the same number of collectives), or
     * {@link #WARM_UP_MAX_EXTRA_NANOS} passed. Timing it all from each rank's own start, with the
     * check of the previous run in between and no barrier, timed the JIT and the other rank's
     * check: one warm-up, then 16 Mi elements checked with a {@code %} each per rank.
     *
     * <p>Timed: the arrays filled, a barrier (a one-element allreduce), then the runs back to
     * back, each one's time taken from the end of the one before; then every element checked.
     * Allreduce works in place, so the runs sum the sums: after {@code k} runs every element is
     * the first run's sum added up {@code N} times in ring order {@code k - 1} times, which the
     * check computes the same way in float. So that this stays finite, at most
     * {@link #runsBeforeRefill} runs go between two fills; more are timed as several such
     * stretches, each between a barrier and its check.
     */
    private Timing run(Ring ring, int count) {
        Workload w = new Workload(ring, count);
        long began = System.nanoTime();
        w.fill();
        w.once();
        w.check(1);
        for (int k = 1; k < WARM_UP_MIN; k++) {
            w.once();
        }
        int warm = WARM_UP_MIN;
        long extraSince = System.nanoTime();
        boolean timeUp = false;
        boolean more = JitCompilation.known();
        while (more) {
            long compiled = JitCompilation.millis();
            w.fill();
            for (int k = 0; k < WARM_UP_ROUND; k++) {
                w.once();
            }
            warm += WARM_UP_ROUND;
            timeUp = System.nanoTime() - extraSince > WARM_UP_MAX_EXTRA_NANOS;
            more = anyRank(ring, JitCompilation.millis() != compiled && !timeUp);
        }
        String warmUp = String.format(" warm-up, not timed: %d runs in %.2f s on rank %d (%s)", warm,
                (System.nanoTime() - began) / 1e9, ring.rank(),
                !JitCompilation.known() ? "no JIT compilation time to watch: the minimum only"
                        : timeUp ? "ended after " + WARM_UP_MAX_EXTRA_NANOS / 1_000_000_000L + " s more, the JIT still compiling"
                        : "ended when a round of " + WARM_UP_ROUND + " compiled nothing on any rank");
        int stretch = runsBeforeRefill(ring.size());
        long total = 0;
        long min = Long.MAX_VALUE;
        long max = 0;
        for (int done = 0; done < iterations; ) {
            int runs = Math.min(stretch, iterations - done);
            w.fill();
            anyRank(ring, false); // the barrier: every rank starts its timed runs together
            long t0 = System.nanoTime();
            long last = t0;
            for (int k = 0; k < runs; k++) {
                w.once();
                long t = System.nanoTime();
                min = Math.min(min, t - last);
                max = Math.max(max, t - last);
                last = t;
            }
            total += last - t0;
            w.check(runs);
            done += runs;
        }
        return new Timing(total / 1e9 / iterations, min / 1e9, max / 1e9, warmUp);
    }

    /** A one-element MAX allreduce: whether any rank said {@code yes}; a barrier too. */
    private static boolean anyRank(Ring ring, boolean yes) {
        int[] flag = {yes ? 1 : 0};
        ring.allreduce(flag, ReduceOp.MAX);
        return flag[0] != 0;
    }

    /**
     * How many allreduces may run on one fill before a sum could overflow a float: each run
     * multiplies the values (at most 63 N after the first) by N, and a float holds 2^127; the
     * other collectives do not change their input.
     */
    int runsBeforeRefill(int n) {
        return op == Op.allreduce ? 120 / (32 - Integer.numberOfLeadingZeros(n - 1)) : Integer.MAX_VALUE;
    }

    /**
     * One rank's arrays of the measured collective: rank {@code me}'s element {@code i} is
     * {@code (i + me) mod 64} (all-gather: of its block's place in the whole array), so every
     * result is known from the element's index.
     */
    private final class Workload {
        private final Ring ring;
        private final int n;
        private final int me;
        private final int count;
        private final int block;
        private final float[] data;
        private final float[] part;
        /** With {@code --workspace}: the slice of the ring's workspace reduced in place instead of {@link #data}. */
        private final MemorySegment region;

        Workload(Ring ring, int count) {
            this.ring = ring;
            this.n = ring.size();
            this.me = ring.rank();
            this.count = count;
            this.block = count / n;
            this.region = workspace ? ring.workspace().asSlice(WORKSPACE_OFFSET, 4L * count) : null;
            this.data = new float[region != null ? 0 : count];
            this.part = new float[op == Op.allreduce ? 0 : block];
        }

        private float get(int i) {
            return region != null ? region.getAtIndex(ValueLayout.JAVA_FLOAT, i) : data[i];
        }

        void fill() {
            if (op == Op.all_gather) {
                for (int i = 0; i < block; i++) {
                    part[i] = (me * block + i + me) & 63;
                }
            } else {
                for (int i = 0; i < count; i++) {
                    if (region != null) {
                        region.setAtIndex(ValueLayout.JAVA_FLOAT, i, (i + me) & 63);
                    } else {
                        data[i] = (i + me) & 63;
                    }
                }
            }
        }

        void once() {
            switch (op) {
                case allreduce -> {
                    if (region != null) {
                        ring.allreduceInWorkspace(region, ElementType.FLOAT, ReduceOp.SUM);
                    } else {
                        ring.allreduce(data);
                    }
                }
                case reduce_scatter -> ring.reduceScatter(data, part, ReduceOp.SUM);
                case all_gather -> ring.allGather(part, data);
            }
        }

        /** Checks every element of the result after {@code runs} collectives in a row since {@link #fill()}. */
        void check(int runs) {
            if (op == Op.all_gather) {
                for (int q = 0; q < n; q++) {
                    for (int k = 0; k < block; k++) {
                        int i = q * block + k;
                        expect(i, get(i), (i + q) & 63);
                    }
                }
                return;
            }
            // the sum of element i over the ranks depends on i mod 64 only; then each further
            // allreduce adds n equal values in ring order
            float[] want = new float[64];
            for (int m = 0; m < 64; m++) {
                float v = 0;
                for (int r = 0; r < n; r++) {
                    v += (m + r) & 63;
                }
                for (int again = 1; again < runs && op == Op.allreduce; again++) {
                    float sum = v;
                    for (int r = 1; r < n; r++) {
                        sum += v;
                    }
                    v = sum;
                }
                want[m] = v;
            }
            if (op == Op.reduce_scatter) {
                for (int k = 0; k < block; k++) {
                    int i = me * block + k;
                    expect(i, part[k], want[i & 63]);
                }
            } else {
                for (int i = 0; i < count; i++) {
                    expect(i, get(i), want[i & 63]);
                }
            }
        }

        private void expect(int i, float got, float want) {
            if (got != want) {
                throw new IllegalStateException("rank " + me + ": " + op.label() + " element " + i + " is " + got
                        + ", not " + want);
            }
        }
    }
}
