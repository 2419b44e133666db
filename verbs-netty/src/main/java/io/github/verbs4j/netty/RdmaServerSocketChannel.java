package io.github.verbs4j.netty;

import io.netty.channel.embedded.EmbeddedChannel;

/** Placeholder with the final name; made real in the next commit. */
public class RdmaServerSocketChannel extends EmbeddedChannel {
    /** A channel to bind. */
    public RdmaServerSocketChannel() {
    }
}
