/**
 * verbs4j channel: reliable, ordered messages over RC queue pairs, written with RDMA
 * WRITE_WITH_IMM into a ring of slots on the receiver, with credit-based flow control.
 */
module io.github.verbs4j.channel {
    requires transitive io.github.verbs4j.cm;
    requires transitive io.github.verbs4j.core;
    exports io.github.verbs4j.channel;
}
