package io.github.verbs4j.netty.testsuite;

import io.netty.bootstrap.Bootstrap;
import org.junit.jupiter.api.Tag;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation;
import io.netty.testsuite.transport.socket.SocketConnectTest;

import java.net.SocketAddress;
import java.util.List;

/** Netty's {@link SocketConnectTest} on this transport. */
// Known failing on the transport (docs/netty.md): testWriteWithFastOpenBeforeConnect*: a write before connect, then connect, is REJECTED or times out.
// Run with -Dverbs4j.netty.excludedGroups=none to see it.
@Tag("transport-gap")
public class RdmaSocketConnectTest extends SocketConnectTest {

    @Override
    protected List<TestsuitePermutation.BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return RdmaSocketTestPermutation.newSocketAddress();
    }
}
