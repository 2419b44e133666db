package io.github.verbs4j.raw;

import io.github.verbs4j.ffi.sockaddr;
import io.github.verbs4j.ffi.sockaddr_in;
import io.github.verbs4j.ffi.sockaddr_in6;
import io.github.verbs4j.ffi.sockaddr_storage;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;

import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * {@link InetSocketAddress} to and from {@code struct sockaddr_in} / {@code sockaddr_in6}, the
 * form rdma_cm takes and reports addresses in. Offsets come from the generated layouts; the
 * port is in network byte order.
 */
public final class SocketAddresses {

    private SocketAddresses() {
    }

    private static final int AF_INET = 2;
    private static final int AF_INET6 = 10;
    private static final ValueLayout.OfShort BE_SHORT = JAVA_SHORT.withOrder(ByteOrder.BIG_ENDIAN).withByteAlignment(1);

    /** {@code sizeof(struct sockaddr_storage)}: room for any address family. */
    public static final long STORAGE_SIZE = sockaddr_storage.layout().byteSize();

    /**
     * Encodes an IPv4 or IPv6 socket address into a {@code sockaddr_storage}-sized segment.
     *
     * @throws IllegalArgumentException for an unresolved address or another address family
     */
    public static MemorySegment encode(SegmentAllocator allocator, InetSocketAddress address) {
        if (address.isUnresolved()) {
            throw new IllegalArgumentException("unresolved address " + address.getHostString()
                    + ": resolve the host name first (rdma_cm takes IP addresses)");
        }
        MemorySegment sa = allocator.allocate(sockaddr_storage.layout());
        InetAddress ip = address.getAddress();
        if (ip instanceof Inet4Address) {
            sockaddr_in.sin_family(sa, (short) AF_INET);
            sa.set(BE_SHORT, sockaddr_in.sin_port$offset(), (short) address.getPort());
            MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, sa, sockaddr_in.sin_addr$offset(), 4);
        } else if (ip instanceof Inet6Address v6) {
            sockaddr_in6.sin6_family(sa, (short) AF_INET6);
            sa.set(BE_SHORT, sockaddr_in6.sin6_port$offset(), (short) address.getPort());
            MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, sa, sockaddr_in6.sin6_addr$offset(), 16);
            sockaddr_in6.sin6_scope_id(sa, v6.getScopeId());
        } else {
            throw new IllegalArgumentException("not an IPv4 or IPv6 address: " + address);
        }
        return sa;
    }

    /** Decodes a {@code sockaddr_in}/{@code sockaddr_in6}; {@code null} for another family. */
    public static InetSocketAddress decode(MemorySegment sa) {
        int family = sockaddr.sa_family(sa);
        byte[] ip;
        long port;
        if (family == AF_INET) {
            ip = new byte[4];
            MemorySegment.copy(sa, sockaddr_in.sin_addr$offset(), MemorySegment.ofArray(ip), 0, 4);
            port = sockaddr_in.sin_port$offset();
        } else if (family == AF_INET6) {
            ip = new byte[16];
            MemorySegment.copy(sa, sockaddr_in6.sin6_addr$offset(), MemorySegment.ofArray(ip), 0, 16);
            port = sockaddr_in6.sin6_port$offset();
        } else {
            return null;
        }
        try {
            return new InetSocketAddress(InetAddress.getByAddress(ip), Short.toUnsignedInt(sa.get(BE_SHORT, port)));
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }
}
