package io.github.verbs4j.testsupport;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * A peer JVM for the tests that do RDMA between two processes: this JVM's java launcher, class
 * path and library choice ({@code verbs4j.libibverbs}, {@code verbs4j.librdmacm}), native access
 * enabled, the peer's stderr on this JVM's. The test and the peer talk in lines over the peer's
 * stdin and stdout: {@link #println} sends one, {@link #expect} reads one and checks its prefix.
 * {@link #close} ends the peer forcibly (after a test that already saw it exit, a no-op).
 */
public final class PeerJvm implements AutoCloseable {

    /** Options for a short-lived peer: class data sharing and C1 only, so it starts and is done fast. */
    public static final List<String> QUICK_START = List.of("-Xshare:auto", "-XX:TieredStopAtLevel=1");

    private static final String[] PASSED_ON = {"verbs4j.libibverbs", "verbs4j.librdmacm"};

    private final Process process;
    private final BufferedReader in;
    private final PrintStream out;

    private PeerJvm(Process process) {
        this.process = process;
        this.in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        this.out = new PrintStream(process.getOutputStream(), true, StandardCharsets.UTF_8);
    }

    /**
     * The command line that runs {@code main} in a fresh JVM like this one.
     *
     * @param jvmOptions options for the peer JVM beyond {@code --enable-native-access=ALL-UNNAMED}
     * @param main the class whose {@code main} the peer runs
     * @param args its arguments
     * @return the command, to start as it is or through a {@link ProcessBuilder} of one's own
     */
    public static List<String> command(List<String> jvmOptions, Class<?> main, String... args) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.addAll(jvmOptions);
        for (String p : PASSED_ON) {
            if (System.getProperty(p) != null) {
                cmd.add("-D" + p + "=" + System.getProperty(p));
            }
        }
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        cmd.addAll(List.of(args));
        return cmd;
    }

    /**
     * Starts {@code main} in a fresh JVM like this one.
     *
     * @param jvmOptions options for the peer JVM beyond {@code --enable-native-access=ALL-UNNAMED}
     * @param main the class whose {@code main} the peer runs
     * @param args its arguments
     * @return the running peer
     * @throws IOException if the JVM cannot be started
     */
    public static PeerJvm start(List<String> jvmOptions, Class<?> main, String... args) throws IOException {
        return start(new ProcessBuilder(command(jvmOptions, main, args)));
    }

    /**
     * Starts a peer from a command of {@link #command}'s, with whatever environment the builder
     * was given; its stderr goes to this JVM's.
     *
     * @param builder the command and its environment
     * @return the running peer
     * @throws IOException if the JVM cannot be started
     */
    public static PeerJvm start(ProcessBuilder builder) throws IOException {
        return new PeerJvm(builder.redirectError(ProcessBuilder.Redirect.INHERIT).start());
    }

    /**
     * What a peer run to its end printed and how it exited.
     *
     * @param stdout all it wrote on stdout
     * @param stderr all it wrote on stderr
     * @param exitCode its exit code
     */
    public record Ended(String stdout, String stderr, int exitCode) {
        /** The exit code and both streams, for an assertion's message. */
        @Override
        public String toString() {
            return "exit " + exitCode + "\nstdout:\n" + stdout + "stderr:\n" + stderr;
        }
    }

    /**
     * Runs {@code main} in a fresh JVM like this one ({@link #command}) to its end.
     *
     * @param jvmOptions options for the peer JVM beyond {@code --enable-native-access=ALL-UNNAMED}
     * @param main the class whose {@code main} the peer runs
     * @param args its arguments
     * @return what it printed and its exit code
     * @throws IOException if the JVM cannot be started or its output read
     * @throws InterruptedException if interrupted while waiting for it
     */
    public static Ended runToEnd(List<String> jvmOptions, Class<?> main, String... args)
            throws IOException, InterruptedException {
        return runToEnd(new ProcessBuilder(command(jvmOptions, main, args)));
    }

    /**
     * Runs {@code builder}'s command to its end, its stdin closed, its stderr kept apart from its
     * stdout (in a temporary file, removed after). A peer still running 60 s after it closed its
     * stdout is killed and fails the test.
     *
     * @param builder the command and its environment
     * @return what it printed and its exit code
     * @throws IOException if it cannot be started or its output read
     * @throws InterruptedException if interrupted while waiting for it
     */
    public static Ended runToEnd(ProcessBuilder builder) throws IOException, InterruptedException {
        Path err = Files.createTempFile("verbs4j-peer", ".stderr");
        try {
            builder.redirectError(err.toFile());
            Process p = builder.start();
            p.getOutputStream().close();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new AssertionError("the child JVM did not finish within 60 s: " + builder.command());
            }
            return new Ended(out, Files.readString(err), p.exitValue());
        } finally {
            Files.deleteIfExists(err);
        }
    }

    /**
     * The peer's process.
     *
     * @return the process
     */
    public Process process() {
        return process;
    }

    /**
     * Sends the peer one line.
     *
     * @param line the line, without its end
     */
    public void println(String line) {
        out.println(line);
    }

    /**
     * Reads the peer's next line, which must start with {@code prefix}.
     *
     * @param prefix what the line starts with
     * @return the rest of the line
     * @throws IOException if the peer's stdout cannot be read
     * @throws AssertionError if the line does not start with {@code prefix}, or the peer closed its stdout
     */
    public String expect(String prefix) throws IOException {
        String line = in.readLine();
        if (line == null || !line.startsWith(prefix)) {
            throw new AssertionError("expected '" + prefix + "...' from the peer process, got " + line);
        }
        return line.substring(prefix.length());
    }

    /**
     * Reads the next line of a peer's stdout, waiting at most {@code timeout}; it must start with
     * {@code prefix}. For the tests that keep their own reader of a peer's output.
     *
     * @param in the peer's stdout
     * @param prefix what the line starts with
     * @param timeout how long to wait for the line
     * @return the rest of the line, trimmed
     * @throws Exception if the wait times out or is interrupted
     * @throws AssertionError if the line does not start with {@code prefix}, or the peer closed its stdout
     */
    public static String expect(BufferedReader in, String prefix, Duration timeout) throws Exception {
        CompletableFuture<String> line = CompletableFuture.supplyAsync(() -> {
            try {
                return in.readLine();
            } catch (Exception e) {
                return "read failed: " + e;
            }
        });
        String got = line.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        if (got == null || !got.startsWith(prefix)) {
            throw new AssertionError("expected '" + prefix + "...' from the peer, got " + got);
        }
        return got.substring(prefix.length()).trim();
    }

    /** Ends the peer forcibly if it still runs. */
    @Override
    public void close() {
        process.destroyForcibly();
    }
}
