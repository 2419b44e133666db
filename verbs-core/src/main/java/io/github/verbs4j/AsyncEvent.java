package io.github.verbs4j;

/**
 * An asynchronous event of a device ({@code struct ibv_async_event}), copied out of the native
 * event before it was acknowledged ({@code ibv_ack_async_event}).
 *
 * @param type       what happened
 * @param portNumber the port for port events ({@link AsyncEventType#isPortEvent()}), else -1
 * @param qpNumber   the QP number for QP events ({@link AsyncEventType#isQpEvent()}), else -1
 */
public record AsyncEvent(AsyncEventType type, int portNumber, int qpNumber) {
}
