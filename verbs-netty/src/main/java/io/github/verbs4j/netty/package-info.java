/**
 * A Netty 4.2 transport on RDMA: {@link io.github.verbs4j.netty.RdmaIoHandler} for
 * {@code MultiThreadIoEventLoopGroup}, and the channels {@link io.github.verbs4j.netty.RdmaSocketChannel}
 * and {@link io.github.verbs4j.netty.RdmaServerSocketChannel}, connected through rdma_cm.
 */
package io.github.verbs4j.netty;
