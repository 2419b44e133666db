package io.github.verbs4j.netty;

import io.netty.channel.Channel;
import io.netty.channel.ChannelOption;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.socket.SocketChannelConfig;

import java.util.Map;

/**
 * The configuration of an {@link RdmaSocketChannel}: Netty's usual options, half-closure, and the
 * RDMA ring options of {@link RdmaChannelOption}, which take effect when the connection is set up.
 * Socket options that mean nothing on RDMA ({@code SO_SNDBUF}, {@code TCP_NODELAY}...) are unknown
 * here: {@link #setOption} returns {@code false} and the bootstrap logs a warning, as for any
 * option a Netty transport does not know. The typed accessors of {@link SocketChannelConfig}
 * ({@link #setTcpNoDelay}, {@link #setSoLinger}...) exist so that code written against Netty's
 * {@code SocketChannel} runs unchanged: they keep the value given and report it back, and it has
 * no effect on the RDMA connection (there is no TCP socket under it).
 *
 * <p>The write-buffer water marks default to the ring's size rather than Netty's 32/64 KiB: high
 * = {@code RDMA_RING_SLOTS × RDMA_SLOT_SIZE} (2 MiB by default; the peer's ring, which its
 * credits cover, has the same shape unless the two sides were configured apart), low = half of
 * it. There is no kernel send buffer under an RDMA channel as under a TCP socket, so with
 * Netty's 64 KiB a writer that writes while the channel is writable and then flushes (Netty's
 * usual pattern) put one 64 KiB message into each flush, each its own post, signaled completion
 * and loop cycle; with a ring's worth it fills up to what the peer can take at once, posted as
 * one chain (docs/netty.md, "Benchmarks"). Marks set explicitly
 * ({@code WRITE_BUFFER_WATER_MARK}, or the high or low one alone) are used as given.
 *
 * <p>The allocator defaults to {@link RdmaByteBufAllocator#DEFAULT}, whose direct buffers the
 * channel sends from without a copy; {@code ChannelOption.ALLOCATOR} sets another (Netty's
 * {@code ByteBufAllocator.DEFAULT}, say), whose buffers are then copied into the send ring.
 */
public final class RdmaSocketChannelConfig extends DefaultChannelConfig implements SocketChannelConfig {

    static final int MIN_SLOT_SIZE = 256;
    static final int MAX_SLOT_SIZE = 16 << 20;

    private volatile boolean allowHalfClosure;
    private volatile int ringSlots = 32;
    private volatile int slotSize = 64 * 1024;
    private volatile int sendDepth = 64;
    private volatile int inlineSize = 64;
    private volatile boolean zeroCopyRead;
    private volatile RdmaWireMode wireMode = RdmaWireMode.AUTO;
    /** Whether the water marks were set: until then they follow the ring options ({@link #ringHighWaterMark()}). */
    private volatile boolean waterMarkSet;

    // SocketChannelConfig's TCP settings: kept and reported back, without effect on RDMA
    private volatile boolean tcpNoDelay = true;
    private volatile int soLinger = -1;
    private volatile int sendBufferSize;
    private volatile int receiveBufferSize;
    private volatile boolean keepAlive;
    private volatile int trafficClass;
    private volatile boolean reuseAddress;

    RdmaSocketChannelConfig(Channel channel) {
        super(channel);
        // writes from it go in place, reads are copied into it; ChannelOption.ALLOCATOR replaces it
        setAllocator(RdmaByteBufAllocator.DEFAULT);
    }

    @Override
    public Map<ChannelOption<?>, Object> getOptions() {
        return getOptions(super.getOptions(), ChannelOption.ALLOW_HALF_CLOSURE, RdmaChannelOption.RDMA_RING_SLOTS,
                RdmaChannelOption.RDMA_SLOT_SIZE, RdmaChannelOption.RDMA_SEND_DEPTH, RdmaChannelOption.RDMA_INLINE_SIZE,
                RdmaChannelOption.RDMA_ZERO_COPY_READ, RdmaChannelOption.RDMA_WIRE_MODE);
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
        if (option == RdmaChannelOption.RDMA_ZERO_COPY_READ) {
            return (T) Boolean.valueOf(zeroCopyRead);
        }
        if (option == RdmaChannelOption.RDMA_WIRE_MODE) {
            return (T) wireMode;
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
        } else if (option == RdmaChannelOption.RDMA_ZERO_COPY_READ) {
            zeroCopyRead = (Boolean) value;
        } else if (option == RdmaChannelOption.RDMA_WIRE_MODE) {
            if (value == null) {
                throw new NullPointerException("RDMA_WIRE_MODE");
            }
            wireMode = (RdmaWireMode) value;
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

    @Override
    protected void autoReadCleared() {
        // as Netty's own transports: turning autoRead off cancels a read requested and not yet done
        ((RdmaSocketChannel) channel).clearReadPending();
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

    boolean zeroCopyRead() {
        return zeroCopyRead;
    }

    RdmaWireMode wireMode() {
        return wireMode;
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

    /** The default high water mark: a ring's worth of slots (at most {@code Integer.MAX_VALUE}); the low one is half of it. */
    private int ringHighWaterMark() {
        // read on every write and every completed one (by ChannelOutboundBuffer): no object made here
        return (int) Math.min(Integer.MAX_VALUE, (long) ringSlots * slotSize);
    }

    /** The default water marks, as an object: for the rare caller that asks for them so. */
    private WriteBufferWaterMark ringWaterMark() {
        int high = ringHighWaterMark();
        return new WriteBufferWaterMark(high / 2, high);
    }

    /**
     * Before the first explicit mark, the ring's marks become the stored ones, so that setting
     * the high or low mark alone is checked against (and keeps) the other mark in effect.
     */
    private synchronized void materializeWaterMark() {
        if (!waterMarkSet) {
            super.setWriteBufferWaterMark(ringWaterMark());
        }
    }

    @Override
    public int getWriteBufferHighWaterMark() {
        return waterMarkSet ? super.getWriteBufferHighWaterMark() : ringHighWaterMark();
    }

    @Override
    public int getWriteBufferLowWaterMark() {
        return waterMarkSet ? super.getWriteBufferLowWaterMark() : ringHighWaterMark() / 2;
    }

    @Override
    public WriteBufferWaterMark getWriteBufferWaterMark() {
        return waterMarkSet ? super.getWriteBufferWaterMark() : ringWaterMark();
    }

    @Override
    public synchronized RdmaSocketChannelConfig setWriteBufferHighWaterMark(int writeBufferHighWaterMark) {
        materializeWaterMark();
        super.setWriteBufferHighWaterMark(writeBufferHighWaterMark);
        waterMarkSet = true;
        return this;
    }

    @Override
    public synchronized RdmaSocketChannelConfig setWriteBufferLowWaterMark(int writeBufferLowWaterMark) {
        materializeWaterMark();
        super.setWriteBufferLowWaterMark(writeBufferLowWaterMark);
        waterMarkSet = true;
        return this;
    }

    @Override
    public synchronized RdmaSocketChannelConfig setWriteBufferWaterMark(WriteBufferWaterMark writeBufferWaterMark) {
        super.setWriteBufferWaterMark(writeBufferWaterMark);
        waterMarkSet = true;
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

    @Override
    public boolean isTcpNoDelay() {
        return tcpNoDelay;
    }

    @Override
    public RdmaSocketChannelConfig setTcpNoDelay(boolean tcpNoDelay) {
        this.tcpNoDelay = tcpNoDelay;
        return this;
    }

    @Override
    public int getSoLinger() {
        return soLinger;
    }

    @Override
    public RdmaSocketChannelConfig setSoLinger(int soLinger) {
        this.soLinger = soLinger;
        return this;
    }

    @Override
    public int getSendBufferSize() {
        return sendBufferSize;
    }

    @Override
    public RdmaSocketChannelConfig setSendBufferSize(int sendBufferSize) {
        this.sendBufferSize = sendBufferSize;
        return this;
    }

    @Override
    public int getReceiveBufferSize() {
        return receiveBufferSize;
    }

    @Override
    public RdmaSocketChannelConfig setReceiveBufferSize(int receiveBufferSize) {
        this.receiveBufferSize = receiveBufferSize;
        return this;
    }

    @Override
    public boolean isKeepAlive() {
        return keepAlive;
    }

    @Override
    public RdmaSocketChannelConfig setKeepAlive(boolean keepAlive) {
        this.keepAlive = keepAlive;
        return this;
    }

    @Override
    public int getTrafficClass() {
        return trafficClass;
    }

    @Override
    public RdmaSocketChannelConfig setTrafficClass(int trafficClass) {
        this.trafficClass = trafficClass;
        return this;
    }

    @Override
    public boolean isReuseAddress() {
        return reuseAddress;
    }

    @Override
    public RdmaSocketChannelConfig setReuseAddress(boolean reuseAddress) {
        this.reuseAddress = reuseAddress;
        return this;
    }

    @Override
    public RdmaSocketChannelConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
        return this;
    }
}
