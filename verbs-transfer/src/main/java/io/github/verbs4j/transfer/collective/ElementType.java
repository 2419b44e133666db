package io.github.verbs4j.transfer.collective;

import java.lang.foreign.ValueLayout;

/**
 * The type of the elements a {@link Ring} collective reduces or moves (NCCL's
 * {@code ncclDataType_t}): what a {@link java.lang.foreign.MemorySegment} holds, in the platform's
 * byte order, as the JDK's {@code JAVA_FLOAT}, {@code JAVA_DOUBLE}, {@code JAVA_INT} and
 * {@code JAVA_LONG} layouts read it.
 */
public enum ElementType {
    /** 32-bit IEEE 754 ({@code float}). */
    FLOAT(ValueLayout.JAVA_FLOAT),
    /** 64-bit IEEE 754 ({@code double}). */
    DOUBLE(ValueLayout.JAVA_DOUBLE),
    /** 32-bit two's complement ({@code int}); sums and products wrap as Java's do. */
    INT(ValueLayout.JAVA_INT),
    /** 64-bit two's complement ({@code long}); sums and products wrap as Java's do. */
    LONG(ValueLayout.JAVA_LONG);

    private final ValueLayout layout;

    ElementType(ValueLayout layout) {
        this.layout = layout;
    }

    /** The size of one element in bytes (4 or 8). */
    public int bytes() {
        return (int) layout.byteSize();
    }

    /** The JDK layout of one element. */
    public ValueLayout layout() {
        return layout;
    }
}
