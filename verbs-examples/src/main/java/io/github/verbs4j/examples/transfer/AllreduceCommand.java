package io.github.verbs4j.examples.transfer;

import io.github.verbs4j.cm.CmEventException;
import io.github.verbs4j.transfer.collective.Ring;
import io.github.verbs4j.transfer.collective.RingOptions;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
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
 * {@code algbw * (N-1) / N} for reduce-scatter and all-gather. Every run's result is checked element by element on every rank. Three ways to
 * place the ranks:
 * <ul>
 * <li>default: each rank a thread of this process, with a ring connection of its own;</li>
 * <li>{@code --processes}: each rank a JVM of its own, started here (rank 0 first, the others
 * given its rendezvous); the table takes the slowest rank's time;</li>
 * <li>{@code --rank R --rendezvous host:port}: this process is rank R alone (rank 0 opens the
 * rendezvous there, port 0 picking a free one, printed as {@code RENDEZVOUS host:port}); the
 * ranks may run on different hosts, e.g. one per rxe VM.</li>
 * </ul>
 * A rank alone prints {@code RESULT <rank> <mean nanoseconds per run>} before its table.
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

    @Option(names = "--timeout", paramLabel = "<seconds>", defaultValue = "120",
            description = "how long forming the ring, and each collective, may take (default: ${DEFAULT-VALUE})")
    int timeoutSeconds;

    /** The ring's options: {@code join} for forming it, {@code --timeout} for each collective. */
    private RingOptions ringOptions(Duration join) {
        return RingOptions.defaults().withMaxBytes(bytes).withJoinTimeout(join)
                .withOperationTimeout(Duration.ofSeconds(timeoutSeconds));
    }

    @Override
    public Integer call() throws Exception {
        TransferCli.require(spec, ranks >= 2 && ranks <= Ring.MAX_RANKS && bytes >= 4 && bytes % 4 == 0
                && bytes / 4 <= Integer.MAX_VALUE && iterations >= 1 && timeoutSeconds >= 1, "need 2.." + Ring.MAX_RANKS
                + " ranks, a size that is a positive multiple of 4, at least one iteration and a positive timeout");
        TransferCli.require(spec, !(processes && rank >= 0), "--processes starts every rank; --rank is for one");
        TransferCli.require(spec, op == Op.allreduce || bytes % (4L * ranks) == 0,
                "--op " + op.label() + " cuts the array into " + ranks + " blocks: the size must be a multiple of 4 x ranks");
        Duration timeout = Duration.ofSeconds(timeoutSeconds);
        if (rank >= 0) {
            TransferCli.require(spec, rank < ranks, "--rank must be within 0.." + (ranks - 1));
            TransferCli.require(spec, rendezvous != null, "--rank needs --rendezvous host:port");
            return oneRank(TransferCli.hostPort(spec, "--rendezvous", rendezvous), timeout);
        }
        TransferCli.require(spec, rendezvous == null, "--rendezvous goes with --rank");
        double worst = processes ? forkRanks(timeout) : threadRanks(timeout);
        print(worst, ranks + (processes ? " processes" : " threads") + " on " + bind.bind);
        return 0;
    }

    /** Every rank a thread here; the slowest rank's mean time. */
    private double threadRanks(Duration timeout) throws Exception {
        int count = (int) (bytes / 4);
        List<CompletableFuture<Double>> results = new ArrayList<>();
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
            double worst = 0;
            for (CompletableFuture<Double> f : results) {
                worst = Math.max(worst, f.get());
            }
            return worst;
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
            double seconds = run(ring, count);
            out.println("RESULT " + rank + " " + Math.round(seconds * 1e9));
            print(seconds, "rank " + rank + " of " + ranks + " alone, rendezvous " + at);
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

    /** Starts rank 0's JVM, then the others with its rendezvous; the slowest rank's mean time. */
    private double forkRanks(Duration timeout) throws Exception {
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
            double worst = 0;
            for (int r = 0; r < ranks; r++) {
                String result = resultLine(outs.get(r), children.get(r), timeout.multipliedBy(2 + iterations));
                String[] w = result.split(" ");
                TransferCli.require(spec, w.length == 3 && w[1].equals(Integer.toString(r)), "rank " + r + " said '"
                        + result + "'");
                worst = Math.max(worst, Long.parseLong(w[2]) / 1e9);
            }
            for (int r = 0; r < ranks; r++) {
                Process p = children.get(r);
                if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS) || p.exitValue() != 0) {
                    throw new IllegalStateException("rank " + r + "'s JVM ended with "
                            + (p.isAlive() ? "no exit" : "status " + p.exitValue()));
                }
            }
            return worst;
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

    /** The child's RESULT line, skipping its table. */
    private static String resultLine(BufferedReader in, Process p, Duration timeout) throws Exception {
        while (true) {
            String s = line(in, p, timeout);
            if (s.startsWith("RESULT ")) {
                return s;
            }
        }
    }

    private void print(double seconds, String where) {
        PrintStream out = System.out;
        double algbw = bytes / seconds / 1e9;
        double busbw = algbw * op.busFactor(ranks);
        TransferCli.rule(out, 75);
        out.printf(" verbs4j %s: ring, float32%s, %d ranks, %s%n", op.label(), op == Op.all_gather ? "" : " sum", ranks,
                where);
        TransferCli.rule(out, 75);
        out.println(" #bytes         #count       #iterations  time[ms]    algbw[GB/s]  busbw[GB/s]");
        out.printf(" %-14d %-12d %-12d %-11.3f %-12.3f %.3f%n", bytes, bytes / 4, iterations, seconds * 1e3, algbw, busbw);
        TransferCli.rule(out, 75);
    }

    /** A warm-up and {@code iterations} timed runs, each checked element by element; the mean seconds per run. */
    private double run(Ring ring, int count) {
        int n = ring.size();
        int me = ring.rank();
        int block = count / n;
        float[] data = new float[count];
        float[] part = new float[op == Op.allreduce ? 0 : block];
        long total = 0;
        for (int it = -1; it < iterations; it++) {
            if (op == Op.all_gather) {
                for (int i = 0; i < block; i++) {
                    part[i] = (me * block + i + me) % 64;
                }
            } else {
                for (int i = 0; i < count; i++) {
                    data[i] = (i + me) % 64;
                }
            }
            long t0 = System.nanoTime();
            switch (op) {
                case allreduce -> ring.allreduce(data);
                case reduce_scatter -> ring.reduceScatter(data, part, io.github.verbs4j.transfer.collective.ReduceOp.SUM);
                case all_gather -> ring.allGather(part, data);
            }
            if (it >= 0) {
                total += System.nanoTime() - t0;
            }
            int checked = op == Op.reduce_scatter ? block : count;
            for (int k = 0; k < checked; k++) {
                int i = op == Op.reduce_scatter ? me * block + k : k;
                float want = 0;
                if (op == Op.all_gather) {
                    want = (i + i / block) % 64;
                } else {
                    for (int r = 0; r < n; r++) {
                        want += (i + r) % 64;
                    }
                }
                float got = op == Op.reduce_scatter ? part[k] : data[k];
                if (got != want) {
                    throw new IllegalStateException("rank " + me + ": " + op.label() + " element " + i + " is " + got
                            + ", not " + want);
                }
            }
        }
        return total / 1e9 / iterations;
    }
}
