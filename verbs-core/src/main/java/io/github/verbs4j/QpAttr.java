package io.github.verbs4j;

import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.QpAttrFields;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The attributes of one state transition ({@code struct ibv_qp_attr} plus the
 * {@code attr_mask} of the attributes set). Each setter sets one attribute and its mask bit;
 * {@link QueuePair#toInit}, {@link QueuePair#toRtr} and {@link QueuePair#toRts} check, before
 * calling {@code ibv_modify_qp}, that exactly the attributes the transition needs for the QP's
 * type are set (and no attribute it does not take), naming any that are missing.
 *
 * <pre>{@code
 * qp.toInit(new QpAttr().port(1).access(Access.REMOTE_WRITE));                      // RC/UC
 * qp.toRtr(new QpAttr().pathMtu(Mtu.MTU_1024).destQpNum(peer.qpn()).rqPsn(peer.psn())
 *         .maxDestRdAtomic(1).minRnrTimer(12).addressVector(AddressVector.to(peer).port(1).sgidIndex(1)));
 * qp.toRts(new QpAttr().sqPsn(myPsn).timeout(14).retryCount(7).rnrRetry(7).maxRdAtomic(1));
 * }</pre>
 *
 * <p>A mutable builder; not thread-safe.
 */
public final class QpAttr {

    static final int STATE = QpAttrFields.STATE;
    static final int ACCESS_FLAGS = QpAttrFields.ACCESS_FLAGS;
    static final int PKEY_INDEX = QpAttrFields.PKEY_INDEX;
    static final int PORT = QpAttrFields.PORT;
    static final int QKEY = QpAttrFields.QKEY;
    static final int AV = QpAttrFields.AV;
    static final int PATH_MTU = QpAttrFields.PATH_MTU;
    static final int TIMEOUT = QpAttrFields.TIMEOUT;
    static final int RETRY_CNT = QpAttrFields.RETRY_CNT;
    static final int RNR_RETRY = QpAttrFields.RNR_RETRY;
    static final int RQ_PSN = QpAttrFields.RQ_PSN;
    static final int MAX_QP_RD_ATOMIC = QpAttrFields.MAX_QP_RD_ATOMIC;
    static final int MIN_RNR_TIMER = QpAttrFields.MIN_RNR_TIMER;
    static final int SQ_PSN = QpAttrFields.SQ_PSN;
    static final int MAX_DEST_RD_ATOMIC = QpAttrFields.MAX_DEST_RD_ATOMIC;
    static final int DEST_QPN = QpAttrFields.DEST_QPN;

    /** Mask bits in the order messages list them, with the Java setter's name. */
    private static final int[] BITS = {PORT, PKEY_INDEX, ACCESS_FLAGS, QKEY, AV, PATH_MTU, DEST_QPN, RQ_PSN,
            MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER, SQ_PSN, TIMEOUT, RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC};
    private static final String[] NAMES = {"port (IBV_QP_PORT)", "pkeyIndex (IBV_QP_PKEY_INDEX)",
            "access (IBV_QP_ACCESS_FLAGS)", "qkey (IBV_QP_QKEY)", "addressVector (IBV_QP_AV)",
            "pathMtu (IBV_QP_PATH_MTU)", "destQpNum (IBV_QP_DEST_QPN)", "rqPsn (IBV_QP_RQ_PSN)",
            "maxDestRdAtomic (IBV_QP_MAX_DEST_RD_ATOMIC)", "minRnrTimer (IBV_QP_MIN_RNR_TIMER)",
            "sqPsn (IBV_QP_SQ_PSN)", "timeout (IBV_QP_TIMEOUT)", "retryCount (IBV_QP_RETRY_CNT)",
            "rnrRetry (IBV_QP_RNR_RETRY)", "maxRdAtomic (IBV_QP_MAX_QP_RD_ATOMIC)"};

    int mask;
    private int port;
    private int pkeyIndex;
    private int accessFlags;
    private int qkey;
    private Mtu pathMtu;
    private int destQpNum;
    private int rqPsn;
    private int sqPsn;
    private int maxDestRdAtomic;
    private int maxRdAtomic;
    private int minRnrTimer;
    private int timeout;
    private int retryCount;
    private int rnrRetry;
    AddressVector addressVector;

    /** No attributes set. */
    public QpAttr() {
    }

    /** The physical port (INIT). */
    public QpAttr port(int port) {
        if (port < 1 || port > 255) {
            throw new IllegalArgumentException("port numbers run from 1 to 255, got " + port);
        }
        this.port = port;
        mask |= PORT;
        return this;
    }

    /** The P_Key index (INIT; usually 0). */
    public QpAttr pkeyIndex(int index) {
        this.pkeyIndex = check16("pkeyIndex", index);
        mask |= PKEY_INDEX;
        return this;
    }

    /**
     * The remote operations the QP accepts (INIT for RC/UC): {@link Access#REMOTE_WRITE},
     * {@link Access#REMOTE_READ}, {@link Access#REMOTE_ATOMIC}; none means none.
     */
    public QpAttr access(Access... access) {
        this.accessFlags = Access.mask(Access.setOf(access));
        mask |= ACCESS_FLAGS;
        return this;
    }

    /** The Q_Key (INIT for UD). */
    public QpAttr qkey(int qkey) {
        this.qkey = qkey;
        mask |= QKEY;
        return this;
    }

    /** The path MTU (RTR for RC/UC). */
    public QpAttr pathMtu(Mtu mtu) {
        this.pathMtu = java.util.Objects.requireNonNull(mtu, "mtu");
        mask |= PATH_MTU;
        return this;
    }

    /** The remote QP number (RTR for RC/UC). */
    public QpAttr destQpNum(int qpn) {
        this.destQpNum = check24("destQpNum", qpn);
        mask |= DEST_QPN;
        return this;
    }

    /** The expected PSN of the first received packet: the peer's initial PSN (RTR for RC/UC). */
    public QpAttr rqPsn(int psn) {
        this.rqPsn = check24("rqPsn", psn);
        mask |= RQ_PSN;
        return this;
    }

    /** This QP's initial send PSN (RTS). */
    public QpAttr sqPsn(int psn) {
        this.sqPsn = check24("sqPsn", psn);
        mask |= SQ_PSN;
        return this;
    }

    /** Incoming RDMA READs/atomics in flight the QP serves (RTR for RC). */
    public QpAttr maxDestRdAtomic(int n) {
        this.maxDestRdAtomic = check8("maxDestRdAtomic", n);
        mask |= MAX_DEST_RD_ATOMIC;
        return this;
    }

    /** Outgoing RDMA READs/atomics in flight (RTS for RC). */
    public QpAttr maxRdAtomic(int n) {
        this.maxRdAtomic = check8("maxRdAtomic", n);
        mask |= MAX_QP_RD_ATOMIC;
        return this;
    }

    /** The RNR NAK timer code, 0-31 (RTR for RC; 12 = 0.64 ms). */
    public QpAttr minRnrTimer(int code) {
        if (code < 0 || code > 31) {
            throw new IllegalArgumentException("minRnrTimer is a code 0..31, got " + code);
        }
        this.minRnrTimer = code;
        mask |= MIN_RNR_TIMER;
        return this;
    }

    /** The local ACK timeout code, 0-31: 4.096 us * 2^code (RTS for RC; 14 is about 67 ms). */
    public QpAttr timeout(int code) {
        if (code < 0 || code > 31) {
            throw new IllegalArgumentException("timeout is a code 0..31, got " + code);
        }
        this.timeout = code;
        mask |= TIMEOUT;
        return this;
    }

    /** Transport retries, 0-7 (RTS for RC). */
    public QpAttr retryCount(int n) {
        if (n < 0 || n > 7) {
            throw new IllegalArgumentException("retryCount is 0..7, got " + n);
        }
        this.retryCount = n;
        mask |= RETRY_CNT;
        return this;
    }

    /** Receiver-not-ready retries, 0-7; 7 means retry forever (RTS for RC). */
    public QpAttr rnrRetry(int n) {
        if (n < 0 || n > 7) {
            throw new IllegalArgumentException("rnrRetry is 0..7 (7 = infinite), got " + n);
        }
        this.rnrRetry = n;
        mask |= RNR_RETRY;
        return this;
    }

    /** The primary path (RTR for RC/UC). */
    public QpAttr addressVector(AddressVector av) {
        this.addressVector = java.util.Objects.requireNonNull(av, "av");
        mask |= AV;
        return this;
    }

    /** The names of the attributes in {@code bits}, comma-separated. */
    static String names(int bits) {
        List<String> names = new ArrayList<>();
        for (int i = 0; i < BITS.length; i++) {
            if ((bits & BITS[i]) != 0) {
                names.add(NAMES[i]);
            }
        }
        return String.join(", ", names);
    }

    /**
     * {@code ibv_modify_qp} of {@code qp} to {@code to} with these attributes: the call a
     * {@link QueuePair} and an {@link XrcTarget} make. On failure a VerbsException with the errno,
     * naming the step ({@code name}), the owner and the transition from {@code from}.
     */
    void modify(MemorySegment qp, QpState to, String name, Object owner, QpState from) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment a = fields(to).write(arena);
            int mask = this.mask | STATE;
            int rc = (int) VerbsFunctions.need(VerbsFunctions.MODIFY_QP, "ibv_modify_qp").invokeExact(errno, qp, a, mask);
            if (rc != 0) {
                throw new VerbsException("ibv_modify_qp", Downcalls.errnoOf(rc, errno), name + " of " + owner + " ("
                        + from + " -> " + to + ", " + this + ")");
            }
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_modify_qp", t);
        }
    }

    /** The set attributes and the {@code target} state, as the raw layer encodes them (unset ones 0). */
    QpAttrFields fields(QpState target) {
        return new QpAttrFields(target.value(), pathMtu == null ? 0 : pathMtu.value(), qkey, rqPsn, sqPsn, destQpNum,
                accessFlags, null, addressVector == null ? null : addressVector.ahAttr(), pkeyIndex, maxRdAtomic,
                maxDestRdAtomic, minRnrTimer, port, timeout, retryCount, rnrRetry);
    }

    private static int check8(String what, int v) {
        if (v < 0 || v > 255) {
            throw new IllegalArgumentException(what + " out of 0..255: " + v);
        }
        return v;
    }

    private static int check16(String what, int v) {
        if (v < 0 || v > 0xffff) {
            throw new IllegalArgumentException(what + " out of 16 bits: " + v);
        }
        return v;
    }

    private static int check24(String what, int v) {
        if (v < 0 || v > 0xffffff) {
            throw new IllegalArgumentException(what + " out of 24 bits: " + v);
        }
        return v;
    }

    @Override
    public String toString() {
        return "QpAttr[" + names(mask) + "]";
    }
}
