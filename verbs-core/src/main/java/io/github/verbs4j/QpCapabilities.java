package io.github.verbs4j;

import io.github.verbs4j.raw.QpCap;

/**
 * The queue sizes of a queue pair ({@code struct ibv_qp_cap}) as the device granted them
 * (at least what was asked).
 */
public record QpCapabilities(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {

    /** The sizes the raw layer read from the device's {@code struct ibv_qp_cap}. */
    static QpCapabilities of(QpCap cap) {
        return new QpCapabilities(cap.maxSendWr(), cap.maxRecvWr(), cap.maxSendSge(), cap.maxRecvSge(),
                cap.maxInlineData());
    }
}
