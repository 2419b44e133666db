package io.github.verbs4j.netty.testsuite;

import io.github.verbs4j.netty.Rdma;
import io.github.verbs4j.netty.RdmaIoHandler;
import io.github.verbs4j.netty.RdmaServerSocketChannel;
import io.github.verbs4j.netty.RdmaSocketChannel;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketTestPermutation;
import io.netty.util.concurrent.DefaultThreadFactory;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;

/**
 * The bootstraps Netty's socket test suite runs on, for this transport: an
 * {@link RdmaServerSocketChannel} and an {@link RdmaSocketChannel} on event loops of
 * {@link RdmaIoHandler}, as Netty's epoll and io_uring transports supply theirs.
 *
 * <p>Unlike those, the combinations hold no NIO side: an RDMA channel connects through rdma_cm
 * to an RDMA listener only, so a TCP peer cannot be the other end. The groups are shared by all
 * test classes of the suite (daemon threads), as Netty's permutations share theirs.
 */
public final class RdmaSocketTestPermutation extends SocketTestPermutation {

    /** The permutation every test class of the suite asks for its bootstraps. */
    public static final RdmaSocketTestPermutation INSTANCE = new RdmaSocketTestPermutation();

    private static final EventLoopGroup BOSS_GROUP;
    private static final EventLoopGroup WORKER_GROUP;

    static {
        // softrdma is always there under the build's tests: a transport that cannot start fails
        // the suite with its cause instead of skipping it.
        Rdma.ensureAvailability();
        BOSS_GROUP = new MultiThreadIoEventLoopGroup(1,
                new DefaultThreadFactory("testsuite-rdma-boss", true), RdmaIoHandler.newFactory());
        WORKER_GROUP = new MultiThreadIoEventLoopGroup(2,
                new DefaultThreadFactory("testsuite-rdma-worker", true), RdmaIoHandler.newFactory());
    }

    private RdmaSocketTestPermutation() {
    }

    /**
     * Where a test's server binds: the IPv4 loopback address, which softrdma's device answers
     * on (rdma_cm resolves an address to the device that owns it; Netty's default,
     * {@code NetUtil.LOCALHOST}, may be {@code ::1}).
     */
    public static SocketAddress newSocketAddress() {
        return new InetSocketAddress("127.0.0.1", 0);
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        return combo(serverSocket(), clientSocket());
    }

    @Override
    public List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socketWithFastOpen() {
        // TCP fast open has no RDMA counterpart: the same combinations, the option ignored.
        return socket();
    }

    @Override
    public List<BootstrapFactory<ServerBootstrap>> serverSocket() {
        return List.of(new BootstrapFactory<ServerBootstrap>() {
            @Override
            public ServerBootstrap newInstance() {
                return new ServerBootstrap().group(BOSS_GROUP, WORKER_GROUP)
                        .channel(RdmaServerSocketChannel.class);
            }
        });
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocket() {
        return List.of(new BootstrapFactory<Bootstrap>() {
            @Override
            public Bootstrap newInstance() {
                return new Bootstrap().group(WORKER_GROUP).channel(RdmaSocketChannel.class);
            }
        });
    }

    @Override
    public List<BootstrapFactory<Bootstrap>> clientSocketWithFastOpen() {
        return clientSocket();
    }
}
