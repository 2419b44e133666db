package io.github.verbs4j.netty;

import io.github.verbs4j.cm.CmEvent;
import io.github.verbs4j.cm.CmEventType;
import io.github.verbs4j.cm.CmId;
import io.github.verbs4j.cm.EventChannel;
import io.github.verbs4j.cm.PortSpace;
import io.netty.channel.AbstractServerChannel;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelPipeline;
import io.netty.channel.ChannelPromise;
import io.netty.channel.DefaultChannelConfig;
import io.netty.channel.EventLoop;
import io.netty.channel.IoEventLoop;
import io.netty.channel.IoRegistration;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.channel.ServerChannel;
import io.netty.channel.socket.ServerSocketChannel;
import io.netty.channel.socket.ServerSocketChannelConfig;
import io.netty.util.internal.logging.InternalLogger;
import io.netty.util.internal.logging.InternalLoggerFactory;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.Map;

/**
 * A Netty server channel that listens on an rdma_cm port of an RDMA device's IP address
 * ({@code serverBootstrap.channel(RdmaServerSocketChannel.class)}) and accepts each connection
 * request as an {@link RdmaSocketChannel}. {@code SO_BACKLOG} is the backlog of {@code rdma_listen}.
 */
public final class RdmaServerSocketChannel extends AbstractServerChannel implements ServerSocketChannel {

    private static final InternalLogger logger = InternalLoggerFactory.getInstance(RdmaServerSocketChannel.class);

    private final ServerConfig config = new ServerConfig(this);
    private final ArrayDeque<CmEvent> requests = new ArrayDeque<>();
    private volatile IoRegistration registration;
    private RdmaIoHandler handler;
    private EventChannel events;
    private CmId listener;
    private volatile InetSocketAddress local;
    private volatile boolean open = true;
    private boolean readPending;

    /** A server channel to bind. */
    public RdmaServerSocketChannel() {
    }

    @Override
    public ServerSocketChannelConfig config() {
        return config;
    }

    @Override
    public boolean isOpen() {
        return open;
    }

    @Override
    public boolean isActive() {
        return open && local != null;
    }

    @Override
    public InetSocketAddress localAddress() {
        return (InetSocketAddress) super.localAddress();
    }

    @Override
    public InetSocketAddress remoteAddress() {
        return null;
    }

    @Override
    protected SocketAddress localAddress0() {
        return local;
    }

    @Override
    protected boolean isCompatible(EventLoop loop) {
        return loop instanceof IoEventLoop l && l.isCompatible(ServerUnsafe.class);
    }

    @Override
    protected AbstractUnsafe newUnsafe() {
        return new ServerUnsafe();
    }

    @Override
    protected void doRegister(ChannelPromise promise) {
        ((IoEventLoop) eventLoop()).register((ServerUnsafe) unsafe()).addListener(f -> {
            if (f.isSuccess()) {
                registration = (IoRegistration) f.getNow();
                handler = registration.attachment();
                promise.setSuccess();
            } else {
                promise.setFailure(f.cause());
            }
        });
    }

    @Override
    protected void doDeregister() {
        IoRegistration r = registration;
        if (r != null) {
            registration = null;
            r.cancel();
        }
    }

    @Override
    protected void doBind(SocketAddress localAddress) {
        if (!(localAddress instanceof InetSocketAddress address)) {
            throw new IllegalArgumentException("an RDMA server channel binds to an InetSocketAddress, not " + localAddress);
        }
        EventChannel channel = EventChannel.create();
        CmId id = null;
        try {
            id = channel.createId(PortSpace.TCP);
            id.bind(address);
            id.listen(config.backlog);
            InetSocketAddress bound = id.localAddress();
            events = channel;
            listener = id;
            local = bound == null ? address : bound;
        } catch (RuntimeException e) {
            if (id != null) {
                id.close();
            }
            channel.close();
            throw e;
        }
        handler.pollSetChanged();
    }

    @Override
    protected void doBeginRead() {
        // queued requests are accepted on the loop's next pass, before it may block
        readPending = true;
    }

    @Override
    protected void doClose() {
        if (!open) {
            return;
        }
        open = false;
        CmEvent e;
        while ((e = requests.poll()) != null) {
            reject(e.id());
        }
        if (listener != null) {
            try {
                listener.close();
            } catch (RuntimeException ex) {
                logger.warn("closing the rdma_cm listener of {}", this, ex);
            }
        }
        if (events != null) {
            try {
                events.close();
            } catch (RuntimeException ex) {
                logger.warn("closing the event channel of {}", this, ex);
            }
        }
        listener = null;
        events = null;
        if (handler != null) {
            handler.pollSetChanged();
        }
    }

    private static void reject(CmId id) {
        try {
            id.reject(null);
        } catch (RuntimeException ignored) {
            // the peer went away already
        }
        try {
            id.close();
        } catch (RuntimeException e) {
            logger.debug("closing a rejected connection request", e);
        }
    }

    private void cmReadable() {
        if (events == null) {
            return;
        }
        CmEvent e;
        while ((e = events.next(Duration.ZERO)) != null) {
            if (e.type() == CmEventType.CONNECT_REQUEST && e.listenId() == listener) {
                requests.add(e);
            } else if (e.type() != CmEventType.CONNECT_REQUEST && e.id() != listener) {
                logger.debug("{}: an event of a connection not yet handed over: {}", this, e);
            }
        }
        if (readPending) {
            acceptRequests();
        }
    }

    private int acceptRequests() {
        if (requests.isEmpty() || !readPending) {
            return 0;
        }
        ChannelPipeline pipeline = pipeline();
        RecvByteBufAllocator.Handle allocHandle = unsafe().recvBufAllocHandle();
        allocHandle.reset(config);
        int accepted = 0;
        do {
            CmEvent request = requests.poll();
            EventChannel childEvents = null;
            RdmaSocketChannel child;
            try {
                // each connection reads its CM events from a channel of its own, on its own loop
                childEvents = EventChannel.create();
                request.id().migrate(childEvents);
                child = new RdmaSocketChannel(this, childEvents, request.id(), request.privateData());
            } catch (Throwable t) {
                reject(request.id());
                if (childEvents != null) {
                    childEvents.close();
                }
                pipeline.fireExceptionCaught(t);
                continue;
            }
            readPending = false;
            accepted++;
            allocHandle.incMessagesRead(1);
            pipeline.fireChannelRead(child);
        } while (!requests.isEmpty() && open && allocHandle.continueReading());
        allocHandle.readComplete();
        pipeline.fireChannelReadComplete();
        return accepted;
    }

    private final class ServerUnsafe extends AbstractUnsafe implements RdmaIoHandle {

        @Override
        public void connect(SocketAddress remoteAddress, SocketAddress localAddress, ChannelPromise promise) {
            promise.setFailure(new UnsupportedOperationException("a server channel does not connect"));
        }

        @Override
        public int pollCompletions() {
            return readPending ? acceptRequests() : 0;
        }

        @Override
        public void armCompletions() {
            // a listener has no completion queue
        }

        @Override
        public int cmFd() {
            return events == null ? -1 : events.fd();
        }

        @Override
        public void cmReadable() {
            RdmaServerSocketChannel.this.cmReadable();
        }

        @Override
        public void close() {
            close(voidPromise());
        }
    }

    /**
     * Netty's options, and SO_BACKLOG for rdma_listen. The TCP settings of
     * {@link ServerSocketChannelConfig} (receive buffer size, address reuse) are kept and reported
     * back without effect: an rdma_cm listener has no TCP socket.
     */
    private static final class ServerConfig extends DefaultChannelConfig implements ServerSocketChannelConfig {
        volatile int backlog = 128;
        private volatile boolean reuseAddress;
        private volatile int receiveBufferSize;

        ServerConfig(ServerChannel channel) {
            super(channel);
        }

        @Override
        public Map<ChannelOption<?>, Object> getOptions() {
            return getOptions(super.getOptions(), ChannelOption.SO_BACKLOG);
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T> T getOption(ChannelOption<T> option) {
            if (option == ChannelOption.SO_BACKLOG) {
                return (T) Integer.valueOf(backlog);
            }
            return super.getOption(option);
        }

        @Override
        public <T> boolean setOption(ChannelOption<T> option, T value) {
            validate(option, value);
            if (option == ChannelOption.SO_BACKLOG) {
                setBacklog((Integer) value);
                return true;
            }
            return super.setOption(option, value);
        }

        @Override
        public int getBacklog() {
            return backlog;
        }

        @Override
        public ServerConfig setBacklog(int b) {
            if (b < 0) {
                throw new IllegalArgumentException("SO_BACKLOG must not be negative, got " + b);
            }
            backlog = b;
            return this;
        }

        @Override
        public boolean isReuseAddress() {
            return reuseAddress;
        }

        @Override
        public ServerConfig setReuseAddress(boolean reuseAddress) {
            this.reuseAddress = reuseAddress;
            return this;
        }

        @Override
        public int getReceiveBufferSize() {
            return receiveBufferSize;
        }

        @Override
        public ServerConfig setReceiveBufferSize(int receiveBufferSize) {
            this.receiveBufferSize = receiveBufferSize;
            return this;
        }

        @Override
        public ServerConfig setPerformancePreferences(int connectionTime, int latency, int bandwidth) {
            return this;
        }

        @Override
        public ServerConfig setConnectTimeoutMillis(int connectTimeoutMillis) {
            super.setConnectTimeoutMillis(connectTimeoutMillis);
            return this;
        }

        @Override
        @Deprecated
        public ServerConfig setMaxMessagesPerRead(int maxMessagesPerRead) {
            super.setMaxMessagesPerRead(maxMessagesPerRead);
            return this;
        }

        @Override
        public ServerConfig setWriteSpinCount(int writeSpinCount) {
            super.setWriteSpinCount(writeSpinCount);
            return this;
        }

        @Override
        public ServerConfig setAllocator(io.netty.buffer.ByteBufAllocator allocator) {
            super.setAllocator(allocator);
            return this;
        }

        @Override
        public ServerConfig setRecvByteBufAllocator(RecvByteBufAllocator allocator) {
            super.setRecvByteBufAllocator(allocator);
            return this;
        }

        @Override
        public ServerConfig setAutoRead(boolean autoRead) {
            super.setAutoRead(autoRead);
            return this;
        }

        @Override
        public ServerConfig setMessageSizeEstimator(io.netty.channel.MessageSizeEstimator estimator) {
            super.setMessageSizeEstimator(estimator);
            return this;
        }

        @Override
        public ServerConfig setWriteBufferHighWaterMark(int writeBufferHighWaterMark) {
            super.setWriteBufferHighWaterMark(writeBufferHighWaterMark);
            return this;
        }

        @Override
        public ServerConfig setWriteBufferLowWaterMark(int writeBufferLowWaterMark) {
            super.setWriteBufferLowWaterMark(writeBufferLowWaterMark);
            return this;
        }

        @Override
        public ServerConfig setWriteBufferWaterMark(io.netty.channel.WriteBufferWaterMark writeBufferWaterMark) {
            super.setWriteBufferWaterMark(writeBufferWaterMark);
            return this;
        }
    }
}
