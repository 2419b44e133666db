package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.util.EnumSet;
import java.util.Set;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

/** The one "peer lost" type of every layer: what showed the loss is kept once (no device needed). */
class PeerLostExceptionTest {

    private static WorkCompletionException completion(WcStatus status) {
        return new WorkCompletionException("RDMA WRITE #3", status, 3, 0x81, 0x11, WcOpcode.RDMA_WRITE);
    }

    @Test
    void aLossRdmaCmReportedHasNoStatusAndNoCause() {
        PeerLostException e = new PeerLostException("the peer 10.0.0.2:7471 disconnected");
        assertInstanceOf(RdmaException.class, e);
        assertFalse(VerbsException.class.isAssignableFrom(PeerLostException.class), "no verb failed: no errno");
        assertEquals("the peer 10.0.0.2:7471 disconnected", e.getMessage());
        assertNull(e.status());
        assertNull(e.getCause());
    }

    @Test
    void aLossShownByAWorkRequestTakesItsStatusAndKeepsItAsCause() {
        WorkCompletionException wc = completion(WcStatus.RETRY_EXCEEDED);
        PeerLostException e = new PeerLostException("10.0.0.2:7471 is lost", wc);
        assertSame(wc, e.getCause());
        assertEquals(WcStatus.RETRY_EXCEEDED, e.status());
        assertEquals("10.0.0.2:7471 is lost", e.getMessage(), "the completion's message is not repeated");
    }

    @Test
    void anotherFailureAsCauseHasNoStatus() {
        VerbsException post = VerbsException.of("ibv_post_send", Errno.ENOMEM.code());
        PeerLostException e = new PeerLostException("posting a credit word failed", post);
        assertSame(post, e.getCause());
        assertNull(e.status());
    }

    @Test
    void aStatusShownByAnotherRequestNeedsNoCause() {
        PeerLostException e = new PeerLostException("look-up: lost", WcStatus.RETRY_EXCEEDED, null);
        assertEquals(WcStatus.RETRY_EXCEEDED, e.status());
        assertNull(e.getCause());
    }

    @Test
    void aPeerLostExceptionAsCauseIsNeverDoubled() {
        WorkCompletionException wc = completion(WcStatus.WR_FLUSH_ERROR);
        PeerLostException first = new PeerLostException("the connection to the peer failed", wc);

        PeerLostException again = new PeerLostException("closing the channel: 3 WRITEs were not delivered", first);
        assertSame(wc, again.getCause(), "the cause is what showed the loss, not the first PeerLostException");
        assertEquals(WcStatus.WR_FLUSH_ERROR, again.status());

        PeerLostException rethrown = new PeerLostException(first.getMessage(), null, first);
        assertSame(wc, rethrown.getCause());
        assertEquals(WcStatus.WR_FLUSH_ERROR, rethrown.status(), "the status comes with the cause when none is given");

        PeerLostException cmFirst = new PeerLostException("the peer disconnected");
        PeerLostException fromCm = new PeerLostException("closing: not delivered", cmFirst);
        assertNull(fromCm.getCause());
        assertNull(fromCm.status());
    }

    @Test
    void onlyTheStatusesOfAGiveUpShowTheLossByThemselves() {
        Set<WcStatus> loss = EnumSet.of(WcStatus.RETRY_EXCEEDED, WcStatus.RNR_RETRY_EXCEEDED,
                WcStatus.RESPONSE_TIMEOUT_ERROR, WcStatus.REMOTE_ABORT_ERROR);
        for (WcStatus s : WcStatus.values()) {
            assertEquals(loss.contains(s), PeerLostException.shows(s), s.name());
        }
    }

    @Test
    void itSerializesWithItsStatusAndCause() throws Exception {
        PeerLostException e = new PeerLostException("lost", completion(WcStatus.RETRY_EXCEEDED));
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
            out.writeObject(e);
        }
        try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(bytes.toByteArray()))) {
            PeerLostException back = (PeerLostException) in.readObject();
            assertEquals(WcStatus.RETRY_EXCEEDED, back.status());
            assertEquals(WcStatus.RETRY_EXCEEDED, ((WorkCompletionException) back.getCause()).status());
            assertEquals("lost", back.getMessage());
        }
    }
}
