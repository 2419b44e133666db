package io.github.verbs4j.transfer;

import io.github.verbs4j.testsupport.PeerJvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Addresses, sizes and peer JVMs of the transfer suites. */
final class TestNet {

    private TestNet() {
    }

    /** {@code VERBS4J_ADDR} (the rxe VM's address) or loopback, which softrdma's CM accepts. */
    static final InetAddress ADDRESS = address();

    /** Inside the rxe VM the JVM runs emulated: waits are stretched. */
    static final int SLOWDOWN = "1".equals(System.getenv("VERBS4J_IN_VM")) ? 10 : 1;

    /** Whether {@code -Dverbs4j.transfer.full=true} asks for the full sizes (docs/transfer.md). */
    static final boolean FULL = Boolean.getBoolean("verbs4j.transfer.full");

    /**
     * The factor of the peers' waits: {@link #SLOWDOWN}, five times that at the full sizes (four
     * JVMs filling and registering 64 MiB each on a loaded 2-core machine took over 60 s to form
     * the ring).
     */
    static final int WAIT = SLOWDOWN * (FULL ? 5 : 1);

    private static InetAddress address() {
        String a = System.getenv("VERBS4J_ADDR");
        try {
            return InetAddress.getByName(a == null || a.isBlank() ? "127.0.0.1" : a);
        } catch (UnknownHostException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Whether the suites run inside the rxe/siw VM ({@code scripts/rxe-vm}), emulated. */
    static final boolean IN_VM = SLOWDOWN > 1;

    /**
     * Whether the suites that start peer JVMs run: everywhere but inside the VM, where a JVM starts
     * about 50 times slower (the four-rank ring alone took 674 s) unless
     * {@code -Dverbs4j.transfer.processes=true} asks for them; the reason is given to the skip.
     */
    static final boolean PROCESSES = !IN_VM || Boolean.getBoolean("verbs4j.transfer.processes");

    static final String PROCESSES_SKIPPED = "peer JVMs start ~50x slower under the VM's emulation (over 10 min for"
            + " this class on rxe0); run with -Dverbs4j.transfer.processes=true to include them";

    /**
     * Whether the device is iWARP (siw0 in the VM): it has no immediate data, which the ring's
     * WRITE_WITH_IMM needs.
     */
    static boolean iwarp() {
        try {
            return io.github.verbs4j.Verbs.devices().stream()
                    .anyMatch(d -> d.transport() == io.github.verbs4j.TransportType.IWARP);
        } catch (RuntimeException | Error e) {
            return false;
        }
    }

    /** Engine options with the connect/look-up timeout stretched by {@link #SLOWDOWN}. */
    static TransferOptions options() {
        TransferOptions d = TransferOptions.defaults();
        return d.withConnectTimeout(d.connectTimeout().multipliedBy(SLOWDOWN));
    }

    /**
     * Ring options for collectives of at most {@code maxBytes}, with the join and every
     * collective allowed 60 s times {@code factor} ({@link #SLOWDOWN} or {@link #WAIT}).
     */
    static io.github.verbs4j.transfer.collective.RingOptions ring(long maxBytes, int factor) {
        Duration t = Duration.ofSeconds(60L * factor);
        return io.github.verbs4j.transfer.collective.RingOptions.defaults().withMaxBytes(maxBytes).withJoinTimeout(t)
                .withOperationTimeout(t);
    }

    static InetSocketAddress anyPort() {
        return new InetSocketAddress(ADDRESS, 0);
    }

    /** Whether the suites run on softrdma (the build's default) rather than the system's rdma-core. */
    static boolean onSoftrdma() {
        String verbs = System.getProperty("verbs4j.libibverbs");
        return verbs != null && !verbs.isBlank() && !verbs.equals("system");
    }

    /** The byte at {@code offset} of peer {@code seed}'s pattern. */
    static byte pattern(int seed, long offset) {
        long x = offset * 0x9E3779B97F4A7C15L + seed * 0xBF58476D1CE4E5B9L;
        return (byte) (x ^ (x >>> 29) ^ (x >>> 47));
    }

    /** A JVM running {@code main} with this JVM's class path and library choice, and extra environment. */
    static Child start(Class<?> main, Map<String, String> env, String... args) throws Exception {
        List<String> options = FULL ? List.of("-Xmx768m", "-Dverbs4j.transfer.full=true") : List.of("-Xmx256m");
        ProcessBuilder pb = new ProcessBuilder(PeerJvm.command(options, main, args))
                .redirectError(ProcessBuilder.Redirect.INHERIT);
        pb.environment().putAll(env);
        return new Child(pb.start());
    }

    record Child(Process process, BufferedReader in, PrintStream out) implements AutoCloseable {
        Child(Process process) {
            this(process, new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8)),
                    new PrintStream(process.getOutputStream(), true, StandardCharsets.UTF_8));
        }

        /** The rest of the next line, which must start with {@code prefix}. */
        String expect(String prefix) throws Exception {
            return PeerJvm.expect(in, prefix, Duration.ofSeconds(60L * WAIT));
        }

        @Override
        public void close() throws Exception {
            process.destroyForcibly();
            process.waitFor(10L * SLOWDOWN, TimeUnit.SECONDS);
        }
    }
}
