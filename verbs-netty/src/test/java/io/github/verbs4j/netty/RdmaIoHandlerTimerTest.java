package io.github.verbs4j.netty;

import io.netty.channel.EventLoop;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A loop that blocks with a task scheduled ends its wait by the timer armed for the task's
 * deadline, not by {@code poll(2)}'s timeout in whole milliseconds (which overslept a 20 µs
 * retry by up to a millisecond): counted by the waits the timer ended, no timing asserted.
 */
@Timeout(120)
class RdmaIoHandlerTimerTest {

    @Test
    void aBlockedLoopWakesByTheTimerOfItsNextScheduledTask() throws Exception {
        // no busy polling: the loop blocks as soon as nothing is due
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1,
                RdmaIoHandler.newFactory(RdmaTransportOptions.defaults().withBusyPollNanos(0)));
        try {
            EventLoop loop = group.next();
            loop.submit(() -> { }).get(10, TimeUnit.SECONDS); // started
            long waits = RdmaIoHandler.blockingWaits();
            long expiries = RdmaIoHandler.timerExpiries();
            // 2 ms ahead: a loop that reaches its wait before the task is due (on a loaded host
            // not every time) arms the timer for it; poll(2)'s timeout, whole milliseconds from
            // a later start, cannot end that wait before the timer has expired
            for (int i = 0; i < 20; i++) {
                loop.schedule(() -> { }, 2, TimeUnit.MILLISECONDS).get(10, TimeUnit.SECONDS);
            }
            assertTrue(RdmaIoHandler.blockingWaits() > waits, "the loop blocked while its tasks were not due");
            assertTrue(RdmaIoHandler.timerExpiries() > expiries, "the timer ended none of the waits for a scheduled task");
        } finally {
            group.shutdownGracefully(0, 2, TimeUnit.SECONDS).syncUninterruptibly();
        }
    }
}
