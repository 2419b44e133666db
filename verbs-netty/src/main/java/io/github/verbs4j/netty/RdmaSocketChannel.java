package io.github.verbs4j.netty;

import io.netty.channel.embedded.EmbeddedChannel;

/** Placeholder with the final name; made real in the next commit. */
public class RdmaSocketChannel extends EmbeddedChannel {
    /** A channel to connect. */
    public RdmaSocketChannel() {
    }
}
