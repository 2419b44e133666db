package io.github.verbs4j.channel;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The child JVM of {@link TuningPropertyTest}: two channel groups connected over the first
 * device, one message from the client to the server, then the stand-down park the property gave
 * ({@code standDownNanos=}); exits 0 when all of it worked.
 */
public final class TuningPropertyChild {

    private TuningPropertyChild() {
    }

    public static void main(String[] args) throws Exception {
        try (ChannelTest.Pair pair = ChannelTest.pair(ChannelOptions.defaults())) {
            pair.client().send(MemorySegment.ofArray(new byte[] {1, 2, 3}));
            try (Message m = pair.accepted().receive(ChannelTest.T)) {
                if (m.length() != 3 || m.segment().get(ValueLayout.JAVA_BYTE, 2) != 3) {
                    throw new AssertionError("received " + m.length() + " bytes, not the 3 sent");
                }
            }
        }
        System.out.println("standDownNanos=" + ChannelGroup.STAND_DOWN_NANOS);
    }
}
