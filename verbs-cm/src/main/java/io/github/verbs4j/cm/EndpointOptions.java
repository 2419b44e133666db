package io.github.verbs4j.cm;

/**
 * The shape of an {@link RdmaConnection}: its registered buffers and the parameters it connects
 * or accepts with.
 *
 * @param messageSize    bytes of the send buffer and of each receive buffer (largest message)
 * @param receiveSlots   receive buffers kept posted (messages the peer may send ahead)
 * @param rdmaBufferSize bytes of the buffer peers may READ and WRITE ({@link RdmaConnection#remote()})
 * @param parameters     connect/accept parameters, with the private data to send
 */
public record EndpointOptions(int messageSize, int receiveSlots, int rdmaBufferSize, ConnectParameters parameters) {

    public EndpointOptions {
        if (messageSize < 1) {
            throw new IllegalArgumentException("messageSize must be at least 1, got " + messageSize);
        }
        if (receiveSlots < 1 || receiveSlots > 1024) {
            throw new IllegalArgumentException("receiveSlots must be within 1..1024, got " + receiveSlots);
        }
        if (rdmaBufferSize < 1) {
            throw new IllegalArgumentException("rdmaBufferSize must be at least 1, got " + rdmaBufferSize);
        }
        java.util.Objects.requireNonNull(parameters, "parameters");
    }

    /** 4 KiB messages, 8 receive buffers, a 64 KiB RDMA buffer, {@link ConnectParameters#defaults()}. */
    public static EndpointOptions defaults() {
        return new EndpointOptions(4096, 8, 64 * 1024, ConnectParameters.defaults());
    }

    /** These options sending {@code data} as private data with the connect or accept. */
    public EndpointOptions withPrivateData(byte[] data) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, parameters.withPrivateData(data));
    }

    /** These options with other buffer sizes. */
    public EndpointOptions withBuffers(int messageSize, int receiveSlots, int rdmaBufferSize) {
        return new EndpointOptions(messageSize, receiveSlots, rdmaBufferSize, parameters);
    }
}
