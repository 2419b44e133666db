package io.github.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import org.junit.jupiter.api.Tag;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketFileRegionTest;
import org.junit.jupiter.api.Timeout;

import java.net.SocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Netty's {@link SocketFileRegionTest} on this transport. A test of it that
 * hangs on a transport under development (in its own thread, so an uninterruptible wait cannot
 * hold the build) fails after a minute instead of stopping the suite.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
// Known failing on the transport (docs/netty.md): FileRegion writes are not supported yet.
// Run with -Dverbs4j.netty.excludedGroups=none to see it.
@Tag("transport-gap")
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
