package io.github.verbs4j.transfer.collective;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The ring's reduction step: {@code out[i] = incoming[i] op own[i]}. In place ({@code out} and
 * {@code own} the same slice of the ring's buffer) for data already there; from the caller's own
 * segment into the buffer for the copying collectives, which so read a chunk they reduce straight
 * from the caller's memory instead of copying it into the buffer first. Incoming comes first, so a
 * float sum of chunk {@code c} adds the ranks in ring order, the same on every rank. One plain loop
 * per type and operation, over slices of the exact length, so the JIT sees a counted loop without
 * a type or operation switch inside and can unroll and vectorise it (the Vector API is an
 * incubator module the build does not enable).
 */
final class Reduction {

    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;
    private static final ValueLayout.OfDouble D = ValueLayout.JAVA_DOUBLE;
    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;

    private Reduction() {
    }

    /**
     * {@code out[i] = in[i] op own[i]} for every element of {@code out}; {@code in} and {@code own}
     * at least as long, {@code own} either {@code out} itself or a segment that does not overlap it.
     */
    static void apply(MemorySegment in, MemorySegment own, MemorySegment out, ElementType type, ReduceOp op) {
        long n = out.byteSize() / type.bytes();
        if (n == 0) {
            return;
        }
        switch (type) {
            case FLOAT -> floats(in, own, out, n, op);
            case DOUBLE -> doubles(in, own, out, n, op);
            case INT -> ints(in, own, out, n, op);
            case LONG -> longs(in, own, out, n, op);
        }
    }

    private static void floats(MemorySegment in, MemorySegment own, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, in.getAtIndex(F, i) + own.getAtIndex(F, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, in.getAtIndex(F, i) * own.getAtIndex(F, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, Math.min(in.getAtIndex(F, i), own.getAtIndex(F, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, Math.max(in.getAtIndex(F, i), own.getAtIndex(F, i)));
                }
            }
        }
    }

    private static void doubles(MemorySegment in, MemorySegment own, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, in.getAtIndex(D, i) + own.getAtIndex(D, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, in.getAtIndex(D, i) * own.getAtIndex(D, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, Math.min(in.getAtIndex(D, i), own.getAtIndex(D, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, Math.max(in.getAtIndex(D, i), own.getAtIndex(D, i)));
                }
            }
        }
    }

    private static void ints(MemorySegment in, MemorySegment own, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, in.getAtIndex(I, i) + own.getAtIndex(I, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, in.getAtIndex(I, i) * own.getAtIndex(I, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, Math.min(in.getAtIndex(I, i), own.getAtIndex(I, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, Math.max(in.getAtIndex(I, i), own.getAtIndex(I, i)));
                }
            }
        }
    }

    private static void longs(MemorySegment in, MemorySegment own, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, in.getAtIndex(L, i) + own.getAtIndex(L, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, in.getAtIndex(L, i) * own.getAtIndex(L, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, Math.min(in.getAtIndex(L, i), own.getAtIndex(L, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, Math.max(in.getAtIndex(L, i), own.getAtIndex(L, i)));
                }
            }
        }
    }
}
