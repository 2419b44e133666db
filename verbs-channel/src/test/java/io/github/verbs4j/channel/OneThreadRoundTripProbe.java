package io.github.verbs4j.channel;

import io.github.verbs4j.test.SoftRdmaTest;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;

import static io.github.verbs4j.channel.ChannelTest.T;
import static io.github.verbs4j.channel.ChannelTest.pair;

/**
 * A probe, not a test (its name keeps it out of the suite; it asserts nothing): one thread drives
 * both ends of a pair with application polling, so a 64-byte round trip's whole work (both sides'
 * channel code and softrdma's, copies included) runs on that thread, and its CPU time per round
 * trip (from /proc/thread-self/schedstat) counts the work without the scheduling that times the
 * two-process benchmark on a shared machine. Configurations NOTIFY:SLOTSIZE:copy|inplace, each
 * run after as many untimed round trips (docs/measurements/channel.md, "The 64 B round trip's work, counted and on one
 * thread"):
 * <pre>
 * ./mvnw -B -o -pl verbs-channel -am test -Dsurefire.failIfNoSpecifiedTests=false -Dtest=OneThreadRoundTripProbe \
 *     -Dprobe.rounds=100000 -Dprobe.reps=2 [-Dprobe.configs=AUTO:1024:copy,AUTO:128:copy,...]
 * </pre>
 */
@SoftRdmaTest
class OneThreadRoundTripProbe {
    static long cpu() throws java.io.IOException {
        return Long.parseLong(Files.readString(Path.of("/proc/thread-self/schedstat")).split(" ")[0]);
    }

    @Test
    void probe() throws Exception {
        int rounds = Integer.getInteger("probe.rounds", 200_000);
        String[] configs = System.getProperty("probe.configs", "AUTO:1024:copy,AUTO:128:copy,AUTO:1024:inplace,SEND:1024:copy,SEND:128:copy").split(",");
        for (int rep = 0; rep < Integer.getInteger("probe.reps", 3); rep++) {
            for (String c : configs) {
                String[] f = c.split(":");
                ChannelOptions o = ChannelOptions.defaults().withApplicationPolling(true)
                        .withNotification(ChannelOptions.Notification.valueOf(f[0])).withSlots(256).withSlotSize(Integer.parseInt(f[1]));
                boolean inPlace = f[2].equals("inplace");
                try (ChannelTest.Pair p = pair(o); Arena a = Arena.ofConfined()) {
                    MemorySegment ping = a.allocate(64);
                    long[] seq = {0};
                    MessageWriter w = m -> m.setLong(0, seq[0]);
                    MessageWriter echo = null;
                    long cpu0 = 0, t0 = 0;
                    for (int i = 0; i < 2 * rounds; i++) {
                        if (i == rounds) {
                            cpu0 = cpu();
                            t0 = System.nanoTime();
                        }
                        if (inPlace) {
                            seq[0] = i;
                            p.client().send(64, w);
                        } else {
                            ping.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, i);
                            p.client().send(ping);
                        }
                        try (Message m = p.accepted().receive(T)) {
                            p.accepted().send(m.segment());
                        }
                        try (Message m = p.client().receive(T)) {
                            if (m.getLong(0) != i) throw new IllegalStateException("pong " + i);
                        }
                    }
                    long cpu = cpu() - cpu0, wall = System.nanoTime() - t0;
                    System.out.printf("PROBE rep %d %-20s cpu %.0f ns/rt wall %.0f ns/rt%n", rep, c, cpu / (double) rounds, wall / (double) rounds);
                }
            }
        }
    }
}
