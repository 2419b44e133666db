package io.github.verbs4j.cm;

/**
 * The sizes of a queue pair made by {@link CmId#createQueuePair} ({@code struct ibv_qp_cap} and
 * {@code sq_sig_all} of {@code struct ibv_qp_init_attr}).
 *
 * @param maxSendWr     send requests outstanding at once
 * @param maxRecvWr     receive requests posted at once
 * @param maxSendSge    scatter/gather entries per send request
 * @param maxRecvSge    scatter/gather entries per receive request
 * @param maxInlineData bytes a send request may carry inline
 * @param signalAll     every send request completes, signaled or not
 */
public record QpInit(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData, boolean signalAll) {

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
}
