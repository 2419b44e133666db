package io.github.verbs4j.cm;

import io.github.verbs4j.Context;
import io.github.verbs4j.VerbsException;
import io.github.verbs4j.internal.CoreAccess;
import io.github.verbs4j.raw.Downcalls;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * What verbs-cm's owners share beyond the raw calls ({@code io.github.verbs4j.raw.CmFunctions}):
 * one verbs-core {@link Context} per device librdmacm opened, error checks and private data
 * (timeouts: {@code io.github.verbs4j.internal.Timeouts}).
 */
final class Cm {

    private Cm() {
    }

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
        return Downcalls.isNull(s);
    }

    /** Throws {@link VerbsException} for a call that returned non-zero. */
    static void check(int rc, MemorySegment errno, String verb, Object subject) {
        if (rc != 0) {
            int e = Downcalls.errno(errno);
            throw new VerbsException(verb, e != 0 ? e : (rc < 0 ? -rc : rc), String.valueOf(subject));
        }
    }

    /** Copies {@code length} bytes of private data at {@code data} (may be NULL). */
    static MemorySegment bytes(SegmentAllocator allocator, byte[] data) {
        if (data == null || data.length == 0) {
            return MemorySegment.NULL;
        }
        return allocator.allocateFrom(JAVA_BYTE, data);
    }
}
