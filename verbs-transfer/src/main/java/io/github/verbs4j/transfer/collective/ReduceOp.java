package io.github.verbs4j.transfer.collective;

/**
 * How a {@link Ring} reduction combines the ranks' elements (NCCL's {@code ncclRedOp_t}), element
 * by element. Floating-point {@link #MIN} and {@link #MAX} follow {@link Math#min(float, float)}:
 * a NaN anywhere gives NaN.
 */
public enum ReduceOp {
    /** The sum. */
    SUM,
    /** The product. */
    PROD,
    /** The smallest value. */
    MIN,
    /** The largest value. */
    MAX
}
