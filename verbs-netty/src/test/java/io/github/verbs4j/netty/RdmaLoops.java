package io.github.verbs4j.netty;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.net.InetSocketAddress;
import java.util.concurrent.TimeUnit;

/**
 * The event loops and bootstraps verbs-netty's own tests share. A test class registers it as
 * {@code @RegisterExtension static final RdmaLoops loops = new RdmaLoops();} and gets a group of
 * two loops on {@link RdmaIoHandler} for the class: made before its first test (a transport that
 * cannot run fails the class with the reason, it is not skipped), shut down after its last.
 * Servers bind to {@link #LOCAL_ANY_PORT}. A class annotated {@link WireMode} gets bootstraps
 * (these and the static ones, for its tests' own groups) that set
 * {@link RdmaChannelOption#RDMA_WIRE_MODE} on both sides: a subclass so annotated runs its parent's
 * tests on that wire.
 */
final class RdmaLoops implements BeforeAllCallback, AfterAllCallback {

    /** The wire mode of the bootstraps of {@link RdmaLoops} for the annotated class (not its subclasses). */
    @Retention(RetentionPolicy.RUNTIME)
    @Target(ElementType.TYPE)
    @interface WireMode {
        RdmaWireMode value();
    }

    /** The wire mode the running class asked for, or null: the option is left unset (AUTO). Classes run one at a time. */
    private static volatile RdmaWireMode classMode;

    /** 127.0.0.1, the address softrdma's device answers on, and a free port. */
    static final InetSocketAddress LOCAL_ANY_PORT = new InetSocketAddress("127.0.0.1", 0);

    private volatile EventLoopGroup group;

    @Override
    public void beforeAll(ExtensionContext context) {
        WireMode mode = context.getRequiredTestClass().getAnnotation(WireMode.class);
        classMode = mode == null ? null : mode.value();
        group = newGroup(2);
    }

    @Override
    public void afterAll(ExtensionContext context) {
        EventLoopGroup g = group;
        group = null;
        classMode = null;
        shutdown(g);
    }

    /** The class's group; only between its first and last test. */
    EventLoopGroup group() {
        EventLoopGroup g = group;
        if (g == null) {
            throw new IllegalStateException("RdmaLoops: no group outside the tests of the class that registered it");
        }
        return g;
    }

    /** A server bootstrap of {@link RdmaServerSocketChannel}s on the class's group. */
    ServerBootstrap serverBootstrap() {
        return serverBootstrap(group());
    }

    /** A client bootstrap of {@link RdmaSocketChannel}s on the class's group. */
    Bootstrap clientBootstrap() {
        return clientBootstrap(group());
    }

    /** A group of {@code threads} loops on {@link RdmaIoHandler}, once the transport is known to run. */
    static EventLoopGroup newGroup(int threads) {
        Rdma.ensureAvailability();
        return new MultiThreadIoEventLoopGroup(threads, RdmaIoHandler.newFactory());
    }

    /** Shuts {@code group} down without a quiet period, waiting up to 5 s. */
    static void shutdown(EventLoopGroup group) {
        if (group != null) {
            group.shutdownGracefully(0, 5, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }

    static ServerBootstrap serverBootstrap(EventLoopGroup group) {
        ServerBootstrap b = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class);
        RdmaWireMode mode = classMode;
        return mode == null ? b : b.childOption(RdmaChannelOption.RDMA_WIRE_MODE, mode);
    }

    static Bootstrap clientBootstrap(EventLoopGroup group) {
        Bootstrap b = new Bootstrap().group(group).channel(RdmaSocketChannel.class);
        RdmaWireMode mode = classMode;
        return mode == null ? b : b.option(RdmaChannelOption.RDMA_WIRE_MODE, mode);
    }
}
