package io.github.verbs4j.transfer.collective;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

/**
 * The ring's reduction step, in place: {@code own[i] = incoming[i] op own[i]} over {@code n}
 * elements of one segment. Incoming comes first, so a float sum of chunk {@code c} adds the ranks
 * in ring order, the same on every rank. One plain loop per type and operation, over slices of the
 * exact length, so the JIT sees a counted loop without a type or operation switch inside and can
 * unroll and vectorise it (the Vector API is an incubator module the build does not enable).
 */
final class Reduction {

    private static final ValueLayout.OfFloat F = ValueLayout.JAVA_FLOAT;
    private static final ValueLayout.OfDouble D = ValueLayout.JAVA_DOUBLE;
    private static final ValueLayout.OfInt I = ValueLayout.JAVA_INT;
    private static final ValueLayout.OfLong L = ValueLayout.JAVA_LONG;

    private Reduction() {
    }

    /** Combines {@code n} elements at byte offset {@code incoming} into those at {@code own}. */
    static void apply(MemorySegment m, long incoming, long own, long n, ElementType type, ReduceOp op) {
        if (n == 0) {
            return;
        }
        long bytes = n * type.bytes();
        MemorySegment in = m.asSlice(incoming, bytes);
        MemorySegment out = m.asSlice(own, bytes);
        switch (type) {
            case FLOAT -> floats(in, out, n, op);
            case DOUBLE -> doubles(in, out, n, op);
            case INT -> ints(in, out, n, op);
            case LONG -> longs(in, out, n, op);
        }
    }

    private static void floats(MemorySegment in, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, in.getAtIndex(F, i) + out.getAtIndex(F, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, in.getAtIndex(F, i) * out.getAtIndex(F, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, Math.min(in.getAtIndex(F, i), out.getAtIndex(F, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(F, i, Math.max(in.getAtIndex(F, i), out.getAtIndex(F, i)));
                }
            }
        }
    }

    private static void doubles(MemorySegment in, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, in.getAtIndex(D, i) + out.getAtIndex(D, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, in.getAtIndex(D, i) * out.getAtIndex(D, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, Math.min(in.getAtIndex(D, i), out.getAtIndex(D, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(D, i, Math.max(in.getAtIndex(D, i), out.getAtIndex(D, i)));
                }
            }
        }
    }

    private static void ints(MemorySegment in, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, in.getAtIndex(I, i) + out.getAtIndex(I, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, in.getAtIndex(I, i) * out.getAtIndex(I, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, Math.min(in.getAtIndex(I, i), out.getAtIndex(I, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(I, i, Math.max(in.getAtIndex(I, i), out.getAtIndex(I, i)));
                }
            }
        }
    }

    private static void longs(MemorySegment in, MemorySegment out, long n, ReduceOp op) {
        switch (op) {
            case SUM -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, in.getAtIndex(L, i) + out.getAtIndex(L, i));
                }
            }
            case PROD -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, in.getAtIndex(L, i) * out.getAtIndex(L, i));
                }
            }
            case MIN -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, Math.min(in.getAtIndex(L, i), out.getAtIndex(L, i)));
                }
            }
            case MAX -> {
                for (long i = 0; i < n; i++) {
                    out.setAtIndex(L, i, Math.max(in.getAtIndex(L, i), out.getAtIndex(L, i)));
                }
            }
        }
    }
}
