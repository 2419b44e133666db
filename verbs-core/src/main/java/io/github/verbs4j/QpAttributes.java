package io.github.verbs4j;

import java.util.Set;

/**
 * A queue pair's attributes as {@code ibv_query_qp} reports them.
 *
 * @param state           the current state
 * @param pathMtu         the path MTU ({@code null} before RTR)
 * @param qkey            the Q_Key (UD)
 * @param rqPsn           the receive PSN
 * @param sqPsn           the send PSN
 * @param destQpNum       the remote QP number (RC/UC)
 * @param access          remote access the QP accepts
 * @param capabilities    the queue sizes
 * @param portNumber      the port
 * @param pkeyIndex       the P_Key index
 * @param maxRdAtomic     outgoing READ/atomic depth
 * @param maxDestRdAtomic incoming READ/atomic depth
 * @param minRnrTimer     RNR NAK timer code
 * @param timeout         ACK timeout code
 * @param retryCount      transport retries
 * @param rnrRetry        RNR retries
 */
public record QpAttributes(
        QpState state,
        Mtu pathMtu,
        int qkey,
        int rqPsn,
        int sqPsn,
        int destQpNum,
        Set<Access> access,
        QpCapabilities capabilities,
        int portNumber,
        int pkeyIndex,
        int maxRdAtomic,
        int maxDestRdAtomic,
        int minRnrTimer,
        int timeout,
        int retryCount,
        int rnrRetry) {
}
