package io.github.verbs4j.examples;

import picocli.CommandLine.Command;

/** The perftest-style subcommands: each is {@link PerfCommand} with its test. */
final class PerfCommands {

    private PerfCommands() {
    }


    @Command(name = "send-lat", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"SEND latency, half the round trip (like ib_send_lat).", "Server: verbs4j send-lat    client: verbs4j send-lat [-s <bytes> | -a] [-n <iters>] <server host>"})
    static final class SendLat extends PerfCommand {
        @Override
        Kind kind() {
            return Kind.SEND_LAT;
        }
    }

    @Command(name = "write-lat", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"RDMA WRITE latency, half the round trip, spinning on memory (like ib_write_lat).",
                    "Server: verbs4j write-lat    client: verbs4j write-lat [-s <bytes> | -a] [-n <iters>] <server host>"})
    static final class WriteLat extends PerfCommand {
        @Override
        Kind kind() {
            return Kind.WRITE_LAT;
        }
    }

    @Command(name = "read-lat", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"RDMA READ latency (like ib_read_lat).",
                    "Server: verbs4j read-lat    client: verbs4j read-lat [-s <bytes> | -a] [-n <iters>] <server host>"})
    static final class ReadLat extends PerfCommand {
        @Override
        Kind kind() {
            return Kind.READ_LAT;
        }
    }

    @Command(name = "atomic-lat", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"Atomic FETCH_AND_ADD latency (like ib_atomic_lat).",
                    "Server: verbs4j atomic-lat    client: verbs4j atomic-lat [-n <iters>] <server host>"})
    static final class AtomicLat extends PerfCommand {
        @Override
        Kind kind() {
            return Kind.ATOMIC_LAT;
        }
    }

    @Command(name = "send-bw", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"SEND bandwidth (like ib_send_bw).",
                    "Server: verbs4j send-bw    client: verbs4j send-bw [-s <bytes> | -a] [-n <iters>] <server host>"})
    static final class SendBw extends PerfCommand {
        @Override
        Kind kind() {
            return Kind.SEND_BW;
        }
    }

    @Command(name = "write-bw", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"RDMA WRITE bandwidth (like ib_write_bw).",
                    "Server: verbs4j write-bw    client: verbs4j write-bw [-s <bytes> | -a] [-n <iters>] <server host>"})
    static final class WriteBw extends PerfCommand {
        @Override
        Kind kind() {
            return Kind.WRITE_BW;
        }
    }

    @Command(name = "read-bw", mixinStandardHelpOptions = true, sortOptions = false,
            description = {"RDMA READ bandwidth (like ib_read_bw).",
                    "Server: verbs4j read-bw    client: verbs4j read-bw [-s <bytes> | -a] [-n <iters>] <server host>"})
    static final class ReadBw extends PerfCommand {
        @Override
        Kind kind() {
            return Kind.READ_BW;
        }
    }
}
