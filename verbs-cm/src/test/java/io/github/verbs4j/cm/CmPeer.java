package io.github.verbs4j.cm;

import io.github.verbs4j.RemoteBuffer;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HexFormat;

/**
 * The client JVM of {@link TwoProcessCmTest}: talks to the test over stdin/stdout, one line per
 * message, and over rdma_cm to the test's server at {@link CmTestNet#ADDRESS}.
 *
 * <p>{@code exchange <port>}: connects with private data "peer-hello", prints {@code CONNECTED <hex
 * of the server's private data>}, receives a message and prints {@code GOT <hex>}, sends it back
 * reversed, RDMA-writes {@link #pattern} into the server's buffer named by a second message
 * (a {@link RemoteBuffer} in bytes), sends "written", waits for the server's disconnect and prints
 * {@code DISCONNECTED}. {@code hang <port>}: connects, prints {@code CONNECTED}, then waits to be killed.
 */
public final class CmPeer {

    static final Duration T = CmTestNet.scaled(Duration.ofSeconds(20));
    static final int WRITE_LENGTH = 3000;

    static byte pattern(int i) {
        return (byte) (i * 13 + 5);
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        HexFormat hex = HexFormat.of();
        String mode = args[0];
        int port = Integer.parseInt(args[1]);
        EndpointOptions options = EndpointOptions.defaults().withPrivateData("peer-hello".getBytes(StandardCharsets.US_ASCII));
        try (RdmaConnection c = new RdmaClient(options).connect(CmTestNet.ADDRESS, port, T)) {
            out.println("CONNECTED " + hex.formatHex(c.peerPrivateData()));
            if (mode.equals("hang")) {
                in.readLine();
                Thread.sleep(Long.MAX_VALUE);
            }
            byte[] message = c.receive(T);
            out.println("GOT " + hex.formatHex(message));
            byte[] reversed = new byte[message.length];
            for (int i = 0; i < message.length; i++) {
                reversed[i] = message[message.length - 1 - i];
            }
            c.send(reversed, T);
            RemoteBuffer target = RemoteBuffer.fromBytes(c.receive(T));
            for (int i = 0; i < WRITE_LENGTH; i++) {
                c.rdmaBuffer().segment().set(ValueLayout.JAVA_BYTE, i, pattern(i));
            }
            c.write(0, target, WRITE_LENGTH, T);
            try {
                c.send("written".getBytes(StandardCharsets.US_ASCII), T);
            } catch (io.github.verbs4j.PeerLostException flushed) {
                // iWARP: the server disconnects once it has this message, which can flush the
                // send here before its completion is seen; the disconnect is awaited below
            }
            c.awaitDisconnect(T); // an RdmaTimeoutException when the server did not disconnect
            out.println("DISCONNECTED");
        }
    }
}
