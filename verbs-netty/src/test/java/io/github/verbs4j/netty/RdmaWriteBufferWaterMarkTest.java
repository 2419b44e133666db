package io.github.verbs4j.netty;

import io.netty.channel.ChannelOption;
import io.netty.channel.WriteBufferWaterMark;
import org.junit.jupiter.api.Test;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * The write-buffer water marks of {@link RdmaSocketChannelConfig}: by default a ring's worth
 * ({@code RDMA_RING_SLOTS × RDMA_SLOT_SIZE}, low half of it), following the ring options until
 * marks are set; set marks are used as given. With Netty's 64 KiB a writer that writes while the
 * channel is writable put one 64 KiB message into each flush (docs/netty.md, "Benchmarks").
 */
class RdmaWriteBufferWaterMarkTest {

    private static void assertMarks(RdmaSocketChannelConfig config, int low, int high) {
        assertEquals(high, config.getWriteBufferHighWaterMark(), "high");
        assertEquals(low, config.getWriteBufferLowWaterMark(), "low");
        WriteBufferWaterMark mark = config.getWriteBufferWaterMark();
        assertEquals(high, mark.high(), "high of the mark");
        assertEquals(low, mark.low(), "low of the mark");
        WriteBufferWaterMark option = config.getOption(ChannelOption.WRITE_BUFFER_WATER_MARK);
        assertEquals(high, option.high(), "high of the option");
        assertEquals(low, option.low(), "low of the option");
    }

    @Test
    void theDefaultIsTheRingsSizeAndFollowsTheRingOptions() {
        RdmaSocketChannelConfig config = new RdmaSocketChannel().config();
        assertMarks(config, 1 << 20, 2 << 20); // 32 slots of 64 KiB
        config.setOption(RdmaChannelOption.RDMA_RING_SLOTS, 8);
        config.setOption(RdmaChannelOption.RDMA_SLOT_SIZE, 4096);
        assertMarks(config, 16 << 10, 32 << 10);
        config.setOption(RdmaChannelOption.RDMA_RING_SLOTS, 65535);
        config.setOption(RdmaChannelOption.RDMA_SLOT_SIZE, RdmaSocketChannelConfig.MAX_SLOT_SIZE);
        assertMarks(config, Integer.MAX_VALUE / 2, Integer.MAX_VALUE); // 1 TiB does not fit an int
    }

    @Test
    void marksSetAreUsedAsGivenAndNoLongerFollowTheRing() {
        RdmaSocketChannelConfig config = new RdmaSocketChannel().config();
        config.setOption(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(1000, 2000));
        assertMarks(config, 1000, 2000);
        config.setOption(RdmaChannelOption.RDMA_RING_SLOTS, 8);
        assertMarks(config, 1000, 2000);
    }

    @Test
    void oneMarkSetAloneKeepsTheOtherInEffect() {
        // a low mark above Netty's 64 KiB high one: checked against the ring's 2 MiB, which stays
        RdmaSocketChannelConfig config = new RdmaSocketChannel().config();
        config.setWriteBufferLowWaterMark(1536 << 10);
        assertMarks(config, 1536 << 10, 2 << 20);
        RdmaSocketChannelConfig other = new RdmaSocketChannel().config();
        other.setWriteBufferHighWaterMark(4 << 20);
        assertMarks(other, 1 << 20, 4 << 20);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> other.setWriteBufferHighWaterMark(1000));
        assertEquals(4 << 20, other.getWriteBufferHighWaterMark(), "a refused mark changes nothing: " + e.getMessage());
    }
}
