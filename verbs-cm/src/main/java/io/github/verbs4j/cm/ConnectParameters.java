package io.github.verbs4j.cm;

import java.util.Arrays;
import java.util.Objects;

/**
 * The parameters of {@code rdma_connect} and {@code rdma_accept} ({@code struct rdma_conn_param}).
 * Start from {@link #defaults()} and name what differs:
 *
 * <pre>{@code
 * ConnectParameters p = ConnectParameters.defaults().withDepths(16, 16).withRnrRetryCount(0).withPrivateData(hello);
 * }</pre>
 *
 * <p>Immutable (the private data is copied in and out); each {@code withX} returns new
 * parameters (its result must be used). Every value is checked where the parameters are made
 * ({@link IllegalArgumentException} naming the field and its range).
 *
 * @param responderResources incoming RDMA READs/atomics this side serves at once (0..255;
 *                           {@link #MAX} lets librdmacm use the device maximum)
 * @param initiatorDepth     outstanding RDMA READs/atomics this side issues (0..255, or {@link #MAX})
 * @param retryCount         transport retries (0..7; ignored on accept)
 * @param rnrRetryCount      receiver-not-ready retries (0..7, 7 = forever)
 * @param privateData        bytes for the peer (REQ at most 56, REP 196); never null
 */
public record ConnectParameters(int responderResources, int initiatorDepth, int retryCount, int rnrRetryCount,
        byte[] privateData) {

    /** {@code RDMA_MAX_RESP_RES}/{@code RDMA_MAX_INIT_DEPTH}: the device's maximum. */
    public static final int MAX = 0xff;

    /** Checks every value (ranges in the record's description); a null private data is none. */
    public ConnectParameters {
        range("responderResources", responderResources, 255);
        range("initiatorDepth", initiatorDepth, 255);
        range("retryCount", retryCount, 7);
        range("rnrRetryCount", rnrRetryCount, 7);
        privateData = privateData == null ? new byte[0] : privateData.clone();
        if (privateData.length > 255) {
            throw new IllegalArgumentException("private data holds at most 255 bytes (rdma_conn_param's "
                    + "private_data_len is 8 bits), got " + privateData.length);
        }
    }

    private static void range(String name, int value, int max) {
        if (value < 0 || value > max) {
            throw new IllegalArgumentException(name + " must be within 0.." + max + ", got " + value);
        }
    }

    /** One READ each way, 7 retries, RNR retry forever, no private data (rping's choice). */
    public static ConnectParameters defaults() {
        return new ConnectParameters(1, 1, 7, 7, new byte[0]);
    }

    /** These parameters with {@code data} as private data. */
    public ConnectParameters withPrivateData(byte[] data) {
        return new ConnectParameters(responderResources, initiatorDepth, retryCount, rnrRetryCount, data);
    }

    /**
     * These parameters with other READ depths: {@code responderResources} incoming and
     * {@code initiatorDepth} outgoing RDMA READs/atomics in flight at once (each 0..255).
     */
    public ConnectParameters withDepths(int responderResources, int initiatorDepth) {
        return new ConnectParameters(responderResources, initiatorDepth, retryCount, rnrRetryCount, privateData);
    }

    /** These parameters serving {@code n} incoming RDMA READs/atomics at once (0..255, or {@link #MAX}). */
    public ConnectParameters withResponderResources(int n) {
        return new ConnectParameters(n, initiatorDepth, retryCount, rnrRetryCount, privateData);
    }

    /** These parameters issuing up to {@code n} RDMA READs/atomics at once (0..255, or {@link #MAX}). */
    public ConnectParameters withInitiatorDepth(int n) {
        return new ConnectParameters(responderResources, n, retryCount, rnrRetryCount, privateData);
    }

    /** These parameters with {@code n} transport retries (0..7; ignored on accept). */
    public ConnectParameters withRetryCount(int n) {
        return new ConnectParameters(responderResources, initiatorDepth, n, rnrRetryCount, privateData);
    }

    /** These parameters with {@code n} receiver-not-ready retries (0..7, 7 = forever). */
    public ConnectParameters withRnrRetryCount(int n) {
        return new ConnectParameters(responderResources, initiatorDepth, retryCount, n, privateData);
    }

    /** A copy of the private data. */
    @Override
    public byte[] privateData() {
        return privateData.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ConnectParameters p && p.responderResources == responderResources
                && p.initiatorDepth == initiatorDepth && p.retryCount == retryCount
                && p.rnrRetryCount == rnrRetryCount && Arrays.equals(p.privateData, privateData);
    }

    @Override
    public int hashCode() {
        return Objects.hash(responderResources, initiatorDepth, retryCount, rnrRetryCount, Arrays.hashCode(privateData));
    }

    @Override
    public String toString() {
        return "ConnectParameters[responderResources=" + responderResources + ", initiatorDepth=" + initiatorDepth
                + ", retryCount=" + retryCount + ", rnrRetryCount=" + rnrRetryCount + ", privateData="
                + privateData.length + " bytes]";
    }
}
