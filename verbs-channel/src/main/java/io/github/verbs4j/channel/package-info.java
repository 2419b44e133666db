/**
 * A message channel over RDMA: reliable, ordered messages on an RC queue pair, written with
 * RDMA WRITE_WITH_IMM (on iWARP: a plain RDMA WRITE and a SEND of the word) into a ring of
 * slots in the receiver's memory, with credit-based flow control, zero-copy receive views and many connections per polling thread.
 *
 * <ul>
 *   <li>{@link io.github.verbs4j.channel.ChannelGroup}: one completion queue and one polling
 *       thread for many channels; {@link io.github.verbs4j.channel.ChannelGroup#connect} and
 *       {@link io.github.verbs4j.channel.ChannelGroup#listen}.</li>
 *   <li>{@link io.github.verbs4j.channel.Channel}: {@code send}, {@code offer} (back-pressure
 *       with a timeout), {@code receive}, and a {@code close} that drains.</li>
 *   <li>{@link io.github.verbs4j.channel.Message}: a view into the receive ring until closed.</li>
 * </ul>
 *
 * <p>The protocol (ring, credits, coalescing, failure) is described in docs/channel.md.
 */
package io.github.verbs4j.channel;
