package io.github.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketConnectionAttemptTest;
import org.junit.jupiter.api.Timeout;

import java.net.SocketAddress;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Netty's {@link SocketConnectionAttemptTest} on this transport. Its connects to
 * {@code 198.51.100.254} stay pending, as with the kernel's rdma_cm, since softrdma sends no REQ
 * to another host where none of its devices answers (docs/softrdma-cm.md): the connect timeout
 * and the cancellation of a pending connect are what they test. A test of it that
 * hangs on a transport under development (in its own thread, so an uninterruptible wait cannot
 * hold the build) fails after a minute instead of stopping the suite.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
public class RdmaSocketConnectionAttemptTest extends SocketConnectionAttemptTest {

    @Override
    protected List<TestsuitePermutation.BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return RdmaSocketTestPermutation.newSocketAddress();
    }
}
