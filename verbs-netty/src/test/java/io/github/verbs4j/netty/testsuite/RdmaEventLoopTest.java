package io.github.verbs4j.netty.testsuite;

import io.github.verbs4j.netty.RdmaIoHandler;
import io.github.verbs4j.netty.RdmaServerSocketChannel;
import io.github.verbs4j.netty.RdmaSocketChannel;
import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.testsuite.transport.AbstractSingleThreadEventLoopTest;

import java.util.concurrent.Executor;

/**
 * Netty's {@link AbstractSingleThreadEventLoopTest} on {@link RdmaIoHandler}'s loops: registering
 * channels and deregistering one (the only deregistration in Netty's testsuite; none registers a
 * channel again), shutdown before and after start, scheduled tasks, the auto-scaling group (an
 * idle group scales down to one active loop; a task submitted to the suspended loop resumes it).
 * The registered-channels iterator is left out as for Netty's own I/O-handler loops
 * ({@code supportsChannelIteration} false: its three tests are skipped by their assumption).
 * A resumed loop carrying a connection, and a loop that holds a deregistered connection not
 * suspending: verbs-netty's {@code RdmaAutoScalingTest}.
 */
public class RdmaEventLoopTest extends AbstractSingleThreadEventLoopTest {

    @Override
    protected EventLoopGroup newEventLoopGroup() {
        return new MultiThreadIoEventLoopGroup(RdmaIoHandler.newFactory());
    }

    @Override
    protected EventLoopGroup newAutoScalingEventLoopGroup() {
        return new MultiThreadIoEventLoopGroup(SCALING_MAX_THREADS, (Executor) null, AUTO_SCALING_CHOOSER_FACTORY,
                RdmaIoHandler.newFactory());
    }

    @Override
    protected Channel newChannel() {
        return new RdmaSocketChannel();
    }

    @Override
    protected Class<? extends ServerChannel> serverChannelClass() {
        return RdmaServerSocketChannel.class;
    }
}
