package io.github.verbs4j.examples;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;

/** The TCP side shared by the tool's commands: the out-of-band connection that carries addresses. */
final class Tcp {

    private Tcp() {
    }

    /**
     * A listener on {@code port} (all addresses, backlog 1: one peer per run), bound before the
     * caller says it is ready so that a client started right after cannot be refused.
     */
    static ServerSocket listen(int port) {
        try {
            ServerSocket ss = new ServerSocket();
            ss.setReuseAddress(true);
            ss.bind(new InetSocketAddress(port), 1);
            return ss;
        } catch (IOException e) {
            throw new Verbs4jTool.Verbs4jFailure("couldn't listen to port " + port + ": " + e.getMessage());
        }
    }
}
