package io.github.verbs4j.examples;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.IntFunction;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A started process for the tool tests: the verbs4j tool in a fresh JVM (on the library the
 * build selected) or a stock rdma-core tool (which finds softrdma through the LD_LIBRARY_PATH the
 * build exports). Output goes to files, so a process never blocks on a full pipe.
 */
final class Proc implements AutoCloseable {

    final List<String> command;
    private final Process process;
    private final Path out;
    private final Path err;
    private int port = -1;

    private Proc(List<String> command) {
        this(command, pb -> { });
    }

    /** {@code setup} adjusts the environment or working directory before the start. */
    private Proc(List<String> command, Consumer<ProcessBuilder> setup) {
        this.command = command;
        try {
            out = Files.createTempFile("verbs4j-test", ".out");
            err = Files.createTempFile("verbs4j-test", ".err");
            ProcessBuilder pb = new ProcessBuilder(command).redirectOutput(out.toFile()).redirectError(err.toFile());
            setup.accept(pb);
            process = pb.start();
            process.getOutputStream().close();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + command, e);
        }
    }

    /** The verbs4j tool in a new JVM. */
    static Proc tool(String... args) {
        return tool(List.of(), args);
    }

    /** The verbs4j tool in a new JVM with extra JVM options. */
    static Proc tool(List<String> jvmOptions, String... args) {
        return new Proc(toolCommand(jvmOptions, System.getProperty("verbs4j.libibverbs"), args));
    }

    /**
     * The verbs4j tool in a new JVM on {@code libibverbs} (a path, or {@code system}) and without
     * the LD_LIBRARY_PATH the build exports: the way a user without softrdma starts it.
     */
    static Proc toolOutsideTheBuild(String libibverbs, String... args) {
        return new Proc(toolCommand(List.of(), libibverbs, args), pb -> pb.environment().remove("LD_LIBRARY_PATH"));
    }

    /** A script of this repository, started in {@code directory} with {@code environment} added. */
    static Proc script(Path directory, Map<String, String> environment, String... command) {
        return new Proc(List.of(command), pb -> {
            pb.directory(directory.toFile());
            pb.environment().putAll(environment);
        });
    }

    private static List<String> toolCommand(List<String> jvmOptions, String lib, String... args) {
        List<String> command = new ArrayList<>();
        command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        command.add("--enable-native-access=ALL-UNNAMED");
        command.addAll(jvmOptions);
        command.add("-XX:TieredStopAtLevel=1");
        if (lib != null && !lib.isEmpty()) {
            command.add("-Dverbs4j.libibverbs=" + lib);
        }
        command.add("-cp");
        // the test's own class path: every subcommand's classes (verbs-cm's for rping too) load
        // when picocli builds the command tree
        command.add(System.getProperty("java.class.path"));
        command.add(Verbs4jTool.class.getName());
        command.addAll(List.of(args));
        return command;
    }

    /** A stock tool (ibv_rc_pingpong, ...). */
    static Proc stock(String... command) {
        return new Proc(List.of(command));
    }

    /** Waits for exit; fails the test (and kills the process) after {@code seconds}. */
    Proc await(int seconds) {
        try {
            if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                fail(String.join(" ", command) + " did not finish within " + seconds + " s; stdout:\n" + out() + "\nstderr:\n" + err());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError(e);
        }
        return this;
    }

    int exitCode() {
        return process.exitValue();
    }

    String out() {
        return read(out);
    }

    String err() {
        return read(err);
    }

    /** For assertion messages. */
    String describe() {
        return String.join(" ", command) + "\n--- stdout:\n" + out() + "--- stderr:\n" + err();
    }

    /** Asserts exit code 0 and no stack trace on stderr. */
    Proc assertSuccess() {
        if (exitCode() != 0) {
            fail("exit code " + exitCode() + ": " + describe());
        }
        assertNoStackTrace();
        return this;
    }

    void assertNoStackTrace() {
        assertFalse(err().contains("\tat "), "a stack trace reached the user: " + describe());
    }

    private static String read(Path p) {
        try {
            return Files.readString(p, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @Override
    public void close() {
        if (process.isAlive()) {
            process.destroyForcibly();
        }
        try {
            Files.deleteIfExists(out);
            Files.deleteIfExists(err);
        } catch (IOException ignored) {
            // temporary files; nothing to do
        }
    }

    /** A TCP port that was free a moment ago. */
    static int freePort() {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * A loopback TCP port that nothing listens on for as long as the socket stays open: bound,
     * never listening (so connecting to it is refused), and without SO_REUSEADDR (so no other
     * program can listen there meanwhile).
     */
    static Socket reservedPort() {
        Socket s = new Socket();
        try {
            s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
            return s;
        } catch (IOException e) {
            try {
                s.close();
            } catch (IOException ignored) {
                // failing anyway
            }
            throw new UncheckedIOException(e);
        }
    }

    /** What a server says when its port was taken: a collision, not the server's failure. */
    private static final Pattern PORT_TAKEN = Pattern.compile("(?i)address already in use|EADDRINUSE|couldn't listen");

    /**
     * Starts a server ({@code start} gets the port) on a port that was free, and waits until it
     * listens there itself. When another program took the port in between, the server is started
     * again on another port; only the server's own failures fail the test.
     */
    static Proc serverOnFreePort(IntFunction<Proc> start, int seconds) {
        for (int attempt = 1; ; attempt++) {
            int port = freePort();
            Proc p = start.apply(port);
            if (p.awaitListening(port, seconds, attempt < 5)) {
                p.port = port;
                return p;
            }
            p.close();
        }
    }

    /** The port {@link #serverOnFreePort} started this server on. */
    int port() {
        return port;
    }

    /** Waits until this process listens on TCP {@code port}, failing when it exits first. */
    void awaitListening(int port, int seconds) {
        awaitListening(port, seconds, false);
    }

    /** True once this process listens on {@code port}; false when it exited because the port was taken (if allowed). */
    private boolean awaitListening(int port, int seconds, boolean collisionsRetried) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            if (TcpListeners.listening(port, process.toHandle())) {
                return true;
            }
            if (!process.isAlive()) {
                if (collisionsRetried && PORT_TAKEN.matcher(out() + err()).find()) {
                    return false;
                }
                fail("the server exited (" + process.exitValue() + ") before listening: " + describe());
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
        process.destroyForcibly();
        fail("the server did not listen on port " + port + " within " + seconds + " s: " + describe());
        return false;
    }
}
