package io.github.verbs4j;

/**
 * What a device that reports the iWARP transport ({@code ibv_device.transport_type}
 * {@code IBV_TRANSPORT_IWARP}, e.g. the kernel's soft-iWARP {@code siw0}) cannot do, refused
 * before the provider is asked, with a message that says why: iWARP queue pairs are RC only
 * (no UD, no UC), are connected only through rdma_cm (never moved to RTR by hand from
 * exchanged QP numbers), and carry neither atomic operations nor immediate data.
 *
 * <p>The decision is taken from the device's reported transport, never from its name, and once
 * per queue pair: {@link QueuePair} keeps the answer in a final field, so the posting path pays
 * one branch on it.
 */
final class Iwarp {

    private Iwarp() {
    }

    /** Whether {@code context}'s device reports the iWARP transport. */
    static boolean is(Context context) {
        return context.device().transport() == TransportType.IWARP;
    }

    /** Refuses a UD or UC queue pair on an iWARP device. */
    static void checkQpType(Context context, QpType type) {
        if (type != QpType.RC && is(context)) {
            throw new UnsupportedOperationException("cannot create a " + type + " queue pair on "
                    + context.device().name() + ": iWARP devices support RC queue pairs only");
        }
    }

    /** The refusal of a hand-made connection (INIT to RTR by {@code ibv_modify_qp}) of {@code qp}. */
    static UnsupportedOperationException handConnect(QueuePair qp, String step) {
        return new UnsupportedOperationException(step + " of " + qp + ": iWARP devices ("
                + qp.pd.context.device().name() + ") connect queue pairs only through rdma_cm"
                + " (verbs4j-cm), not by moving them to RTR by hand");
    }

    /** Whether iWARP lacks {@code opcode}: atomics and the opcodes with immediate data. */
    static boolean lacks(SendOpcode opcode) {
        return opcode.isAtomic() || opcode.hasImmediate();
    }

    /** The refusal of {@code opcode} (one that {@link #lacks}) on {@code qp}. */
    static UnsupportedOperationException opcode(SendOpcode opcode, QueuePair qp, long requestId) {
        return new UnsupportedOperationException(opcode + " cannot be posted to " + qp + ": iWARP devices ("
                + qp.pd.context.device().name() + ") have no "
                + (opcode.isAtomic() ? "atomic operations" : "immediate data") + " (request " + requestId + ")");
    }
}
