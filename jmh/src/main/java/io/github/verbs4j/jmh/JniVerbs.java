package io.github.verbs4j.jmh;

import io.github.verbs4j.Verbs;

import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The JNI twin's natives ({@code jmh/src/main/c/jni_twin.c}, built into
 * {@code target/lib/libverbs4j-jni.so}): libibverbs' post and poll verbs as plain JNI static
 * natives taking addresses, the shape a JNI binding such as DiSNI uses. Found through
 * {@value #PROPERTY}, else beside the benchmarks jar; loaded after verbs4j loaded softrdma's
 * {@code libibverbs.so.1}, so the twin drives the same provider.
 */
final class JniVerbs {

    static final String PROPERTY = "verbs4j.jmh.jni";
    static final String FILE = "libverbs4j-jni.so";

    static {
        // bind libibverbs.so.1 (softrdma) first: see Baseline
        Verbs.ensureAvailability();
        Path path = Baseline.locate(PROPERTY, FILE);
        if (!Files.isRegularFile(path)) {
            throw new IllegalStateException("the JNI twin is missing: " + path + " (build it with"
                    + " `./mvnw -pl jmh -am package`, or point -D" + PROPERTY + " at " + FILE + ")");
        }
        System.load(path.toString());
    }

    private JniVerbs() {
    }

    /** {@code ibv_post_send(qp, wr, &bad)}: 0 or the provider's errno. */
    static native int postSend(long qp, long wr);

    /** {@code ibv_post_recv(qp, wr, &bad)}: 0 or the provider's errno. */
    static native int postRecv(long qp, long wr);

    /** {@code ibv_poll_cq(cq, n, wc)}. */
    static native int pollCq(long cq, int n, long wc);

    /** A JNI call shaped like {@link #postSend} that does nothing: the JNI floor. */
    static native int nop(long qp, long wr);

    /**
     * A direct buffer over {@code capacity} bytes at {@code address} ({@code NewDirectByteBuffer}),
     * in big-endian order as every new buffer: a buffer with no memory session, as a JNI binding
     * makes over memory it did not allocate. The caller keeps the memory alive; null when the JVM
     * does not support direct buffers from JNI.
     */
    static native ByteBuffer wrap(long address, long capacity);
}
