package io.github.verbs4j;

/**
 * The queue sizes of a queue pair ({@code struct ibv_qp_cap}) as the device granted them
 * (at least what was asked).
 */
public record QpCapabilities(int maxSendWr, int maxRecvWr, int maxSendSge, int maxRecvSge, int maxInlineData) {
}
