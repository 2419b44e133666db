package io.github.verbs4j.netty;

import io.netty.channel.IoEvent;
import io.netty.channel.IoHandle;
import io.netty.channel.IoRegistration;

/**
 * What {@link RdmaIoHandler} asks of a registered channel on each pass of its loop. All calls
 * come on the event loop's thread.
 */
interface RdmaIoHandle extends IoHandle {

    /** Polls the channel's completion queue and handles what it finds; returns the completions handled. */
    int pollCompletions();

    /** Arms the completion queue's notification before the loop blocks ({@code ibv_req_notify_cq}). */
    void armCompletions();

    /** The rdma_cm event channel's descriptor this channel reads, or -1 while it has none to watch. */
    int cmFd();

    /** The CM event channel is readable (or in error): read and handle its events without blocking. */
    void cmReadable();

    @Override
    default void handle(IoRegistration registration, IoEvent ioEvent) {
        // the handler calls the methods above directly; it submits no IoOps and sends no IoEvents
    }
}
