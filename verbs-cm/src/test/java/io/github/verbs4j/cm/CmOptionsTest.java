package io.github.verbs4j.cm;

import org.junit.jupiter.api.Test;

import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

/** {@link QpInit} and {@link ConnectParameters} as values: defaults, a wither per field, validation (no device). */
class CmOptionsTest {

    @Test
    void qpInitHasAWitherForEveryField() {
        QpInit d = QpInit.defaults();
        assertEquals(new QpInit(16, 16, 1, 1, 0, false), d);
        assertEquals(new QpInit(64, 16, 1, 1, 0, false), d.withMaxSendWr(64));
        assertEquals(new QpInit(16, 128, 1, 1, 0, false), d.withMaxRecvWr(128));
        assertEquals(new QpInit(16, 16, 2, 1, 0, false), d.withMaxSendSge(2));
        assertEquals(new QpInit(16, 16, 1, 3, 0, false), d.withMaxRecvSge(3));
        assertEquals(new QpInit(16, 16, 1, 1, 64, false), d.withMaxInlineData(64));
        assertEquals(new QpInit(16, 16, 1, 1, 0, true), d.withSignalAll(true));
        assertEquals(new QpInit(16, 16, 1, 1, 0, false), d, "a wither leaves the original alone");
        assertEquals(new QpInit(8, 4, 2, 3, 32, true), d.withMaxSendWr(8).withMaxRecvWr(4).withMaxSendSge(2)
                .withMaxRecvSge(3).withMaxInlineData(32).withSignalAll(true));
    }

    @Test
    void qpInitChecksEachValueWhereItIsMade() {
        QpInit d = QpInit.defaults();
        rejects("maxSendWr must be at least 1, got 0", () -> d.withMaxSendWr(0));
        rejects("maxRecvWr must be at least 1, got -1", () -> d.withMaxRecvWr(-1));
        rejects("maxSendSge must be at least 1, got 0", () -> d.withMaxSendSge(0));
        rejects("maxRecvSge must be at least 1, got 0", () -> d.withMaxRecvSge(0));
        rejects("maxInlineData must not be negative, got -1", () -> d.withMaxInlineData(-1));
        assertEquals(0, d.withMaxInlineData(0).maxInlineData());
    }

    @Test
    void endpointOptionsAskForTheQueuePairTheyDescribe() {
        EndpointOptions o = EndpointOptions.defaults().withSendQueueDepth(32).withReceiveSlots(8).withMaxSendSge(2)
                .withMaxRecvSge(3).withMaxInlineData(64);
        assertEquals(new QpInit(32, 8, 2, 3, 64, false), o.qpInit());
        assertEquals(new QpInit(16, 8, 1, 1, 0, false), EndpointOptions.defaults().qpInit());
    }

    @Test
    void connectParametersHaveAWitherForEveryField() {
        ConnectParameters d = ConnectParameters.defaults();
        byte[] hello = {1, 2, 3};
        assertEquals(new ConnectParameters(1, 1, 7, 7, null), d);
        assertEquals(new ConnectParameters(9, 1, 7, 7, null), d.withResponderResources(9));
        assertEquals(new ConnectParameters(1, ConnectParameters.MAX, 7, 7, null), d.withInitiatorDepth(ConnectParameters.MAX));
        assertEquals(new ConnectParameters(1, 1, 2, 7, null), d.withRetryCount(2));
        assertEquals(new ConnectParameters(1, 1, 7, 0, null), d.withRnrRetryCount(0));
        assertEquals(new ConnectParameters(1, 1, 7, 7, hello), d.withPrivateData(hello));
        assertEquals(new ConnectParameters(4, 5, 7, 7, null), d.withDepths(4, 5));
        ConnectParameters p = d.withPrivateData(hello).withRetryCount(3).withRnrRetryCount(1).withResponderResources(2)
                .withInitiatorDepth(6);
        assertEquals(new ConnectParameters(2, 6, 3, 1, hello), p);
        assertArrayEquals(hello, p.privateData(), "the private data survives the other withers");
        hello[0] = 9;
        assertEquals(1, p.privateData()[0], "copied in");
        assertEquals(0, d.privateData().length, "a wither leaves the original alone");
        assertFalse(d.equals(p));
    }

    @Test
    void connectParametersCheckEachValueWhereTheyAreMade() {
        ConnectParameters d = ConnectParameters.defaults();
        rejects("responderResources must be within 0..255, got 256", () -> d.withResponderResources(256));
        rejects("initiatorDepth must be within 0..255, got -1", () -> d.withInitiatorDepth(-1));
        rejects("retryCount must be within 0..7, got 8", () -> d.withRetryCount(8));
        rejects("rnrRetryCount must be within 0..7, got 8", () -> d.withRnrRetryCount(8));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> d.withPrivateData(new byte[256]));
        assertEquals("private data holds at most 255 bytes (rdma_conn_param's private_data_len is 8 bits), got 256",
                e.getMessage());
    }

    private static void rejects(String message, Supplier<?> make) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, make::get);
        assertEquals(message, e.getMessage());
    }
}
