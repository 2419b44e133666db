package io.github.verbs4j.netty;

import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.socket.DuplexChannelConfig;

import java.util.Map;

/**
 * The configuration of an {@link RdmaSocketChannel}: Netty's usual options, half-closure, and the
 * RDMA ring options of {@link RdmaChannelOption}, which take effect when the connection is set up.
 * Socket options that mean nothing on RDMA ({@code SO_SNDBUF}, {@code TCP_NODELAY}...) are unknown
 * here: {@link #setOption} returns {@code false} and the bootstrap logs a warning, as for any
 * option a Netty transport does not know.
 */
public final class RdmaSocketChannelConfig extends DefaultChannelConfig implements DuplexChannelConfig {

    static final int MIN_SLOT_SIZE = 256;
    static final int MAX_SLOT_SIZE = 16 << 20;

    private volatile boolean allowHalfClosure;
    private volatile int ringSlots = 32;
    private volatile int slotSize = 64 * 1024;
    private volatile int sendDepth = 64;
    private volatile int inlineSize = 64;

    RdmaSocketChannelConfig(Channel channel) {
        super(channel);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), ChannelOption.ALLOW_HALF_CLOSURE, RdmaChannelOption.RDMA_RING_SLOTS,
                RdmaChannelOption.RDMA_SLOT_SIZE, RdmaChannelOption.RDMA_SEND_DEPTH, RdmaChannelOption.RDMA_INLINE_SIZE);
    }

    @Override
    @SuppressWarnings("unchecked")
    public <T> T getOption(ChannelOption<T> option) {
        if (option == ChannelOption.ALLOW_HALF_CLOSURE) {
            return (T) Boolean.valueOf(allowHalfClosure);
        }
        if (option == RdmaChannelOption.RDMA_RING_SLOTS) {
            return (T) Integer.valueOf(ringSlots);
        }
        if (option == RdmaChannelOption.RDMA_SLOT_SIZE) {
            return (T) Integer.valueOf(slotSize);
        }
        if (option == RdmaChannelOption.RDMA_SEND_DEPTH) {
            return (T) Integer.valueOf(sendDepth);
        }
        if (option == RdmaChannelOption.RDMA_INLINE_SIZE) {
            return (T) Integer.valueOf(inlineSize);
        }
        return super.getOption(option);
    }

    @Override
    public <T> boolean setOption(ChannelOption<T> option, T value) {
        validate(option, value);
        if (option == ChannelOption.ALLOW_HALF_CLOSURE) {
            setAllowHalfClosure((Boolean) value);
        } else if (option == RdmaChannelOption.RDMA_RING_SLOTS) {
            ringSlots = range("RDMA_RING_SLOTS", (Integer) value, 4, 65535);
        } else if (option == RdmaChannelOption.RDMA_SLOT_SIZE) {
            slotSize = range("RDMA_SLOT_SIZE", (Integer) value, MIN_SLOT_SIZE, MAX_SLOT_SIZE);
        } else if (option == RdmaChannelOption.RDMA_SEND_DEPTH) {
            sendDepth = range("RDMA_SEND_DEPTH", (Integer) value, 4, 65535);
        } else if (option == RdmaChannelOption.RDMA_INLINE_SIZE) {
            inlineSize = range("RDMA_INLINE_SIZE", (Integer) value, 0, 4096);
        } else if (option == RdmaChannelOption.RDMA_NOTIFICATION_MODE) {
            // a property of the event loop (RdmaTransportOptions), not of one channel
            return false;
        } else {
            return super.setOption(option, value);
        }
        return true;
    }

    private static int range(String name, int value, int min, int max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException(name + " must be within " + min + ".." + max + ", got " + value);
        }
        return value;
    }

    @Override
    public boolean isAllowHalfClosure() {
        return allowHalfClosure;
    }

    @Override
    public RdmaSocketChannelConfig setAllowHalfClosure(boolean allowHalfClosure) {
        this.allowHalfClosure = allowHalfClosure;
        return this;
    }

    int ringSlots() {
        return ringSlots;
    }

    int slotSize() {
        return slotSize;
    }

    int sendDepth() {
        return sendDepth;
    }

    int inlineSize() {
        return inlineSize;
    }

    @Override
    @Deprecated
    public RdmaSocketChannelConfig setMaxMessagesPerRead(int maxMessagesPerRead) {
        super.setMaxMessagesPerRead(maxMessagesPerRead);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteSpinCount(int writeSpinCount) {
        super.setWriteSpinCount(writeSpinCount);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAllocator(io.netty.buffer.ByteBufAllocator allocator) {
        super.setAllocator(allocator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setRecvByteBufAllocator(io.netty.channel.RecvByteBufAllocator allocator) {
        super.setRecvByteBufAllocator(allocator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoRead(boolean autoRead) {
        super.setAutoRead(autoRead);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setAutoClose(boolean autoClose) {
        super.setAutoClose(autoClose);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferHighWaterMark(int writeBufferHighWaterMark) {
        super.setWriteBufferHighWaterMark(writeBufferHighWaterMark);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferLowWaterMark(int writeBufferLowWaterMark) {
        super.setWriteBufferLowWaterMark(writeBufferLowWaterMark);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setWriteBufferWaterMark(io.netty.channel.WriteBufferWaterMark writeBufferWaterMark) {
        super.setWriteBufferWaterMark(writeBufferWaterMark);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setMessageSizeEstimator(io.netty.channel.MessageSizeEstimator estimator) {
        super.setMessageSizeEstimator(estimator);
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setConnectTimeoutMillis(int connectTimeoutMillis) {
        super.setConnectTimeoutMillis(connectTimeoutMillis);
        return this;
    }
}
