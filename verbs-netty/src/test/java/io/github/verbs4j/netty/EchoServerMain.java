package io.github.verbs4j.netty;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/**
 * The peer JVM of {@link DeadPeerTest}: an echo server that prints its port and runs until killed
 * or told "exit". Its one optional argument is the {@link RdmaWireMode} its connections use
 * ({@code AUTO} when absent: the device's).
 */
public final class EchoServerMain {

    private EchoServerMain() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length > 1) {
            throw new IllegalArgumentException("usage: EchoServerMain [AUTO|WRITE_WITH_IMM|SEND], got " + args.length
                    + " arguments");
        }
        RdmaWireMode mode = args.length == 0 ? RdmaWireMode.AUTO : RdmaWireMode.valueOf(args[0]);
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        Channel server = new ServerBootstrap().group(group).channel(RdmaServerSocketChannel.class)
                .childOption(RdmaChannelOption.RDMA_WIRE_MODE, mode)
                .childHandler(new ChannelInitializer<Channel>() {
                    @Override
                    protected void initChannel(Channel ch) {
                        ch.pipeline().addLast(new RdmaEchoTest.Echo());
                    }
                }).bind(RdmaLoops.LOCAL_ANY_PORT).syncUninterruptibly().channel();
        System.out.println("port " + ((InetSocketAddress) server.localAddress()).getPort() + " wire mode " + mode);
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !"exit".equals(line)) {
            // anything else is ignored: the test kills this process, or says exit
        }
        server.close().syncUninterruptibly();
        group.shutdownGracefully().syncUninterruptibly();
    }
}
