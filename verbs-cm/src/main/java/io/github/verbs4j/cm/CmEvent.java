package io.github.verbs4j.cm;

import io.github.verbs4j.Errno;

/**
 * A connection-manager event, copied out of {@code struct rdma_cm_event} and already
 * acknowledged ({@code rdma_ack_cm_event}) by {@link EventChannel#next}: the caller has nothing
 * to release, except the new id of a {@link CmEventType#CONNECT_REQUEST}, which is handed over
 * to the caller (accept, reject or close it).
 *
 * @param type        the event type
 * @param status      the C status: 0 on success; {@code -errno} for ADDR_ERROR, ROUTE_ERROR,
 *                    CONNECT_ERROR and UNREACHABLE; the IB CM reject reason for REJECTED (28:
 *                    the peer application rejected, 8: nobody listens on that port)
 * @param id          the id the event is about (for CONNECT_REQUEST: the new connection's id)
 * @param listenId    for CONNECT_REQUEST the listening id, else {@code null}
 * @param parameters  the peer's connection parameters and private data (as seen from this side)
 * @param remoteQpNum UD events: the peer's QP number (else the connection parameters' qp_num)
 * @param remoteQkey  UD events: the peer's Q_Key, else 0
 * @param udAddress   a {@link PortSpace#UDP} ESTABLISHED event: where to send datagrams to the
 *                    peer (the event's {@code ah_attr}, QP number and Q_Key), else {@code null}
 */
public record CmEvent(CmEventType type, int status, CmId id, CmId listenId, ConnectParameters parameters,
        int remoteQpNum, int remoteQkey, UdAddress udAddress) {

    /** An event without a UD address ({@link #udAddress()} {@code null}). */
    public CmEvent(CmEventType type, int status, CmId id, CmId listenId, ConnectParameters parameters,
            int remoteQpNum, int remoteQkey) {
        this(type, status, id, listenId, parameters, remoteQpNum, remoteQkey, null);
    }

    /** A copy of the private data the peer sent with this event (REQ, REP, REJ, SIDR); never null. */
    public byte[] privateData() {
        return parameters.privateData();
    }

    /** The errno of an error event whose status is {@code -errno}, else 0. */
    public int errno() {
        return status < 0 ? -status : 0;
    }

    /** REJECTED's reason: the peer application called {@code rdma_reject}. */
    public static final int REJECT_CONSUMER = 28;
    /** REJECTED's reason: no listener on that port ({@code IB_CM_REJ_INVALID_SERVICE_ID}). */
    public static final int REJECT_INVALID_SERVICE_ID = 8;

    /** {@code "REJECTED (status 28)"}, {@code "UNREACHABLE (ETIMEDOUT (110, Connection timed out))"}. */
    public String describe() {
        if (status < 0) {
            return type + " (" + Errno.describe(-status) + ")";
        }
        return status == 0 ? type.toString() : type + " (status " + status + ")";
    }

    @Override
    public String toString() {
        return "CmEvent[" + describe() + " on " + id + ", " + parameters.privateData().length + " bytes of private data]";
    }
}
