package io.github.verbs4j.channel;

import io.github.verbs4j.Completion;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.ReceiveRequest;
import io.github.verbs4j.VerbsException;

import java.lang.foreign.MemorySegment;

import static io.github.verbs4j.channel.Channel.BARE_CREDIT_MASK;
import static io.github.verbs4j.channel.Channel.COUNT_MASK;
import static io.github.verbs4j.channel.Channel.EXTRA_RECVS;
import static io.github.verbs4j.channel.Channel.HEADER;
import static io.github.verbs4j.channel.Channel.IMM_BARE;
import static io.github.verbs4j.channel.Channel.IMM_CONTROL;
import static io.github.verbs4j.channel.Channel.IMM_FIN;
import static io.github.verbs4j.channel.Channel.IMM_WRAP;
import static io.github.verbs4j.channel.Channel.KIND_BITS;
import static io.github.verbs4j.channel.Channel.KIND_RECV;
import static io.github.verbs4j.channel.Channel.LE_INT;
import static io.github.verbs4j.channel.Channel.LE_INT_UNALIGNED;
import static io.github.verbs4j.channel.Channel.RECEIVE_BYTES;
import static io.github.verbs4j.channel.Channel.WORD;

/**
 * The receiving half of a {@link Channel}: the ring the peer writes into, the receives its
 * notifications consume, the parsing of message headers, the queue of delivered messages and
 * their views ({@link Message}), and the count of freed slots that goes back to the peer as
 * credits (docs/channel.md, "The ring" and "Credits").
 *
 * <p>Every field and method is guarded by the channel's monitor: the methods are called with
 * it held, and they wake the channel's waiters through it.
 */
final class ChannelReceiver {

    private final Channel channel;
    private final QueuePair qp;
    final MemoryRegion ring;
    private final MemorySegment ringSegment;
    /** The ring, writable: where slots that came in a SEND are copied to. */
    private final MemorySegment ringWritable;
    final int slots;
    final int slotSize;
    /**
     * One receive per expected notification, each with its own buffer of {@link Channel#RECEIVE_BYTES}
     * in the channel's word region (its start): the word, and the slots a SEND may carry after it.
     */
    final ReceiveRequest[] recvs;
    private final MemorySegment wordsSegment;

    long received;
    long freed;
    long reported;
    private final boolean[] released;
    private final Message[] messages;
    private final int[] delivery;
    /**
     * The delivery queue's ends: written under the channel's lock, volatile so that a thread
     * waiting in {@code receive} can spin on them outside it ({@link #mayHaveMessage()}).
     */
    volatile long deliveryHead;
    volatile long deliveryTail;
    long receivedMessages;
    /** Data SENDs that carried slots (all of them, or their head: copied into the ring here), for the tests that count them. */
    long carriedReceives;
    /** Messages that came without their header ({@link Channel#IMM_BARE}), for the tests that count them. */
    long bareReceives;
    boolean finReceived;

    ChannelReceiver(Channel channel, QueuePair qp, MemoryRegion ring, MemoryRegion words, ChannelOptions options) {
        this.channel = channel;
        this.qp = qp;
        this.ring = ring;
        this.ringWritable = ring.segment();
        this.ringSegment = ringWritable.asReadOnly();
        this.slots = options.slots();
        this.slotSize = options.slotSize();
        this.released = new boolean[slots];
        this.messages = new Message[slots];
        for (int i = 0; i < slots; i++) {
            messages[i] = new Message(channel, ringSegment, i);
        }
        this.delivery = new int[slots];
        this.wordsSegment = words.segment();
        this.recvs = new ReceiveRequest[receiveCount(slots)];
        for (int i = 0; i < recvs.length; i++) {
            recvs[i] = ReceiveRequest.withMaxSge(1).local(words, (long) i * RECEIVE_BYTES, RECEIVE_BYTES)
                    .id(channel.wrId(KIND_RECV | ((long) i << KIND_BITS)));
        }
    }

    /** Receives a channel keeps posted: one per slot of its ring (each WRITE carries at least one) and some for control words. */
    static int receiveCount(int slots) {
        return slots + EXTRA_RECVS;
    }

    /** Posts the receives the peer's WRITE_WITH_IMMs consume (one each): the ring's slots and some for control words. */
    void postInitialReceives() {
        for (ReceiveRequest r : recvs) {
            qp.postRecv(r);
        }
    }

    /** Whether a delivered message waits to be handed out. */
    boolean hasMessage() {
        return deliveryHead != deliveryTail;
    }

    /**
     * Whether a delivered message may wait, read without the lock (two volatile reads): a hint
     * for a spinning receiver, which then takes the lock and looks with {@link #hasMessage()}.
     */
    boolean mayHaveMessage() {
        return deliveryHead != deliveryTail;
    }

    /** Hands out the next delivered message; call only when {@link #hasMessage()}. */
    Message next() {
        long head = deliveryHead;
        int slot = delivery[(int) (head % slots)];
        deliveryHead = head + 1;
        Message m = messages[slot];
        m.open = true;
        return m;
    }

    void release(Message m) {
        if (!m.open) {
            return;
        }
        m.open = false;
        int base = m.slot;
        for (int i = 0; i < m.slotCount; i++) {
            released[base + i] = true;
        }
        advanceFreed();
    }

    private void advanceFreed() {
        while (freed < received && released[(int) (freed % slots)]) {
            released[(int) (freed % slots)] = false;
            freed++;
        }
        channel.sender.maybeSendCredit();
    }

    /**
     * A receive completed (successfully): reads its notification word (the immediate, or the
     * SEND's payload), copies the slots a SEND carried after its word into the ring, posts the
     * receive again, and applies the word (credits, the FIN, data).
     */
    void onReceive(Completion wc, long low) {
        int index = (int) (low >>> KIND_BITS);
        if (index >= recvs.length) {
            channel.fail(new PeerLostException("a receive completed with the unknown index " + index, null));
            return;
        }
        int imm;
        int bareLength = -1; // a bare message's length: the byte count of the WRITE that carried it
        long buffer = (long) index * RECEIVE_BYTES;
        if (wc.hasImmediate()) {
            imm = wc.immediate();
            bareLength = wc.byteLength();
        } else if (wc.byteLength() >= WORD) {
            // a SEND of the word (transports without immediate data), maybe with the head of the
            // slots it announces: read before the buffer is posted again
            imm = wordsSegment.get(LE_INT, buffer);
            int carried = wc.byteLength() - WORD;
            if (carried > 0 && !placeCarried(imm, buffer + WORD, carried)) {
                return;
            }
        } else {
            channel.fail(new PeerLostException("protocol error: the peer sent " + wc.byteLength()
                    + " bytes without immediate data; a channel's notification is a " + WORD + "-byte word", null));
            return;
        }
        if (!channel.state.isClosed() && !channel.peerDisconnected) {
            int rc = qp.tryPostRecv(recvs[index]);
            if (rc != 0) {
                channel.fail(new PeerLostException("reposting a receive on " + qp + " failed",
                        new VerbsException("ibv_post_recv", rc, "on " + qp)));
                return;
            }
        }
        if ((imm & IMM_CONTROL) != 0) {
            if (channel.sender.applyCredit(imm)) {
                channel.wakeWaiters();
            }
            if ((imm & IMM_FIN) != 0) {
                finReceived = true;
                channel.notifyAll();
            }
        } else if (finReceived) {
            return;
        } else if ((imm & IMM_BARE) != 0) {
            onBare(imm, bareLength);
        } else {
            onData(imm);
        }
    }

    /**
     * A SEND carried the head of the slots its data word announces ({@code bytes}, at {@code from}
     * in the word region; a WRITE placed the rest before it): copies it where the WRITE would have
     * placed it, the start of the ring's next slot (slot 0 when the word says the ring wrapped),
     * before {@link #onData} parses the slots. Fails the channel (and returns {@code false}) for a
     * control word with bytes, or more bytes than the announced slots hold.
     */
    private boolean placeCarried(int imm, long from, int bytes) {
        int n = imm & COUNT_MASK;
        int at = (imm & IMM_WRAP) != 0 ? 0 : (int) (received % slots);
        if ((imm & IMM_CONTROL) != 0 || n == 0 || at + (long) n > slots || bytes > (long) n * slotSize) {
            channel.fail(new PeerLostException("protocol error: the peer sent " + bytes + " bytes with the word 0x"
                    + Integer.toHexString(imm) + " at slot " + at + " of a ring of " + slots + " slots of " + slotSize, null));
            return false;
        }
        if (!finReceived) {
            MemorySegment.copy(wordsSegment, from, ringWritable, (long) at * slotSize, bytes);
            carriedReceives++;
        }
        return true;
    }

    /** When the word says the ring wrapped: the slots up to its end were skipped, and are free at once. */
    private void skipIfWrapped(int imm) {
        if ((imm & IMM_WRAP) != 0) {
            int at = (int) (received % slots);
            if (at != 0) {
                for (int i = at; i < slots; i++) {
                    released[i] = true;
                }
                received += slots - at;
            }
        }
    }

    /**
     * One message without its header landed (after a skip to slot 0 when wrapped): {@code length}
     * bytes from the start of the next slot, the WRITE's byte count (-1: it came by SEND, which
     * never carries one), and the peer's credit report in the word's low 29 bits.
     */
    private void onBare(int imm, int length) {
        skipIfWrapped(imm);
        int slot = (int) (received % slots);
        long k = (length + (long) HEADER + slotSize - 1) / slotSize;
        if (length < 0 || slot + k > slots) {
            channel.fail(new PeerLostException("protocol error: a message without a header of " + length
                    + " bytes at slot " + slot + " of a ring of " + slots + " slots of " + slotSize, null));
            return;
        }
        channel.sender.applyCredit(imm & BARE_CREDIT_MASK, BARE_CREDIT_MASK); // the wake-up below covers the credits too
        long tail = deliveryTail;
        land(slot, (long) slot * slotSize, length, (int) k, tail);
        received += k;
        bareReceives++;
        deliveryTail = tail + 1; // publishes the message (and its delivery entry) to a spinning receiver
        advanceFreed();
        channel.wakeWaiters();
    }

    /**
     * The message of {@code length} bytes at {@code offset} in the ring, in {@code slotCount} slots
     * from {@code slot}: its view set and its delivery entry at {@code tail}, published when the
     * caller advances {@code deliveryTail} past it.
     */
    private void land(int slot, long offset, int length, int slotCount, long tail) {
        Message m = messages[slot];
        m.offset = offset;
        m.length = length;
        m.slotCount = slotCount;
        m.open = false;
        m.sequence = receivedMessages++;
        delivery[(int) (tail % slots)] = slot;
    }

    /** Data landed: parse the headers of {@code n} slots (after a skip to slot 0 when wrapped). */
    private void onData(int imm) {
        int n = imm & COUNT_MASK;
        skipIfWrapped(imm);
        long end = received + n;
        long tail = deliveryTail;
        if (n == 0 || n > slots || (received % slots) + n > slots) {
            channel.fail(new PeerLostException("protocol error: the peer wrote " + n + " slots at slot " + (received % slots)
                    + " of a ring of " + slots, null));
            return;
        }
        while (received < end) {
            int slot = (int) (received % slots);
            long offset = (long) slot * slotSize;
            int length = ringSegment.get(LE_INT_UNALIGNED, offset);
            int credit = ringSegment.get(LE_INT_UNALIGNED, offset + 4);
            long k = (length + (long) HEADER + slotSize - 1) / slotSize;
            if (length < 0 || k > end - received) {
                deliveryTail = tail; // the messages before this one were whole: they are delivered
                channel.fail(new PeerLostException("protocol error: a message of " + length + " bytes at slot " + slot
                        + " does not fit the " + (end - received) + " slots written", null));
                return;
            }
            channel.sender.applyCredit(credit); // the wake-up below covers the credits too
            land(slot, offset + HEADER, length, (int) k, tail);
            tail++;
            received += k;
        }
        deliveryTail = tail; // publishes the messages (and the delivery entries before it) to a spinning receiver
        advanceFreed();
        channel.wakeWaiters();
    }
}
