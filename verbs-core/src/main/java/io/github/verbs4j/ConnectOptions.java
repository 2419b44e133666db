package io.github.verbs4j;

import java.util.Collections;
import java.util.Objects;
import java.util.Set;

/**
 * The local choices for {@link QueuePair#connect(Endpoint, ConnectOptions)} and
 * {@link QueuePair#activate(ConnectOptions)}: everything INIT, RTR and RTS need besides what
 * the remote {@link Endpoint} says. Start from {@link #defaults()} and name what differs:
 *
 * <pre>{@code
 * ConnectOptions options = ConnectOptions.defaults().withGidIndex(3).withMtu(Mtu.MTU_1024).withRnrRetry(0);
 * qp.connect(peer, options);
 * }</pre>
 *
 * <p>An immutable value: one instance can be shared between threads and reused for any number
 * of connects. Each {@code withX} returns new options and leaves these unchanged, so its result
 * must be used ({@code options.withPort(2);} alone changes nothing). Every value is checked where
 * the options are made: an out-of-range one throws {@link IllegalArgumentException} naming the
 * field and its range.
 *
 * @param port            the local port, 1..255 (default 1)
 * @param pkeyIndex       the P_Key index, 0..65535 (default 0)
 * @param gidIndex        the local GID index used as the GRH source, 0..255, or
 *                        {@value #AUTOMATIC_GID_INDEX} (the default) for: the one the QP's last
 *                        {@link QueuePair#endpoint(int, int)} advertised, else the first local GID
 *                        of the remote GID's family (IPv4-mapped or IPv6; RoCE v2 preferred)
 * @param mtu             the path MTU, or {@code null} (the default) for the port's active MTU
 * @param access          the remote operations the QP accepts (RC/UC; empty: none). Default:
 *                        REMOTE_WRITE, REMOTE_READ and REMOTE_ATOMIC (each memory region still
 *                        guards its own memory with its own rights). Copied; the accessor returns
 *                        an unmodifiable set
 * @param timeout         the ACK timeout code, 0..31: 4.096 us * 2^code (default 14, about 67 ms; RC)
 * @param retryCount      transport retries, 0..7 (default 7; RC)
 * @param rnrRetry        receiver-not-ready retries, 0..7, 7 = infinite (default 7); 0 makes a send
 *                        to a peer without a posted receive fail fast with RNR_RETRY_EXCEEDED
 * @param minRnrTimer     the RNR NAK timer code this QP asks senders to wait, 0..31 (default 12,
 *                        0.64 ms; RC)
 * @param maxRdAtomic     outgoing RDMA READs/atomics in flight, 0..255 (default 1; RC)
 * @param maxDestRdAtomic incoming RDMA READs/atomics in flight this QP serves, 0..255 (default 1; RC)
 * @param qkey            the Q_Key of a UD QP, any 32 bits (default {@value #DEFAULT_QKEY})
 * @param serviceLevel    the service level of the path, 0..15 (default 0)
 */
public record ConnectOptions(int port, int pkeyIndex, int gidIndex, Mtu mtu, Set<Access> access, int timeout,
        int retryCount, int rnrRetry, int minRnrTimer, int maxRdAtomic, int maxDestRdAtomic, int qkey,
        int serviceLevel) {

    /** The Q_Key UD QPs use unless told otherwise. */
    public static final int DEFAULT_QKEY = 0x11111111;

    /** The {@link #gidIndex()} that lets the queue pair choose its source GID (see the record's description). */
    public static final int AUTOMATIC_GID_INDEX = -1;

    private static final ConnectOptions DEFAULTS = new ConnectOptions(1, 0, AUTOMATIC_GID_INDEX, null,
            Set.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC), 14, 7, 7, 12, 1, 1,
            DEFAULT_QKEY, 0);

    /**
     * Checks every value (ranges in the record's description).
     *
     * <p><b>Errors</b>: {@link IllegalArgumentException} naming the field and its range;
     * {@link NullPointerException} for a null {@code access} or a null element of it.
     */
    public ConnectOptions {
        within("port", port, 1, 255);
        within("pkeyIndex", pkeyIndex, 0, 0xffff);
        within("gidIndex", gidIndex, AUTOMATIC_GID_INDEX, 255);
        Objects.requireNonNull(access, "access");
        access = Collections.unmodifiableSet(Access.setOf(access.toArray(Access[]::new)));
        within("timeout", timeout, 0, 31);
        within("retryCount", retryCount, 0, 7);
        within("rnrRetry", rnrRetry, 0, 7);
        within("minRnrTimer", minRnrTimer, 0, 31);
        within("maxRdAtomic", maxRdAtomic, 0, 255);
        within("maxDestRdAtomic", maxDestRdAtomic, 0, 255);
        within("serviceLevel", serviceLevel, 0, 15);
    }

    private static void within(String name, int value, int min, int max) {
        if (value < min || value > max) {
            throw new IllegalArgumentException(name + " must be within " + min + ".." + max + ", got " + value);
        }
    }

    /** The defaults listed in the record's description. */
    public static ConnectOptions defaults() {
        return DEFAULTS;
    }

    /** These options on local port {@code port} (1..255). */
    public ConnectOptions withPort(int port) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options with P_Key index {@code index} (0..65535). */
    public ConnectOptions withPkeyIndex(int index) {
        return new ConnectOptions(port, index, gidIndex, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options sending from local GID index {@code index} (0..255, or {@link #AUTOMATIC_GID_INDEX}). */
    public ConnectOptions withGidIndex(int index) {
        return new ConnectOptions(port, pkeyIndex, index, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options with path MTU {@code mtu} ({@code null}: the port's active MTU). */
    public ConnectOptions withMtu(Mtu mtu) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options accepting exactly the remote operations {@code access} (RC/UC; none means none). */
    public ConnectOptions withAccess(Access... access) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, Access.setOf(access), timeout, retryCount, rnrRetry,
                minRnrTimer, maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options with ACK timeout code {@code code} (0..31: 4.096 us * 2^code). */
    public ConnectOptions withTimeout(int code) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, code, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options with {@code n} transport retries (0..7). */
    public ConnectOptions withRetryCount(int n) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, n, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options with {@code n} receiver-not-ready retries (0..7, 7 = infinite). */
    public ConnectOptions withRnrRetry(int n) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, n, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options asking senders to wait RNR timer code {@code code} (0..31). */
    public ConnectOptions withMinRnrTimer(int code) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, rnrRetry, code,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options with up to {@code n} outgoing RDMA READs/atomics in flight (0..255). */
    public ConnectOptions withMaxRdAtomic(int n) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                n, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options serving up to {@code n} incoming RDMA READs/atomics in flight (0..255). */
    public ConnectOptions withMaxDestRdAtomic(int n) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, n, qkey, serviceLevel);
    }

    /** These options with Q_Key {@code qkey} (UD). */
    public ConnectOptions withQkey(int qkey) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, serviceLevel);
    }

    /** These options with service level {@code sl} (0..15). */
    public ConnectOptions withServiceLevel(int sl) {
        return new ConnectOptions(port, pkeyIndex, gidIndex, mtu, access, timeout, retryCount, rnrRetry, minRnrTimer,
                maxRdAtomic, maxDestRdAtomic, qkey, sl);
    }

    /** {@link #access()} as the array {@link QpAttr#access} takes. */
    Access[] accessArray() {
        return access.toArray(Access[]::new);
    }
}
