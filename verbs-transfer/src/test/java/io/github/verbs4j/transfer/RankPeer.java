package io.github.verbs4j.transfer;

import io.github.verbs4j.transfer.collective.Ring;

import java.net.InetSocketAddress;

/**
 * A rank of {@link RingProcessTest} in a JVM of its own: joins the ring, runs the collectives on
 * its deterministic input and checks every element against the reference computed here, in Java;
 * prints {@code OK <rank>} or the first wrong element. With a sixth argument {@code hold} it prints
 * {@code JOINED <rank>} once in the ring and waits for a line on its input first (the test that
 * kills a neighbour).
 */
public final class RankPeer {

    private RankPeer() {
    }

    public static void main(String[] args) throws Exception {
        int rank = Integer.parseInt(args[0]);
        int size = Integer.parseInt(args[1]);
        InetSocketAddress rendezvous = new InetSocketAddress(args[2], Integer.parseInt(args[3]));
        int count = Integer.parseInt(args[4]);
        boolean hold = args.length > 5 && args[5].equals("hold");
        try (Ring ring = Ring.join(rendezvous, rank, size, TestNet.ring(count * 8L, TestNet.WAIT))) {
            if (hold) {
                // a neighbour that joined and then takes no part until killed (or told to go on)
                System.out.println("JOINED " + rank);
                new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            }
            System.out.println(run(ring, count));
        }
    }

    /** Float input of rank {@code r}: small integers, so the sum is exact in any order. */
    static float floatInput(int r, int i) {
        return (float) ((i * 7L + r * 13L) % 1000) - 300f;
    }

    static long longInput(int r, int i) {
        return i * 1_000_003L - r * (1L << 40) + (long) r * i;
    }

    /** The collectives of the test, each checked element by element; "OK rank" or what differed. */
    static String run(Ring ring, int count) {
        int size = ring.size();
        int rank = ring.rank();
        for (int round = 0; round < 2; round++) {
            float[] f = new float[count];
            long[] l = new long[count];
            for (int i = 0; i < count; i++) {
                f[i] = floatInput(rank, i) + round;
                l[i] = longInput(rank, i) + round;
            }
            ring.allreduce(f);
            ring.allreduce(l);
            for (int i = 0; i < count; i++) {
                float fe = 0;
                long le = 0;
                for (int r = 0; r < size; r++) {
                    fe += floatInput(r, i) + round;
                    le += longInput(r, i) + round;
                }
                if (Float.floatToRawIntBits(f[i]) != Float.floatToRawIntBits(fe)) {
                    return "FLOAT " + rank + " round " + round + " element " + i + ": " + f[i] + " != " + fe;
                }
                if (l[i] != le) {
                    return "LONG " + rank + " round " + round + " element " + i + ": " + l[i] + " != " + le;
                }
            }
        }
        int root = size - 2;
        long[] b = new long[count];
        for (int i = 0; i < count; i++) {
            b[i] = rank == root ? i * 31L + 5 : -1;
        }
        ring.broadcast(b, root);
        for (int i = 0; i < count; i++) {
            if (b[i] != i * 31L + 5) {
                return "BCAST " + rank + " element " + i + ": " + b[i];
            }
        }
        return "OK " + rank;
    }
}
