package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** The transport of a queue pair ({@code enum ibv_qp_type}) that verbs4j supports. */
public enum QpType {
    /** {@code IBV_QPT_RC}: reliable connected; every opcode. */
    RC(VerbsConstants.IBV_QPT_RC),
    /** {@code IBV_QPT_UC}: unreliable connected; SEND and RDMA WRITE (with or without immediate). */
    UC(VerbsConstants.IBV_QPT_UC),
    /** {@code IBV_QPT_UD}: unreliable datagram; SEND only, addressed per request with an address handle. */
    UD(VerbsConstants.IBV_QPT_UD),
    /**
     * {@code IBV_QPT_XRC_SEND}: the sending end of an XRC connection, to an {@link XrcTarget};
     * RC's opcodes, each request naming the remote XRC SRQ ({@link SendRequest#xrcRemoteSrqn});
     * no receive queue.
     */
    XRC_SEND(VerbsConstants.IBV_QPT_XRC_SEND);

    private final int value;

    QpType(int value) {
        this.value = value;
    }

    /** The C enum value. */
    public int value() {
        return value;
    }

    static QpType of(int value) {
        for (QpType t : values()) {
            if (t.value == value) {
                return t;
            }
        }
        throw new IllegalArgumentException("unsupported enum ibv_qp_type value: " + value);
    }
}
