package io.github.verbs4j.netty;

import io.netty.channel.Channel;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;

/** The peer JVM of {@link DeadPeerTest}: an echo server that prints its port and runs until killed or told "exit". */
public final class EchoServerMain {

    private EchoServerMain() {
    }

    public static void main(String[] args) throws Exception {
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, RdmaIoHandler.newFactory());
        Channel server = RdmaEchoTest.echoServer(group);
        System.out.println("port " + ((InetSocketAddress) server.localAddress()).getPort());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (!"exit".equals(in.readLine())) {
            Thread.onSpinWait();
        }
        server.close().syncUninterruptibly();
        group.shutdownGracefully().syncUninterruptibly();
    }
}
