package io.github.verbs4j.examples.transfer;

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
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.concurrent.Callable;

/**
 * {@code verbs4j transfer-bench}: the transfer engine's bandwidth, perftest style. The server
 * registers a segment and serves until it is stopped; the client connects with {@code -q} queue
 * pairs and runs {@code -n} batches of {@code -b} requests of {@code -s} bytes each (READ or
 * WRITE), split into chunks of {@code -c} bytes, and prints one table row.
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

    @Option(names = {"-o", "--op"}, paramLabel = "READ|WRITE", defaultValue = "WRITE", description = "operation (default: ${DEFAULT-VALUE})")
    String op;

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        TransferCli.require(spec, size >= 1 && batchSize >= 1 && iterations >= 1,
                "size, batch and iterations must be positive");
        boolean write = switch (op.toUpperCase()) {
            case "WRITE" -> true;
            case "READ" -> false;
            default -> throw TransferCli.usage(spec, "--op is READ or WRITE, not " + op);
        };
        int port = TransferCli.port(spec, "--port", this.port);
        long segmentBytes = (long) size * batchSize;
        TransferOptions options;
        try {
            options = TransferOptions.defaults().withQpsPerPeer(qps).withMaxOutstanding(outstanding).withChunkSize(chunk);
        } catch (IllegalArgumentException e) {
            throw TransferCli.usage(spec, e.getMessage());
        }
        if (server == null) {
            try (TransferEngine engine = TransferEngine.open("bench-server", bind.at(port), options)) {
                engine.allocate("bench", segmentBytes);
                out.println("PORT " + engine.localAddress().getPort());
                out.println("serving segment 'bench' of " + segmentBytes + " bytes on " + engine.localAddress()
                        + " until stopped");
                Thread.sleep(Long.MAX_VALUE);
            }
            return 0;
        }
        InetSocketAddress target = new InetSocketAddress(TransferCli.address(spec, "<server>", server), port);
        try (TransferEngine engine = TransferEngine.open("bench-client", bind.at(0), options)) {
            Segment segment = engine.allocate("local", segmentBytes);
            TransferPeer peer = engine.connect(target);
            RemoteSegment remote = peer.lookup("bench", Duration.ofSeconds(10));
            TransferCli.require(spec, remote.length() >= segmentBytes, "the server's segment has " + remote.length()
                    + " bytes; run both sides with the same -s and -b");
            Batch batch = engine.batch(batchSize);
            int warmup = Math.max(1, iterations / 10);
            long start = 0;
            for (int it = -warmup; it < iterations; it++) {
                if (it == 0) {
                    start = System.nanoTime();
                }
                batch.reset();
                for (int i = 0; i < batchSize; i++) {
                    if (write) {
                        batch.write(segment, (long) i * size, remote, (long) i * size, size);
                    } else {
                        batch.read(segment, (long) i * size, remote, (long) i * size, size);
                    }
                }
                batch.submit();
                if (!batch.await(Duration.ofSeconds(60)) || batch.count(TransferStatus.DONE) != batchSize) {
                    out.println("batch " + it + " failed: " + batch.count(TransferStatus.DONE) + " of " + batchSize
                            + " done, first status " + batch.status(0) + " " + batch.completionStatus(0));
                    return 1;
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            double bytes = (double) size * batchSize * iterations;
            TransferCli.rule(out, 87);
            out.printf(" verbs4j transfer-bench %s, %d QPs, %d chunks in flight per QP, chunk %d bytes%n",
                    write ? "WRITE" : "READ", qps, outstanding, chunk);
            TransferCli.rule(out, 87);
            out.println(" #bytes     #batch     #iterations    BW average[GB/sec]    BW average[Gb/sec]   MsgRate[Mpps]");
            out.printf(" %-10d %-10d %-14d %-21.3f %-20.3f %.6f%n", size, batchSize, iterations, bytes / seconds / 1e9,
                    bytes * 8 / seconds / 1e9, batchSize * (double) iterations / seconds / 1e6);
            TransferCli.rule(out, 87);
        }
        return 0;
    }
}
