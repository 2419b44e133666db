package io.github.verbs4j.examples;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import io.github.verbs4j.Endpoint;
import io.github.verbs4j.RemoteBuffer;

/**
 * The control connection of the perftest-style commands: one TCP connection, ASCII lines.
 * <pre>
 * client: VERBS4J-PERF 1 HELLO &lt;test&gt; &lt;iterations&gt; &lt;size,size,...&gt; &lt;endpoint&gt; &lt;remote buffer&gt;
 * server: VERBS4J-PERF 1 OK &lt;endpoint&gt; &lt;remote buffer&gt;      (or VERBS4J-PERF 1 ERROR &lt;reason&gt;)
 * then per size:  client GO &lt;size&gt;, server READY, (the run), client DONE, server DONE
 * finally:        client BYE
 * </pre>
 * The tag and version open every conversation, so a peer that speaks anything else (another
 * version, perftest's own exchange, a stray service on the port) is named as such instead of
 * hanging or misreading numbers. Endpoints and remote buffers use verbs4j's text forms.
 */
final class PerfWire implements AutoCloseable {

    static final String TAG = "VERBS4J-PERF";
    static final int VERSION = 1;
    static final int MAX_LINE = 1024;
    private static final int HANDSHAKE_TIMEOUT_MS = 30_000;

    /** The most sizes one HELLO may list (-a lists 23). */
    static final int MAX_SIZES = 64;

    private final Socket socket;
    private final InputStream in;
    private final OutputStream out;
    private final String peer;

    private PerfWire(Socket socket, String peer) throws IOException {
        this.socket = socket;
        this.in = socket.getInputStream();
        this.out = socket.getOutputStream();
        this.peer = peer;
    }

    static PerfWire accept(ServerSocket listener) {
        try (listener) {
            Socket s = listener.accept();
            s.setTcpNoDelay(true);
            return new PerfWire(s, "the client " + s.getInetAddress().getHostAddress());
        } catch (IOException e) {
            throw new Verbs4jTool.Verbs4jFailure("accepting a client failed: " + e.getMessage());
        }
    }

    static PerfWire connect(String host, int port) {
        Socket s = new Socket();
        try {
            s.connect(new InetSocketAddress(host, port), 10_000);
            s.setTcpNoDelay(true);
            return new PerfWire(s, host + ":" + port);
        } catch (UnknownHostException e) {
            closeQuietly(s);
            throw new Verbs4jTool.Verbs4jFailure("couldn't connect to " + host + ":" + port + ": unknown host");
        } catch (IOException e) {
            closeQuietly(s);
            throw new Verbs4jTool.Verbs4jFailure("couldn't connect to " + host + ":" + port + ": " + e.getMessage());
        }
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // already failing
        }
    }

    /** Sends one line (the tag and version are added for handshake lines by the caller). */
    void send(String line) {
        try {
            out.write((line + "\n").getBytes(StandardCharsets.US_ASCII));
            out.flush();
        } catch (IOException e) {
            throw new Verbs4jTool.Verbs4jFailure("lost the control connection to " + peer + ": " + e.getMessage());
        }
    }

    /**
     * Reads the first line of the peer, which must start with the tag and this version; returns
     * the rest of the words. Gives up after 30 s: a peer that says nothing speaks something else.
     */
    String[] receiveHandshake() {
        String prefix = TAG + " ";
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        try {
            socket.setSoTimeout(HANDSHAKE_TIMEOUT_MS);
            while (true) {
                int b = in.read();
                if (b < 0) {
                    if (line.size() == 0) {
                        throw new Verbs4jTool.Verbs4jFailure(peer + " closed the connection without a word: "
                                + "it does not speak the verbs4j perf protocol (or it refused this test)");
                    }
                    break;
                }
                if (b == '\n') {
                    break;
                }
                line.write(b);
                String sofar = line.toString(StandardCharsets.ISO_8859_1);
                // decide as soon as the tag cannot match: perftest's own exchange has no newline
                if (!prefix.startsWith(sofar.substring(0, Math.min(sofar.length(), prefix.length())))) {
                    throw anotherProtocol(sofar);
                }
                if (line.size() > MAX_LINE) {
                    throw anotherProtocol(sofar);
                }
            }
            socket.setSoTimeout(0);
        } catch (SocketTimeoutException e) {
            throw new Verbs4jTool.Verbs4jFailure(peer + " sent no verbs4j perf handshake within "
                    + HANDSHAKE_TIMEOUT_MS / 1000 + " s: it speaks another protocol");
        } catch (IOException e) {
            throw new Verbs4jTool.Verbs4jFailure("lost the control connection to " + peer + ": " + e.getMessage());
        }
        String text = line.toString(StandardCharsets.ISO_8859_1);
        if (!text.startsWith(prefix)) {
            throw anotherProtocol(text);
        }
        String[] words = text.substring(prefix.length()).trim().split(" ");
        int version;
        try {
            version = Integer.parseInt(words[0]);
        } catch (NumberFormatException e) {
            throw anotherProtocol(text);
        }
        if (version != VERSION) {
            throw new Verbs4jTool.Verbs4jFailure(peer + " speaks verbs4j perf protocol version " + version
                    + ", this tool speaks version " + VERSION + ": use the same verbs4j on both sides");
        }
        String[] rest = new String[words.length - 1];
        System.arraycopy(words, 1, rest, 0, rest.length);
        return rest;
    }

    private Verbs4jTool.Verbs4jFailure anotherProtocol(String got) {
        return new Verbs4jTool.Verbs4jFailure(peer + " speaks another protocol (it sent '" + printable(got)
                + "', not a verbs4j perf handshake)");
    }

    /** Reads a line and checks it is {@code expected} (a word, optionally with arguments). */
    String expect(String expected) {
        return expect(expected, 0);
    }

    /**
     * As {@link #expect(String)}, giving up when the peer sends nothing for {@code timeoutMs}
     * (0: no bound).
     */
    String expect(String expected, int timeoutMs) {
        String line = receive(timeoutMs, expected);
        if (!line.equals(expected) && !line.startsWith(expected + " ")) {
            throw new Verbs4jTool.Verbs4jFailure(peer + " broke the verbs4j perf protocol: expected " + expected
                    + ", got '" + printable(line) + "'");
        }
        return line;
    }

    String receive() {
        return receive(0, null);
    }

    /**
     * Reads one line; gives up with a one-line failure naming {@code expecting} when the peer
     * sends nothing for {@code timeoutMs} (0: waits as long as the connection lives).
     */
    String receive(int timeoutMs, String expecting) {
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        try {
            socket.setSoTimeout(timeoutMs);
            while (true) {
                int b = in.read();
                if (b < 0) {
                    throw new Verbs4jTool.Verbs4jFailure(peer + " closed the control connection"
                            + (line.size() > 0 ? " mid-line" : ""));
                }
                if (b == '\n') {
                    return line.toString(StandardCharsets.US_ASCII);
                }
                if (line.size() > MAX_LINE) {
                    throw new Verbs4jTool.Verbs4jFailure(peer + " sent an over-long control line");
                }
                line.write(b);
            }
        } catch (SocketTimeoutException e) {
            throw new Verbs4jTool.Verbs4jFailure(peer + " sent nothing for " + timeoutMs / 1000 + " s (expected "
                    + expecting + "): it stopped");
        } catch (IOException e) {
            throw new Verbs4jTool.Verbs4jFailure("lost the control connection to " + peer + ": " + e.getMessage());
        }
    }

    /** A client's HELLO, every field checked. */
    record Hello(String test, int iterations, int[] sizes, Endpoint endpoint, RemoteBuffer remote) {

        int maxSize() {
            return Arrays.stream(sizes).max().orElseThrow();
        }
    }

    /** Why a peer's line cannot be used; the message names the field. */
    static final class BadField extends RuntimeException {
        private static final long serialVersionUID = 1L;

        BadField(String message) {
            super(message, null, false, false);
        }
    }

    /**
     * Parses and checks {@code HELLO <test> <iterations> <sizes> <endpoint> <remote buffer>}
     * (the words after the tag and version): at least one iteration, 1..{@value #MAX_SIZES}
     * sizes each 1..{@code maxSize} bytes, an endpoint, and a remote buffer that holds the
     * largest size.
     */
    static Hello parseHello(String[] words, int maxSize) {
        if (words.length != 6 || !words[0].equals("HELLO")) {
            throw new BadField("malformed HELLO (want HELLO <test> <iterations> <sizes> <endpoint> <remote buffer>)");
        }
        int iterations = number(words[2], "iteration count");
        if (iterations < 1) {
            throw new BadField("iteration count " + iterations + " is not positive");
        }
        String[] list = words[3].split(",", -1);
        if (list.length > MAX_SIZES) {
            throw new BadField("more than " + MAX_SIZES + " sizes");
        }
        int[] sizes = new int[list.length];
        for (int k = 0; k < list.length; k++) {
            sizes[k] = size(list[k], maxSize);
        }
        Endpoint endpoint = endpoint(words[4]);
        RemoteBuffer remote = remoteBuffer(words[5], Arrays.stream(sizes).max().orElseThrow());
        return new Hello(words[1], iterations, sizes, endpoint, remote);
    }

    /** A message size: a decimal number of bytes, 1..{@code maxSize}. */
    static int size(String word, int maxSize) {
        int s = number(word, "size");
        if (s < 1 || s > maxSize) {
            throw new BadField("size " + s + " is outside 1.." + maxSize + " bytes"
                    + (s > maxSize ? " (the server's --max-size)" : ""));
        }
        return s;
    }

    static Endpoint endpoint(String word) {
        try {
            return Endpoint.parse(word);
        } catch (IllegalArgumentException e) {
            throw new BadField("bad endpoint '" + printable(word) + "'");
        }
    }

    /** A remote buffer that can hold {@code atLeast} bytes. */
    static RemoteBuffer remoteBuffer(String word, long atLeast) {
        RemoteBuffer r;
        try {
            r = RemoteBuffer.parse(word);
        } catch (IllegalArgumentException e) {
            throw new BadField("bad remote buffer '" + printable(word) + "'");
        }
        if (r.length() < atLeast) {
            throw new BadField("remote buffer of " + r.length() + " bytes is smaller than the largest size, " + atLeast);
        }
        return r;
    }

    private static int number(String word, String what) {
        if (word.isEmpty() || word.length() > 10 || !word.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new BadField("bad " + what + " '" + printable(word) + "'");
        }
        long v = Long.parseLong(word);
        if (v > Integer.MAX_VALUE) {
            throw new BadField(what + " " + word + " is too large");
        }
        return (int) v;
    }

    /** A peer's text, safe to print on one line: control and non-ASCII characters as '?', cut at 40. */
    static String printable(String got) {
        return printable(got, 40);
    }

    /** A peer's text, safe to print on one line, cut after {@code max} characters. */
    static String printable(String got, int max) {
        StringBuilder shown = new StringBuilder();
        for (char c : got.toCharArray()) {
            shown.append(c >= 0x20 && c < 0x7f ? c : '?');
            if (shown.length() >= max) {
                shown.append("...");
                break;
            }
        }
        return shown.toString();
    }

    @Override
    public void close() {
        closeQuietly(socket);
    }
}
