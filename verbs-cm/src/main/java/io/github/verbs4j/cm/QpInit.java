package io.github.verbs4j.cm;

/**
 * The sizes of a queue pair made by {@link CmId#createQueuePair} ({@code struct ibv_qp_cap} and
 * {@code sq_sig_all} of {@code struct ibv_qp_init_attr}). Start from {@link #defaults()} and name what
 * differs, as every options type of verbs4j does:
 *
 * <pre>{@code
 * QpInit init = QpInit.defaults().withMaxSendWr(64).withMaxRecvWr(128).withMaxInlineData(64);
 * }</pre>
 *
 * <p>Immutable; each {@code withX} returns new sizes (its result must be used). Every value is
 * checked where the sizes are made ({@link IllegalArgumentException} naming the field).
 *
 * @param maxSendWr     send requests outstanding at once
 * @param maxRecvWr     receive requests posted at once
 * @param maxSendSge    scatter/gather entries per send request
 * @param maxRecvSge    scatter/gather entries per receive request
 * @param maxInlineData bytes a send request may carry inline
 * @param signalAll     every send request completes, signaled or not
 */
public record QpInit(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData, boolean signalAll) {

    /** Checks every value: the counts at least 1, the inline size not negative. */
    public QpInit {
        positive("maxSendWr", maxSendWr);
        positive("maxRecvWr", maxRecvWr);
        positive("maxSendSge", maxSendSge);
        positive("maxRecvSge", maxRecvSge);
        if (maxInlineData < 0) {
            throw new IllegalArgumentException("maxInlineData must not be negative, got " + maxInlineData);
        }
    }

    private static void positive(String name, int n) {
        if (n < 1) {
            throw new IllegalArgumentException(name + " must be at least 1, got " + n);
        }
    }

    /** 16 send and 16 receive requests, one SGE each, no inline data, only signaled sends complete. */
    public static QpInit defaults() {
        return new QpInit(16, 16, 1, 1, 0, false);
    }

    /** These sizes with {@code n} send requests outstanding at once (at least 1). */
    public QpInit withMaxSendWr(int n) {
        return new QpInit(n, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, signalAll);
    }

    /** These sizes with {@code n} receive requests posted at once (at least 1). */
    public QpInit withMaxRecvWr(int n) {
        return new QpInit(maxSendWr, n, maxSendSge, maxRecvSge, maxInlineData, signalAll);
    }

    /** These sizes with {@code n} scatter/gather entries per send request (at least 1). */
    public QpInit withMaxSendSge(int n) {
        return new QpInit(maxSendWr, maxRecvWr, n, maxRecvSge, maxInlineData, signalAll);
    }

    /** These sizes with {@code n} scatter/gather entries per receive request (at least 1). */
    public QpInit withMaxRecvSge(int n) {
        return new QpInit(maxSendWr, maxRecvWr, maxSendSge, n, maxInlineData, signalAll);
    }

    /** These sizes with up to {@code bytes} of inline data per send request (not negative). */
    public QpInit withMaxInlineData(int bytes) {
        return new QpInit(maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, bytes, signalAll);
    }

    /** These sizes with every send request completing ({@code true}) or only the signaled ones. */
    public QpInit withSignalAll(boolean signalAll) {
        return new QpInit(maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData, signalAll);
    }
}
