package io.github.verbs4j.netty;

/** How an event loop of {@link RdmaIoHandler} waits for completions. */
public enum RdmaNotificationMode {
    /**
     * Busy-polls the completion queues for a bounded budget, then arms notification and blocks in
     * {@code poll(2)}: an idle loop costs no CPU, a busy one no system calls. The default.
     */
    ADAPTIVE,
    /** Never blocks while a connection is open: lowest latency, one core per event loop. */
    BUSY_POLL,
    /** Arms notification and blocks whenever one pass found nothing: least CPU, higher latency. */
    EVENT
}
