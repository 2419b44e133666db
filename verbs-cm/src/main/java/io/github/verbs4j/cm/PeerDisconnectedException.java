package io.github.verbs4j.cm;

import io.github.verbs4j.Errno;
import io.github.verbs4j.VerbsException;

/**
 * An {@link RdmaConnection} wait ended because the connection is gone: a DISCONNECTED event
 * arrived (the peer disconnected, closed its connection or its process died). errno ECONNRESET.
 */
public final class PeerDisconnectedException extends VerbsException {

    private static final long serialVersionUID = 1L;

    PeerDisconnectedException(String verb, String detail) {
        super(verb, Errno.ECONNRESET, detail);
    }
}
