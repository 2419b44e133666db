package io.github.verbs4j.cm;

import io.github.verbs4j.Context;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.internal.CoreAccess;
import io.github.verbs4j.internal.Errno;
import io.github.verbs4j.internal.Native;
import io.github.verbs4j.internal.NativeLibraries;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.net.Inet4Address;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The librdmacm calls verbs-cm makes, each with {@code errno} captured (the generated
 * {@code RdmaCm} handles cannot capture it), plus {@code poll(2)} and socket-address encoding.
 * None is critical: {@code rdma_get_cm_event} and friends may block or take locks.
 */
final class Cm {

    private Cm() {
    }

    private static final SymbolLookup LIB = NativeLibraries.rdmacm();

    private static MethodHandle h(String name, FunctionDescriptor d) {
        return Native.errnoCapturing(LIB, name, d);
    }

    static final MethodHandle CREATE_EVENT_CHANNEL = h("rdma_create_event_channel", FunctionDescriptor.of(ADDRESS));
    static final MethodHandle DESTROY_EVENT_CHANNEL = h("rdma_destroy_event_channel", FunctionDescriptor.ofVoid(ADDRESS));
    static final MethodHandle CREATE_ID = h("rdma_create_id",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT));
    static final MethodHandle DESTROY_ID = h("rdma_destroy_id", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle BIND_ADDR = h("rdma_bind_addr", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    static final MethodHandle RESOLVE_ADDR = h("rdma_resolve_addr",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS, JAVA_INT));
    static final MethodHandle RESOLVE_ROUTE = h("rdma_resolve_route", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    static final MethodHandle LISTEN = h("rdma_listen", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));
    static final MethodHandle CONNECT = h("rdma_connect", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    static final MethodHandle ACCEPT = h("rdma_accept", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    static final MethodHandle REJECT = h("rdma_reject", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_BYTE));
    static final MethodHandle DISCONNECT = h("rdma_disconnect", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle CREATE_QP = h("rdma_create_qp", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS));
    static final MethodHandle DESTROY_QP = h("rdma_destroy_qp", FunctionDescriptor.ofVoid(ADDRESS));
    static final MethodHandle GET_CM_EVENT = h("rdma_get_cm_event", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    static final MethodHandle ACK_CM_EVENT = h("rdma_ack_cm_event", FunctionDescriptor.of(JAVA_INT, ADDRESS));
    static final MethodHandle MIGRATE_ID = h("rdma_migrate_id", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    static final MethodHandle EVENT_STR = Native.plain(LIB, "rdma_event_str", FunctionDescriptor.of(ADDRESS, JAVA_INT));

    /** {@code int poll(struct pollfd *fds, nfds_t nfds, int timeout)}. */
    static final MethodHandle POLL = Native.errnoCapturing(Linker.nativeLinker().defaultLookup(), "poll",
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));

    private static final short POLLIN = 0x001;
    private static final int AF_INET = 2;
    private static final int AF_INET6 = 10;
    /** {@code sizeof(struct sockaddr_storage)}. */
    static final long SOCKADDR_STORAGE = 128;

    /** Offsets of {@code struct ibv_qp_init_attr} (64 bytes on x86-64, see docs of verbs.h). */
    static final long QP_INIT_ATTR_SIZE = 64;
    static final long QIA_SEND_CQ = 8;
    static final long QIA_RECV_CQ = 16;
    static final long QIA_SRQ = 24;
    static final long QIA_CAP = 32;
    static final long QIA_QP_TYPE = 52;
    static final long QIA_SQ_SIG_ALL = 56;

    private static final ValueLayout.OfShort BE_SHORT = JAVA_SHORT.withOrder(ByteOrder.BIG_ENDIAN).withByteAlignment(1);

    /** One {@link Context} per {@code ibv_context} librdmacm opened, so objects of one device match. */
    private static final Map<Long, Context> CONTEXTS = new ConcurrentHashMap<>();

    static CoreAccess core() {
        return CoreAccess.get();
    }

    static Context context(MemorySegment verbs) {
        if (verbs.equals(MemorySegment.NULL)) {
            return null;
        }
        // a caller may have closed the wrapper (it owns nothing natively): wrap the device again
        return CONTEXTS.compute(verbs.address(), (a, known) -> known == null || known.isClosed()
                ? core().borrowContext(verbs) : known);
    }

    static boolean isNull(MemorySegment s) {
        return s.equals(MemorySegment.NULL);
    }

    /** Throws {@link VerbsException} for a call that returned non-zero. */
    static void check(int rc, MemorySegment errno, String verb, Object subject) {
        if (rc != 0) {
            int e = Native.errno(errno);
            throw new VerbsException(verb, e != 0 ? e : (rc < 0 ? -rc : rc), String.valueOf(subject));
        }
    }

    /** The message of {@code rdma_event_str} for a type number. */
    static String eventString(int type) {
        try {
            MemorySegment s = (MemorySegment) EVENT_STR.invokeExact(type);
            return isNull(s) ? "UNKNOWN" : s.reinterpret(64).getString(0);
        } catch (Throwable t) {
            throw Native.unexpected("rdma_event_str", t);
        }
    }

    /**
     * Waits until {@code fd} is readable; {@code false} on timeout. A negative timeout waits
     * forever. Interrupted system calls are retried with the time left.
     */
    static boolean awaitReadable(int fd, long timeoutMillis) {
        long deadline = System.nanoTime() + Math.max(0, timeoutMillis) * 1_000_000L;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Native.errnoSegment(arena);
            MemorySegment pfd = arena.allocate(8, 4);
            while (true) {
                pfd.set(JAVA_INT, 0, fd);
                pfd.set(JAVA_SHORT, 4, POLLIN);
                pfd.set(JAVA_SHORT, 6, (short) 0);
                int wait = timeoutMillis < 0 ? -1
                        : (int) Math.min(Integer.MAX_VALUE, Math.max(0, (deadline - System.nanoTime() + 999_999) / 1_000_000));
                int n = (int) POLL.invokeExact(errno, pfd, 1L, wait);
                if (n > 0) {
                    return true;
                }
                if (n == 0) {
                    if (timeoutMillis >= 0 && System.nanoTime() - deadline >= 0) {
                        return false;
                    }
                    continue;
                }
                int e = Native.errno(errno);
                if (e != Errno.EINTR) {
                    throw new VerbsException("poll", e, "event channel fd " + fd);
                }
            }
        } catch (Throwable t) {
            throw Native.unexpected("poll", t);
        }
    }

    /** Encodes an IPv4 or IPv6 socket address as {@code struct sockaddr_in}/{@code sockaddr_in6}. */
    static MemorySegment sockaddr(SegmentAllocator allocator, InetSocketAddress address) {
        if (address.isUnresolved()) {
            throw new IllegalArgumentException("unresolved address " + address.getHostString()
                    + ": resolve the host name first (rdma_cm takes IP addresses)");
        }
        MemorySegment sa = allocator.allocate(SOCKADDR_STORAGE, 8);
        InetAddress ip = address.getAddress();
        if (ip instanceof Inet4Address) {
            sa.set(JAVA_SHORT, 0, (short) AF_INET);
            sa.set(BE_SHORT, 2, (short) address.getPort());
            MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, sa, 4, 4);
        } else if (ip instanceof Inet6Address v6) {
            sa.set(JAVA_SHORT, 0, (short) AF_INET6);
            sa.set(BE_SHORT, 2, (short) address.getPort());
            MemorySegment.copy(MemorySegment.ofArray(ip.getAddress()), 0, sa, 8, 16);
            sa.set(JAVA_INT, 24, v6.getScopeId());
        } else {
            throw new IllegalArgumentException("not an IPv4 or IPv6 address: " + address);
        }
        return sa;
    }

    /** Decodes {@code struct sockaddr_in}/{@code sockaddr_in6}; {@code null} for another family. */
    static InetSocketAddress fromSockaddr(MemorySegment sa) {
        int family = sa.get(JAVA_SHORT, 0);
        int port = Short.toUnsignedInt(sa.get(BE_SHORT, 2));
        byte[] ip;
        if (family == AF_INET) {
            ip = new byte[4];
            MemorySegment.copy(sa, 4, MemorySegment.ofArray(ip), 0, 4);
        } else if (family == AF_INET6) {
            ip = new byte[16];
            MemorySegment.copy(sa, 8, MemorySegment.ofArray(ip), 0, 16);
        } else {
            return null;
        }
        try {
            return new InetSocketAddress(InetAddress.getByAddress(ip), port);
        } catch (UnknownHostException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Copies {@code length} bytes of private data at {@code data} (may be NULL). */
    static byte[] copy(MemorySegment data, int length) {
        if (isNull(data) || length == 0) {
            return new byte[0];
        }
        return data.reinterpret(length).toArray(JAVA_BYTE);
    }

    static MemorySegment bytes(SegmentAllocator allocator, byte[] data) {
        if (data == null || data.length == 0) {
            return MemorySegment.NULL;
        }
        return allocator.allocateFrom(JAVA_BYTE, data);
    }

    static long timeoutMillis(java.time.Duration timeout) {
        java.util.Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative()) {
            throw new IllegalArgumentException("negative timeout " + timeout);
        }
        try {
            return timeout.toMillis();
        } catch (ArithmeticException e) {
            return Long.MAX_VALUE / 1_000_000L;
        }
    }
}
