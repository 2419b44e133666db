package io.github.verbs4j;

import java.util.Objects;

/**
 * The local choices for {@link QueuePair#connect(Endpoint, ConnectOptions)} and
 * {@link QueuePair#activate(ConnectOptions)}: everything INIT, RTR and RTS need besides what
 * the remote {@link Endpoint} says. Defaults:
 * <ul>
 *   <li>port 1, P_Key index 0;</li>
 *   <li>GID index: the one the QP's last {@link QueuePair#endpoint(int, int)} advertised, else
 *       the first local GID of the remote GID's family (IPv4-mapped or IPv6; RoCE v2 preferred);</li>
 *   <li>path MTU: the port's active MTU;</li>
 *   <li>QP access: REMOTE_WRITE, REMOTE_READ and REMOTE_ATOMIC (each memory region still
 *       guards its own memory with its own rights);</li>
 *   <li>timeout 14 (about 67 ms), retry count 7, RNR retry 7 (infinite), min RNR timer 12,
 *       READ/atomic depth 1 each way;</li>
 *   <li>Q_Key {@value #DEFAULT_QKEY} (UD).</li>
 * </ul>
 * A mutable builder; not thread-safe.
 */
public final class ConnectOptions {

    /** The Q_Key UD QPs use unless told otherwise. */
    public static final int DEFAULT_QKEY = 0x11111111;

    int port = 1;
    int pkeyIndex;
    int gidIndex = -1;
    Mtu mtu;
    Access[] access = {Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC};
    int timeout = 14;
    int retryCount = 7;
    int rnrRetry = 7;
    int minRnrTimer = 12;
    int maxRdAtomic = 1;
    int maxDestRdAtomic = 1;
    int qkey = DEFAULT_QKEY;
    int serviceLevel;

    /** The defaults listed above. */
    public ConnectOptions() {
    }

    /** Defaults. */
    public static ConnectOptions defaults() {
        return new ConnectOptions();
    }

    /** The local port (default 1). */
    public ConnectOptions port(int port) {
        this.port = port;
        return this;
    }

    /** The P_Key index (default 0). */
    public ConnectOptions pkeyIndex(int index) {
        this.pkeyIndex = index;
        return this;
    }

    /** The local GID index used as the GRH source. */
    public ConnectOptions gidIndex(int index) {
        this.gidIndex = index;
        return this;
    }

    /** The path MTU (default: the port's active MTU). */
    public ConnectOptions mtu(Mtu mtu) {
        this.mtu = Objects.requireNonNull(mtu, "mtu");
        return this;
    }

    /** The remote operations the QP accepts (RC/UC); none means none. */
    public ConnectOptions access(Access... access) {
        this.access = access.clone();
        return this;
    }

    /** The ACK timeout code, 0-31: 4.096 us * 2^code (default 14, about 67 ms; RC). */
    public ConnectOptions timeout(int code) {
        this.timeout = code;
        return this;
    }

    /** Transport retries, 0-7 (default 7; RC). */
    public ConnectOptions retryCount(int n) {
        this.retryCount = n;
        return this;
    }

    /** RNR retries; 0 makes a send to a peer without a posted receive fail fast with RNR_RETRY_EXCEEDED. */
    public ConnectOptions rnrRetry(int n) {
        this.rnrRetry = n;
        return this;
    }

    /** The RNR NAK timer code this QP asks senders to wait, 0-31 (default 12, 0.64 ms; RC). */
    public ConnectOptions minRnrTimer(int code) {
        this.minRnrTimer = code;
        return this;
    }

    /** Outgoing RDMA READs/atomics in flight (default 1; RC). */
    public ConnectOptions maxRdAtomic(int n) {
        this.maxRdAtomic = n;
        return this;
    }

    /** Incoming RDMA READs/atomics in flight this QP serves (default 1; RC). */
    public ConnectOptions maxDestRdAtomic(int n) {
        this.maxDestRdAtomic = n;
        return this;
    }

    /** The Q_Key of a UD QP. */
    public ConnectOptions qkey(int qkey) {
        this.qkey = qkey;
        return this;
    }

    /** The service level of the path, 0-15 (default 0). */
    public ConnectOptions serviceLevel(int sl) {
        this.serviceLevel = sl;
        return this;
    }
}
