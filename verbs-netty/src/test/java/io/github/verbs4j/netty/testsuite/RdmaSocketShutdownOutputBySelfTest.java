package io.github.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketShutdownOutputBySelfTest;
import org.junit.jupiter.api.Disabled;

import java.net.SocketAddress;
import java.util.List;

/**
 * Netty's {@link SocketShutdownOutputBySelfTest} on this transport: not run, because every test
 * of that class takes a {@code java.net.ServerSocket} (a TCP listener) as the peer of the channel
 * under test, and an RDMA channel connects through rdma_cm to an RDMA listener only. What those
 * tests check first (shutdownOutput seen by the peer as the end of its input, the peer still
 * able to write back) is checked between two RDMA channels by {@link RdmaSocketHalfClosedTest}.
 */
@Disabled("the peer of each test is a java.net.ServerSocket (TCP); an RDMA channel can only connect to an RDMA listener")
public class RdmaSocketShutdownOutputBySelfTest extends SocketShutdownOutputBySelfTest {

    @Override
    protected List<TestsuitePermutation.BootstrapFactory<Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.clientSocket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return RdmaSocketTestPermutation.newSocketAddress();
    }
}
