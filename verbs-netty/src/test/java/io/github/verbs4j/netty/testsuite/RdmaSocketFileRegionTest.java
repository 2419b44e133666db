package io.github.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketFileRegionTest;
import org.junit.jupiter.api.Timeout;

import java.net.SocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Netty's {@link SocketFileRegionTest} on this transport. A test of it that
 * hangs (in its own thread, so an uninterruptible wait cannot hold the build) fails after a
 * minute instead of stopping the suite: five of its tests wait without a bound for the data.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
public class RdmaSocketFileRegionTest extends SocketFileRegionTest {

    @Override
    protected List<TestsuitePermutation.BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return RdmaSocketTestPermutation.newSocketAddress();
    }
}
