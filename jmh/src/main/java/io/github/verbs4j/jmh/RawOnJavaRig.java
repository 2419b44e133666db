package io.github.verbs4j.jmh;

import io.github.verbs4j.raw.WorkCompletionLayout;
import io.github.verbs4j.raw.WorkRequestLayout;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.reflect.Field;

/**
 * {@link RawRig}'s downcalls on a {@link JavaRig}'s own provider objects: the same QPs, CQs,
 * requests and completion batches verbs4j posts and polls, reached by reflection once, then
 * driven with nothing of verbs4j in between (every pointer a {@code long}, the provider's
 * {@code ops} functions verbs4j read at creation). {@link RawRig} drives a C rig of its own, whose
 * provider objects land elsewhere in the process: in some JVM runs one rig's set is 6 to 14 ns per
 * work request slower than another's (docs/measurements/performance.md, "A second mode"), so verbs4j minus
 * {@link RawRig} in one run compares two placements; verbs4j minus this compares one.
 *
 * <p>For {@link VerbRowsProbe} only: it shares the verbs4j rig's queues, so the two must not run
 * at once (the probe runs one batch at a time, each consuming every completion it causes).
 */
final class RawOnJavaRig {

    private static final MethodHandle POST = Linker.nativeLinker().downcallHandle(FunctionDescriptor.of(
            ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG),
            Linker.Option.critical(false));
    private static final MethodHandle POLL_CQ = Linker.nativeLinker().downcallHandle(FunctionDescriptor.of(
            ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT, ValueLayout.JAVA_LONG),
            Linker.Option.critical(false));

    private final MemorySegment postSendFn;
    private final MemorySegment postRecvFn;
    private final MemorySegment pollCqFn;
    // package-private: JniOnJavaRig drives the same objects through the JNI twin
    final long qpA;
    final long qpB;
    final long cqA;
    final long cqB;
    final Request write;
    final Request read;
    final Request send;
    final Request recv;
    final Request chainHead;
    final Request chainTail;
    final MemorySegment wcA;
    final MemorySegment wcB;
    final MemorySegment wc16;
    private final long wcAAddress;
    private final long wcBAddress;
    private final long wc16Address;
    private long id;

    /** A request's native memory: the {@code ibv_send_wr}/{@code ibv_recv_wr}, its address and the bad-WR slot's. */
    record Request(MemorySegment wr, long wrAddress, long badWrAddress) {
        static Request of(Object request) throws ReflectiveOperationException {
            return new Request((MemorySegment) field(request, "wr"), (long) field(request, "wrAddress"),
                    (long) field(request, "badWrAddress"));
        }
    }

    /** Reaches {@code v}'s objects; {@code v} must be set up. */
    RawOnJavaRig(JavaRig v) throws ReflectiveOperationException {
        Object a = field(v, "a");
        Object b = field(v, "b");
        postSendFn = (MemorySegment) field(a, "postSendFn");
        postRecvFn = (MemorySegment) field(b, "postRecvFn");
        qpA = address(field(a, "handle"));
        qpB = address(field(b, "handle"));
        Object cqAObject = field(v, "cqA");
        pollCqFn = (MemorySegment) field(cqAObject, "pollFn");
        cqA = address(field(cqAObject, "handle"));
        cqB = address(field(field(v, "cqB"), "handle"));
        write = Request.of(field(v, "write"));
        read = Request.of(field(v, "read"));
        send = Request.of(field(v, "send"));
        recv = Request.of(field(v, "recv"));
        chainHead = Request.of(field(v, "chainHead"));
        chainTail = Request.of(field(v, "chainTail"));
        wcA = (MemorySegment) field(field(v, "oneA"), "array");
        wcB = (MemorySegment) field(field(v, "oneB"), "array");
        wcAAddress = wcA.address();
        wcBAddress = wcB.address();
        wc16 = (MemorySegment) field(field(v, "batch16"), "array");
        wc16Address = wc16.address();
    }

    private static Object field(Object o, String name) throws ReflectiveOperationException {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException next) {
                // look in the superclass
            }
        }
        throw new NoSuchFieldException(o.getClass().getName() + "." + name);
    }

    private static long address(Object nativeHandle) throws ReflectiveOperationException {
        return (long) nativeHandle.getClass().getMethod("address").invoke(nativeHandle);
    }

    private void post(MemorySegment fn, long qp, Request r) throws Throwable {
        int rc = (int) POST.invokeExact(fn, qp, r.wrAddress, r.badWrAddress);
        if (rc != 0) {
            throw new IllegalStateException("ops.post_send/post_recv returned " + rc);
        }
    }

    /** As {@link RawRig}'s: spins until one completion arrives; returns wr_id + byte_len. */
    private static long awaitOne(MemorySegment pollFn, long cq, MemorySegment wc, long wcAddress) throws Throwable {
        int n;
        while ((n = (int) POLL_CQ.invokeExact(pollFn, cq, 1, wcAddress)) == 0) {
            // spin as the C loop does
        }
        if (n < 0) {
            throw new IllegalStateException("ops.poll_cq returned " + n);
        }
        int status = wc.get(ValueLayout.JAVA_INT, WorkCompletionLayout.WC_STATUS);
        if (status != 0) {
            throw new IllegalStateException("completion status " + status);
        }
        return wc.get(ValueLayout.JAVA_LONG, WorkCompletionLayout.WC_WR_ID)
                + wc.get(ValueLayout.JAVA_INT, WorkCompletionLayout.WC_BYTE_LEN);
    }

    long sendRecv() throws Throwable {
        long i = id++;
        recv.wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.RECV_WR_ID, i);
        post(postRecvFn, qpB, recv);
        send.wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_WR_ID, i);
        post(postSendFn, qpA, send);
        return awaitOne(pollCqFn, cqA, wcA, wcAAddress) + awaitOne(pollCqFn, cqB, wcB, wcBAddress);
    }

    long write() throws Throwable {
        write.wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_WR_ID, id++);
        post(postSendFn, qpA, write);
        return awaitOne(pollCqFn, cqA, wcA, wcAAddress);
    }

    long read() throws Throwable {
        read.wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_WR_ID, id++);
        post(postSendFn, qpA, read);
        return awaitOne(pollCqFn, cqA, wcA, wcAAddress);
    }

    long chain16Write() throws Throwable {
        chainTail.wr.set(ValueLayout.JAVA_LONG, WorkRequestLayout.SEND_WR_ID, id++);
        post(postSendFn, qpA, chainHead);
        return awaitOne(pollCqFn, cqA, wcA, wcAAddress);
    }

    int pollEmpty() throws Throwable {
        return (int) POLL_CQ.invokeExact(pollCqFn, cqA, 16, wc16Address);
    }
}
