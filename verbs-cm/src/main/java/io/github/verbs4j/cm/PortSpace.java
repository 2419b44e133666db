package io.github.verbs4j.cm;

import io.github.verbs4j.QpType;
import io.github.verbs4j.raw.CmStructs;

/** The port space of a CM id ({@code enum rdma_port_space}): it fixes the QP type. */
public enum PortSpace {
    /** {@code RDMA_PS_TCP}: reliable connected (RC) queue pairs. */
    TCP(CmStructs.PS_TCP, QpType.RC),
    /** {@code RDMA_PS_UDP}: unreliable datagram (UD) queue pairs, SIDR exchange instead of a connection. */
    UDP(CmStructs.PS_UDP, QpType.UD);

    private final int value;
    private final QpType qpType;

    PortSpace(int value, QpType qpType) {
        this.value = value;
        this.qpType = qpType;
    }

    /** The C value. */
    public int value() {
        return value;
    }

    /** The QP type ids of this space use. */
    public QpType qpType() {
        return qpType;
    }
}
