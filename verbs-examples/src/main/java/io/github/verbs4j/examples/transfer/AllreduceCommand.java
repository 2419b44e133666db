package io.github.verbs4j.examples.transfer;

import io.github.verbs4j.transfer.collective.Ring;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;

/**
 * {@code verbs4j allreduce}: ring allreduce of float32 over {@code -N} ranks, each a thread of
 * this process with a ring connection of its own (rdma_cm over {@code --bind}), nccl-tests style:
 * algorithm bandwidth (bytes / time) and bus bandwidth ({@code algbw * 2 (N-1) / N}, what each
 * link carries). Every run's result is checked element by element.
 */
@Command(name = "allreduce", mixinStandardHelpOptions = true,
        description = "Ring allreduce (sum of float32) over N ranks on this host, with algbw and busbw.")
public final class AllreduceCommand implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "-N", paramLabel = "<ranks>", defaultValue = "4", description = "ranks (default: ${DEFAULT-VALUE})")
    int ranks;

    @Option(names = {"-a", "--bind"}, paramLabel = "<addr>", defaultValue = "127.0.0.1",
            description = "address of an RDMA device (default: ${DEFAULT-VALUE})")
    String bind;

    @Option(names = {"-s", "--size"}, paramLabel = "<bytes>", defaultValue = "67108864",
            description = "bytes per rank, a multiple of 4 (default: ${DEFAULT-VALUE})")
    long bytes;

    @Option(names = {"-n", "--iters"}, paramLabel = "<n>", defaultValue = "5", description = "timed runs (default: ${DEFAULT-VALUE})")
    int iterations;

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        if (ranks < 2 || ranks > Ring.MAX_RANKS || bytes < 4 || bytes % 4 != 0 || bytes / 4 > Integer.MAX_VALUE
                || iterations < 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "need 2.." + Ring.MAX_RANKS
                    + " ranks, a size that is a positive multiple of 4, and at least one iteration");
        }
        int count = (int) (bytes / 4);
        Duration timeout = Duration.ofSeconds(120);
        List<CompletableFuture<double[]>> results = new ArrayList<>();
        try (Ring.Rendezvous rendezvous = Ring.rendezvous(new InetSocketAddress(InetAddress.getByName(bind), 0))) {
            InetSocketAddress at = rendezvous.address();
            for (int r = 0; r < ranks; r++) {
                int rank = r;
                results.add(CompletableFuture.supplyAsync(() -> {
                    try (Ring ring = rank == 0 ? rendezvous.join(ranks, bytes, timeout)
                            : Ring.join(at, rank, ranks, bytes, timeout)) {
                        return run(ring, count);
                    }
                }, task -> Thread.ofPlatform().name("rank-" + rank).start(task)));
            }
            double worst = 0;
            for (CompletableFuture<double[]> f : results) {
                double[] seconds = f.get();
                worst = Math.max(worst, seconds[0]);
            }
            double algbw = bytes / worst / 1e9;
            double busbw = algbw * 2 * (ranks - 1) / ranks;
            out.println("---------------------------------------------------------------------------");
            out.printf(" verbs4j allreduce: ring, float32 sum, %d ranks on %s%n", ranks, bind);
            out.println("---------------------------------------------------------------------------");
            out.println(" #bytes         #count       #iterations  time[ms]    algbw[GB/s]  busbw[GB/s]");
            out.printf(" %-14d %-12d %-12d %-11.3f %-12.3f %.3f%n", bytes, count, iterations, worst * 1e3, algbw, busbw);
            out.println("---------------------------------------------------------------------------");
        }
        return 0;
    }

    /** Runs a warm-up and {@code iterations} timed allreduces, checking each; the mean time per run. */
    private double[] run(Ring ring, int count) {
        float[] data = new float[count];
        long total = 0;
        for (int it = -1; it < iterations; it++) {
            for (int i = 0; i < count; i++) {
                data[i] = (i + ring.rank()) % 64;
            }
            long t0 = System.nanoTime();
            ring.allreduce(data);
            if (it >= 0) {
                total += System.nanoTime() - t0;
            }
            for (int i = 0; i < count; i++) {
                float want = 0;
                for (int r = 0; r < ring.size(); r++) {
                    want += (i + r) % 64;
                }
                if (data[i] != want) {
                    throw new IllegalStateException("rank " + ring.rank() + ": element " + i + " is " + data[i]
                            + ", not " + want);
                }
            }
        }
        return new double[] {total / 1e9 / iterations};
    }
}
