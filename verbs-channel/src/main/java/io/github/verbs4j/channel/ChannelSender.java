package io.github.verbs4j.channel;

import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.PeerLostException;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.VerbsException;

import java.lang.foreign.MemorySegment;

import static io.github.verbs4j.channel.Channel.BARE_CREDIT_MASK;
import static io.github.verbs4j.channel.Channel.COUNT_MASK;
import static io.github.verbs4j.channel.Channel.HEADER;
import static io.github.verbs4j.channel.Channel.IMM_BARE;
import static io.github.verbs4j.channel.Channel.IMM_CONTROL;
import static io.github.verbs4j.channel.Channel.IMM_WRAP;
import static io.github.verbs4j.channel.Channel.KIND_CREDIT;
import static io.github.verbs4j.channel.Channel.KIND_DATA;
import static io.github.verbs4j.channel.Channel.KIND_WRITE;
import static io.github.verbs4j.channel.Channel.LE_INT;
import static io.github.verbs4j.channel.Channel.WORD;

/**
 * The sending half of a {@link Channel}: the staging buffer laid out like the peer's ring, the
 * WRITEs (with immediate data, or followed by a SEND of the word) that carry staged slots,
 * coalescing while {@link ChannelOptions#writesInFlight()} WRITEs are outstanding, the credits
 * the peer returns and the credit words this side returns (docs/channel.md, "The ring",
 * "Credits", "Coalescing").
 *
 * <p>Every field and method is guarded by the channel's monitor: the methods are called with
 * it held, and they wake the channel's waiters through it.
 */
final class ChannelSender {

    private final Channel channel;
    private final QueuePair qp;
    final int writesInFlightLimit;
    private final int creditBatch;

    // the peer's ring and the staging buffer that mirrors it (set once, before the channel is published)
    MemoryRegion stage;
    private MemorySegment stageSegment;
    private long peerAddress;
    private int peerRkey;
    int peerSlots;
    int peerSlotSize;
    int maxMessageSlots;

    // notification (docs/channel.md, "Notification without immediate data"): how the words reach the peer
    final boolean sendNotify;
    /** The data WRITE: with immediate, signaled; or plain, unsignaled, followed by {@link #notify}. */
    private final SendRequest write;
    /**
     * With {@link #sendNotify}: the SEND of the word, and after it the head of the staged slots,
     * as much as the peer's receive buffer takes ({@link #carryBytes}); signaled, the data's
     * completion. Posted alone when it carries all the slots, else after {@link #write}, which
     * places the rest (docs/channel.md, "Small messages in the SEND").
     */
    private final SendRequest notify;
    /** Credit words and the FIN: a zero-length WRITE with immediate, or a SEND of the word. */
    private final SendRequest control;
    /** The most staged bytes {@link #notify} carries: the peer's receive buffer less the word (0: it takes words only). */
    private int carryBytes;
    /**
     * Data notifications posted as a lone SEND that carried all their slots ({@code carriedPosts})
     * and with a WRITE, followed by its SEND or with immediate data ({@code writePosts}), for the
     * tests that count them.
     */
    long carriedPosts;
    long writePosts;
    /** Of {@code writePosts}: WRITEs of one message without its header ({@link Channel#IMM_BARE}), for the tests. */
    long barePosts;
    /**
     * Whether a WRITE_WITH_IMM that carries one message goes without its header: immediate data,
     * and a peer that takes it (docs/channel.md, "One message, no header").
     */
    private boolean bare;
    /** Messages staged since the last post: with one, and {@link #bare}, it goes without its header. */
    private int pendingMessages;
    /** The channel's word region: receive buffers, then (with {@link #sendNotify}) a ring of send words; {@code LOCAL_WRITE}. */
    private final MemoryRegion words;
    private final MemorySegment wordsSegment;
    /** Where the send words start in {@link #words}, in words: after the receive buffers. */
    private final int firstSendWord;
    private final int sendWords;
    private long sendWordSeq;

    long filled;
    long posted;
    private long postedEnd;
    private long peerFreed;
    private boolean wrapNext;
    int writesInFlight;
    boolean creditInFlight;
    boolean finPosted;
    boolean finDone;
    long sentMessages;
    /** The one view {@link #stage(MessageWriter, int, int)} hands its writers. */
    private final StagedMessage inPlace = new StagedMessage();

    ChannelSender(Channel channel, QueuePair qp, MemoryRegion words, int receiveWords, boolean sendNotify,
            ChannelOptions options) {
        this.channel = channel;
        this.qp = qp;
        this.writesInFlightLimit = options.writesInFlight();
        this.creditBatch = Math.max(1, options.slots() / 4);
        this.sendNotify = sendNotify;
        this.words = words;
        this.wordsSegment = words.segment();
        this.firstSendWord = receiveWords;
        this.sendWords = (int) (words.length() / WORD) - receiveWords;
        if (sendNotify) {
            this.notify = SendRequest.send().signaled();
            this.write = SendRequest.rdmaWrite().signaled(false).id(channel.wrId(KIND_WRITE)).next(notify);
            this.control = SendRequest.send().signaled();
        } else {
            this.notify = null;
            this.write = SendRequest.rdmaWriteWithImm(0).signaled();
            this.control = SendRequest.rdmaWriteWithImm(0).signaled().sgeCount(0);
        }
    }

    /** The peer's ring from its private data, and the staging buffer that mirrors it. */
    void attach(MemoryRegion s, long address, int rkey, int pSlots, int pSlotSize, int pReceiveBytes, boolean peerTakesBare) {
        this.stage = s;
        this.stageSegment = s.segment();
        this.peerAddress = address;
        this.peerRkey = rkey;
        this.peerSlots = pSlots;
        this.peerSlotSize = pSlotSize;
        this.maxMessageSlots = Math.max(1, pSlots / 4);
        this.carryBytes = pReceiveBytes - WORD;
        this.bare = !sendNotify && peerTakesBare;
        if (!sendNotify) {
            control.remote(address, rkey);
        }
    }

    /**
     * Makes room for a message of {@code k} slots if the peer's credits allow it (posting what
     * is staged before a wrap, and skipping the ring's end): {@code false} when they do not yet.
     */
    boolean reserve(int k) {
        int start = (int) (filled % peerSlots);
        int pad = start + k > peerSlots ? peerSlots - start : 0;
        if (peerSlots - (filled - peerFreed) >= k + pad) {
            if (start == 0 && posted < filled) {
                // the staged slots end at the ring's end: one WRITE cannot go on at slot 0
                postPending();
            }
            if (pad > 0) {
                postPending();
                filled += pad;
                posted = filled;
                wrapNext = true;
            }
            return true;
        }
        return false;
    }

    /** Stages a copy of the message (room reserved) with the header, and posts it unless {@link #writesInFlightLimit} WRITEs are out. */
    void stage(MemorySegment message, long length, int k) {
        long offset = (filled % peerSlots) * peerSlotSize;
        MemorySegment.copy(message, 0, stageSegment, offset + HEADER, length);
        commit(offset, length, k);
    }

    /**
     * Stages a message that {@code writer} writes in place (room reserved): nothing is staged
     * when the writer throws. The header goes in after the writer returned, so that the credit
     * report it carries is taken only for a message that is sent.
     */
    void stage(MessageWriter writer, int length, int k) {
        long offset = (filled % peerSlots) * peerSlotSize;
        inPlace.open(stageSegment, offset + HEADER, length);
        try {
            writer.write(inPlace);
        } finally {
            inPlace.commit();
        }
        commit(offset, length, k);
    }

    /** Whether the current thread is inside a {@link MessageWriter}'s call on this channel. */
    boolean writingInPlace() {
        return inPlace.owner == Thread.currentThread();
    }

    /** The staged message at {@code offset} is complete: its header, then the post (or the coalescing). */
    private void commit(long offset, long length, int k) {
        ChannelReceiver receiver = channel.receiver;
        stageSegment.set(LE_INT, offset, (int) length);
        stageSegment.set(LE_INT, offset + 4, (int) (receiver.freed & COUNT_MASK));
        receiver.reported = receiver.freed;
        filled += k;
        postedEnd = offset + HEADER + length;
        sentMessages++;
        pendingMessages++;
        if (writesInFlight < writesInFlightLimit) {
            postPending();
        }
    }

    /**
     * Posts the staged, not yet posted slots: as one WRITE_WITH_IMM; or, notifying by SEND, as a
     * SEND of the word and the slots' head, after a plain WRITE of the rest when the head is not
     * all of them.
     */
    void postPending() {
        long n = filled - posted;
        if (n == 0) {
            return;
        }
        int start = (int) (posted % peerSlots);
        long startByte = (long) start * peerSlotSize;
        int bytes = (int) (postedEnd - startByte);
        int word = (wrapNext ? IMM_WRAP : 0) | (int) n;
        SendRequest request;
        if (sendNotify) {
            // the SEND goes anyway: it carries what it can of the slots (the receiver copies that
            // into its ring), so a small message needs no WRITE and a larger one a shorter WRITE
            int carried = Math.min(bytes, carryBytes);
            notify.sge(0, words, putSendWord(word), WORD);
            if (carried > 0) {
                notify.sge(1, stage, startByte, carried).sgeCount(2);
            } else {
                notify.sgeCount(1);
            }
            notify.id(channel.wrId(KIND_DATA));
            if (carried == bytes) {
                request = notify;
                carriedPosts++;
            } else {
                request = write.local(stage, startByte + carried, bytes - carried)
                        .remote(peerAddress + startByte + carried, peerRkey);
                writePosts++;
            }
        } else if (bare && pendingMessages == 1 && bytes > HEADER) {
            // one message: its bytes alone, to the start of its slot; the length is the WRITE's
            // byte count at the receiver and the credit report rides in the immediate, so a
            // message of the path MTU is one packet, not a packet and the header's 8 bytes in a second
            int credit = stageSegment.get(LE_INT, startByte + 4) & BARE_CREDIT_MASK;
            request = write.local(stage, startByte + HEADER, bytes - HEADER).remote(peerAddress + startByte, peerRkey)
                    .immediate((wrapNext ? IMM_WRAP : 0) | IMM_BARE | credit).id(channel.wrId(KIND_DATA));
            writePosts++;
            barePosts++;
        } else {
            request = write.local(stage, startByte, bytes).remote(peerAddress + startByte, peerRkey)
                    .immediate(word).id(channel.wrId(KIND_DATA));
            writePosts++;
        }
        int rc = qp.tryPostSend(request);
        if (rc != 0) {
            channel.fail(new PeerLostException("posting " + (request == notify ? "a SEND" : sendNotify ? "an RDMA WRITE and its SEND" : "a WRITE_WITH_IMM")
                    + " of " + n + " slots to " + channel.peerName() + " failed",
                    new VerbsException("ibv_post_send", rc, "on " + qp)));
            throw channel.lost();
        }
        writesInFlight++;
        posted = filled;
        wrapNext = false;
        pendingMessages = 0;
    }

    /** A data WRITE completed: post what was staged meanwhile as one WRITE. */
    void onDataCompleted() {
        writesInFlight--;
        if (posted < filled && channel.failure == null) {
            postPending();
        }
    }

    /** Sends a credit word when enough slots were freed since the last report. */
    void maybeSendCredit() {
        ChannelReceiver receiver = channel.receiver;
        if (!channel.peerReady || creditInFlight || finPosted || channel.released || channel.failure != null
                || channel.peerDisconnected || receiver.freed - receiver.reported < creditBatch) {
            return;
        }
        int rc = postControl(IMM_CONTROL | (int) (receiver.freed & COUNT_MASK), KIND_CREDIT);
        if (rc != 0) {
            channel.fail(new PeerLostException("posting a credit word to " + channel.peerName() + " failed",
                    new VerbsException("ibv_post_send", rc, "on " + qp)));
            return;
        }
        creditInFlight = true;
        receiver.reported = receiver.freed;
    }

    /** Posts a control word (credit counter, FIN) as this channel notifies. */
    int postControl(int word, long kind) {
        if (sendNotify) {
            control.local(words, putSendWord(word), WORD);
        } else {
            control.immediate(word);
        }
        return qp.tryPostSend(control.id(channel.wrId(kind)));
    }

    /** Writes {@code word} into the next send word and returns its offset in {@link #words}. */
    private long putSendWord(int word) {
        long offset = (long) (firstSendWord + (int) (sendWordSeq++ % sendWords)) * WORD;
        wordsSegment.set(LE_INT, offset, word);
        return offset;
    }

    /**
     * A credit counter from the peer: the low 30 bits of how many of its slots it freed.
     * Returns whether it freed more; the caller wakes a sender waiting for them
     * ({@link Channel#wakeWaiters}), once for all that one completion carried.
     */
    boolean applyCredit(int value) {
        return applyCredit(value, COUNT_MASK);
    }

    /** {@link #applyCredit(int)} of a counter's low bits under {@code mask} (30 bits; 29 in an {@link Channel#IMM_BARE} word). */
    boolean applyCredit(int value, int mask) {
        long delta = (value - (int) (peerFreed & mask)) & mask;
        if (delta > 0 && delta <= peerSlots) {
            peerFreed += delta;
            return true;
        }
        return false;
    }
}
