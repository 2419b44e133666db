package io.github.verbs4j.netty;

import io.netty.channel.IoHandlerFactory;

/** Placeholder: the event loop's I/O handler; made real in the next commit. */
public final class RdmaIoHandler {
    private RdmaIoHandler() {
    }

    /** A factory with {@link RdmaTransportOptions#defaults()}. */
    public static IoHandlerFactory newFactory() {
        return newFactory(RdmaTransportOptions.defaults());
    }

    /** A factory for {@code new MultiThreadIoEventLoopGroup(n, factory)}. */
    public static IoHandlerFactory newFactory(RdmaTransportOptions options) {
        throw new UnsupportedOperationException("not implemented yet");
    }
}
