package io.github.verbs4j.channel;

import java.net.InetSocketAddress;
import java.time.Duration;

/**
 * The other process of {@link TwoProcessChannelTest}. Modes:
 * <ul>
 *   <li>{@code serve <messages> <seed>}: listens on a free port (prints {@code PORT <n>}), accepts
 *       one channel, receives and checks the stream, expects the sender's clean close, prints
 *       {@code OK <messages>};</li>
 *   <li>{@code send <port> <messages> <seed>}: connects, sends the stream, closes (which drains),
 *       prints {@code SENT <messages>};</li>
 *   <li>{@code hold <port>}: connects and receives without giving slots back, printing
 *       {@code HOLDING} once the first message arrived, until it is killed.</li>
 * </ul>
 * Each mode takes the {@link ChannelOptions.Notification} to use as an optional last argument
 * (default {@code AUTO}).
 */
public final class ChannelPeer {

    private ChannelPeer() {
    }

    public static void main(String[] args) throws Exception {
        Duration t = Duration.ofSeconds(60L * Traffic.SLOWDOWN);
        switch (args[0]) {
            case "serve" -> {
                long n = Long.parseLong(args[1]);
                long seed = Long.parseLong(args[2]);
                try (ChannelServer server = ChannelServer.listen(Traffic.any(), options(args, 3))) {
                    System.out.println("PORT " + server.localAddress().getPort());
                    Channel ch = server.accept(t); // an RdmaTimeoutException (the peer fails) when none came
                    ChannelTest.receiveStream(ch, seed, n, ch.maxMessageSize());
                    try {
                        Message extra = ch.receive(t);
                        System.out.println("FAIL a message beyond the stream: " + extra);
                        return;
                    } catch (ChannelClosedException expected) {
                        System.out.println("OK " + ch.receivedCount());
                    }
                }
            }
            case "send" -> {
                int port = Integer.parseInt(args[1]);
                long n = Long.parseLong(args[2]);
                long seed = Long.parseLong(args[3]);
                try (Channel ch = Channel.connect(new InetSocketAddress(Traffic.ADDRESS, port), options(args, 4), t)) {
                    ChannelTest.sendStream(ch, seed, n);
                }
                System.out.println("SENT " + n);
            }
            case "hold" -> {
                int port = Integer.parseInt(args[1]);
                Channel ch = Channel.connect(new InetSocketAddress(Traffic.ADDRESS, port), options(args, 2), t);
                ch.receive(t); // an RdmaTimeoutException (the peer fails) when nothing arrived
                System.out.println("HOLDING");
                Thread.sleep(Long.MAX_VALUE);
            }
            default -> throw new IllegalArgumentException(args[0]);
        }
    }

    private static ChannelOptions options(String[] args, int index) {
        return ChannelOptions.defaults().withNotification(args.length > index
                ? ChannelOptions.Notification.valueOf(args[index]) : ChannelOptions.Notification.AUTO);
    }
}
