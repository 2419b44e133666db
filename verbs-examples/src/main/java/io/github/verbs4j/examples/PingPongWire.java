package io.github.verbs4j.examples;

import io.github.verbs4j.Endpoint;
import io.github.verbs4j.Gid;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.regex.Pattern;

/**
 * The TCP exchange of rdma-core's {@code ibv_rc_pingpong} and {@code ibv_ud_pingpong}, so that
 * either side can be the stock tool:
 * <ol>
 *   <li>the client connects and writes its address as 52 bytes: {@code "%04x:%06x:%06x:%s"}
 *       (LID, QPN, PSN, the GID as 32 hex digits in wire byte order) and a NUL;</li>
 *   <li>the server reads them, readies its QP for the client, and answers with its own 52
 *       bytes;</li>
 *   <li>the client answers {@code "done"} and a NUL (5 bytes); both close the connection.</li>
 * </ol>
 * Default port 18515.
 */
final class PingPongWire {

    /** The size of one address message, terminating NUL included. */
    static final int MESSAGE_BYTES = "0000:000000:000000:00000000000000000000000000000000".length() + 1;
    private static final byte[] DONE = "done\0".getBytes(StandardCharsets.US_ASCII);
    static final int DEFAULT_PORT = 18515;
    /** How long a peer may take to send its part of the exchange. */
    static final int EXCHANGE_TIMEOUT_MS = 30_000;
    private static final Pattern ADDRESS = Pattern.compile("\\p{XDigit}{4}:\\p{XDigit}{6}:\\p{XDigit}{6}:\\p{XDigit}{32}");

    private PingPongWire() {
    }

    static byte[] encode(Endpoint e) {
        String text = String.format("%04x:%06x:%06x:%s", e.lid(), e.qpn(), e.psn(), e.gid().toHex());
        byte[] msg = Arrays.copyOf(text.getBytes(StandardCharsets.US_ASCII), MESSAGE_BYTES);
        return msg;
    }

    static Endpoint decode(byte[] msg) {
        int end = 0;
        while (end < msg.length && msg[end] != 0) {
            end++;
        }
        String text = new String(msg, 0, end, StandardCharsets.ISO_8859_1);
        try {
            // exactly the stock tool's "%04x:%06x:%06x:%s": hex digits only, no signs or spaces
            if (!ADDRESS.matcher(text).matches()) {
                throw new IllegalArgumentException();
            }
            String[] parts = text.split(":", 4);
            return new Endpoint(Integer.parseInt(parts[0], 16), Integer.parseInt(parts[1], 16),
                    Integer.parseInt(parts[2], 16), Gid.of(HexFormat.of().parseHex(parts[3])));
        } catch (IllegalArgumentException e) {
            throw new Verbs4jTool.Verbs4jFailure("peer speaks another protocol: not a ping-pong address message: '"
                    + printable(text) + "'");
        }
    }

    private static String printable(String s) {
        StringBuilder sb = new StringBuilder();
        for (char c : s.toCharArray()) {
            sb.append(c >= 0x20 && c < 0x7f ? c : '?');
            if (sb.length() > 60) {
                sb.append("...");
                break;
            }
        }
        return sb.toString();
    }

    /** What the server does between reading the client's address and answering with its own. */
    interface Readiness {
        void ready(Endpoint remote);
    }

    /** Server side: accepts one client, exchanges addresses, returns the client's. */
    static Endpoint serve(ServerSocket listener, Endpoint local, Readiness readiness) {
        try (listener; Socket s = listener.accept()) {
            s.setSoTimeout(EXCHANGE_TIMEOUT_MS);
            InputStream in = s.getInputStream();
            OutputStream out = s.getOutputStream();
            Endpoint remote = decode(readFully(in, MESSAGE_BYTES, "the client's address"));
            readiness.ready(remote);
            out.write(encode(local));
            out.flush();
            readFully(in, DONE.length, "the client's \"done\"");
            return remote;
        } catch (SocketTimeoutException e) {
            throw new Verbs4jTool.Verbs4jFailure("the client sent no ping-pong address within "
                    + EXCHANGE_TIMEOUT_MS / 1000 + " s: it speaks another protocol");
        } catch (IOException e) {
            throw new Verbs4jTool.Verbs4jFailure("address exchange with the client failed: " + e.getMessage());
        }
    }

    /** Client side: connects to {@code host:port}, exchanges addresses, returns the server's. */
    static Endpoint connect(String host, int port, Endpoint local) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(host, port), 10_000);
            s.setSoTimeout(EXCHANGE_TIMEOUT_MS);
            OutputStream out = s.getOutputStream();
            out.write(encode(local));
            out.flush();
            Endpoint remote = decode(readFully(s.getInputStream(), MESSAGE_BYTES, "the server's address"));
            out.write(DONE);
            out.flush();
            return remote;
        } catch (UnknownHostException e) {
            throw new Verbs4jTool.Verbs4jFailure("couldn't connect to " + host + ":" + port + ": unknown host");
        } catch (ConnectException e) {
            throw new Verbs4jTool.Verbs4jFailure("couldn't connect to " + host + ":" + port + ": " + e.getMessage());
        } catch (SocketTimeoutException e) {
            throw new Verbs4jTool.Verbs4jFailure(host + ":" + port + " sent no ping-pong address within "
                    + EXCHANGE_TIMEOUT_MS / 1000 + " s: it speaks another protocol");
        } catch (IOException e) {
            throw new Verbs4jTool.Verbs4jFailure("address exchange with " + host + ":" + port + " failed: " + e.getMessage());
        }
    }

    private static byte[] readFully(InputStream in, int n, String what) throws IOException {
        byte[] b = in.readNBytes(n);
        if (b.length != n) {
            throw new EOFException("connection closed after " + b.length + " of " + n + " bytes of " + what);
        }
        return b;
    }
}
