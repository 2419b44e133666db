package io.github.verbs4j.testsupport;

import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Endpoint;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.QueuePairBuilder;

import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;

/**
 * RC queue pairs connected by hand, in pairs, on one protection domain: each of {@link #qps()}
 * on the caller's completion queue, 256 sends deep, connected to one of {@link #peers()} on a
 * completion queue of the pairs' own ({@link #peerCq()}, 64 entries). The setup of the races that
 * close several QPs of one CQ under posting and polling threads: verbs-core's
 * {@code CloseRaceTest} (classic and extended) and {@code ConfinementTest} (the race on confined
 * objects). The caller closes its QPs and its CQ (that is the race), then {@link #closePeers()}.
 * Connecting by hand needs a device that allows it (not iWARP: the tests assume that first).
 */
public record ConnectedPairs(List<QueuePair> qps, List<QueuePair> peers, CompletionQueue peerCq) {

    /** {@code count} pairs, each caller's QP built as {@code pd.queuePair(RC).cq(cq).maxSendWr(256)}. */
    public static ConnectedPairs rc(ProtectionDomain pd, CompletionQueue cq, int count) {
        return rc(pd, cq, count, UnaryOperator.identity());
    }

    /** As {@link #rc(ProtectionDomain, CompletionQueue, int)}, each caller's QP's builder passed through {@code shape} last. */
    public static ConnectedPairs rc(ProtectionDomain pd, CompletionQueue cq, int count,
            UnaryOperator<QueuePairBuilder> shape) {
        CompletionQueue peerCq = pd.context().createCq(64);
        List<QueuePair> qps = new ArrayList<>();
        List<QueuePair> peers = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            QueuePair a = shape.apply(pd.queuePair(QpType.RC).cq(cq).maxSendWr(256)).build();
            QueuePair b = pd.queuePair(QpType.RC).cq(peerCq).build();
            Endpoint ea = a.endpoint();
            a.connect(b.endpoint());
            b.connect(ea);
            qps.add(a);
            peers.add(b);
        }
        return new ConnectedPairs(List.copyOf(qps), List.copyOf(peers), peerCq);
    }

    /** Closes the peers, then their completion queue. */
    public void closePeers() {
        for (QueuePair b : peers) {
            b.close();
        }
        peerCq.close();
    }
}
