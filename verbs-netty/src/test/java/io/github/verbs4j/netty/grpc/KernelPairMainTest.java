package io.github.verbs4j.netty.grpc;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.embedded.EmbeddedChannel;
import org.junit.jupiter.api.Test;

import java.util.concurrent.ExecutionException;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The echo check of {@link KernelPairMain} (run between two VMs by scripts/rxe-vm.d/netty-check)
 * passes an exact echo and fails a wrong or long one, naming what differed.
 */
class KernelPairMainTest {

    private static ByteBuf message(int index, int from, int to) {
        ByteBuf buf = Unpooled.buffer(to - from);
        for (int i = from; i < to; i++) {
            buf.writeByte(KernelPairMain.expected(index, i));
        }
        return buf;
    }

    @Test
    void anExactEchoInPiecesCompletesTheMessage() {
        KernelPairMain.EchoChecker checker = new KernelPairMain.EchoChecker();
        EmbeddedChannel channel = new EmbeddedChannel(checker);
        checker.expect(3, 5000);
        channel.writeInbound(message(3, 0, 1024));
        assertThat(checker.current).isNotDone();
        channel.writeInbound(message(3, 1024, 5000));
        assertThat(checker.current).isCompleted();
        channel.finishAndReleaseAll();
    }

    @Test
    void oneWrongByteFailsNamingItsOffset() {
        KernelPairMain.EchoChecker checker = new KernelPairMain.EchoChecker();
        EmbeddedChannel channel = new EmbeddedChannel(checker);
        checker.expect(7, 2000);
        ByteBuf echo = message(7, 0, 2000);
        echo.setByte(1500, echo.getByte(1500) ^ 1);
        channel.writeInbound(echo);
        assertThatThrownBy(() -> checker.current.get())
                .isInstanceOf(ExecutionException.class)
                .hasMessageContaining("message 7 of 2000 bytes: byte 1500 came back as");
        assertThat(echo.refCnt()).isZero();
        channel.finishAndReleaseAll();
    }

    @Test
    void anotherMessagesBytesFail() {
        KernelPairMain.EchoChecker checker = new KernelPairMain.EchoChecker();
        EmbeddedChannel channel = new EmbeddedChannel(checker);
        checker.expect(1, 100);
        channel.writeInbound(message(0, 0, 100));
        assertThatThrownBy(() -> checker.current.get()).hasMessageContaining("message 1 of 100 bytes: byte 0");
        channel.finishAndReleaseAll();
    }

    @Test
    void moreBytesThanSentFail() {
        KernelPairMain.EchoChecker checker = new KernelPairMain.EchoChecker();
        EmbeddedChannel channel = new EmbeddedChannel(checker);
        checker.expect(2, 100);
        channel.writeInbound(message(2, 0, 101));
        assertThatThrownBy(() -> checker.current.get()).hasMessageContaining("101 came back");
        channel.finishAndReleaseAll();
    }
}
