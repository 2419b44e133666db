package io.github.verbs4j;

/**
 * An asynchronous event of a device ({@code struct ibv_async_event}), copied out of the native
 * event before it was acknowledged ({@code ibv_ack_async_event}).
 *
 * <p>The object an event concerns is resolved from the native pointer in the event through the
 * context's own record of the queue pairs, completion queues and SRQs it made (the native
 * memory is never read for that). It is {@code null} when the object was closed (or its close
 * had begun) before the event was read, or was not made through verbs4j on this context.
 *
 * @param type               what happened
 * @param portNumber         the port for port events ({@link AsyncEventType#isPortEvent()}), else -1
 * @param qpNumber           the QP number for QP events ({@link AsyncEventType#isQpEvent()}), else -1
 * @param queuePair          the queue pair of a QP event, or {@code null}
 * @param completionQueue    the completion queue of a CQ event ({@link AsyncEventType#isCqEvent()}), or {@code null}
 * @param sharedReceiveQueue the SRQ of an SRQ event ({@link AsyncEventType#isSrqEvent()}), or {@code null}
 */
public record AsyncEvent(AsyncEventType type, int portNumber, int qpNumber, QueuePair queuePair,
                         CompletionQueue completionQueue, SharedReceiveQueue sharedReceiveQueue) {

    /** An event that names no verbs4j object (port and device events, or objects unknown here). */
    public AsyncEvent(AsyncEventType type, int portNumber, int qpNumber) {
        this(type, portNumber, qpNumber, null, null, null);
    }

    /** The queue pair, completion queue or SRQ the event concerns, whichever is set; else {@code null}. */
    public Object element() {
        return queuePair != null ? queuePair : completionQueue != null ? completionQueue : sharedReceiveQueue;
    }
}
