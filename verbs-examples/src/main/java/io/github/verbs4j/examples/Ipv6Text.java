package io.github.verbs4j.examples;

/**
 * GIDs as text the way rdma-core's tools print them ({@code inet_ntop(AF_INET6, ...)} of glibc):
 * lower-case groups without leading zeros, the longest run of two or more zero groups (the
 * first of equal runs) written {@code ::}, and {@code ::ffff:a.b.c.d} / {@code ::a.b.c.d} for
 * IPv4-mapped and IPv4-compatible addresses. {@link java.net.Inet6Address} prints differently
 * (no compression, IPv4 forms unwrapped), so the tools format GIDs here.
 */
final class Ipv6Text {

    private Ipv6Text() {
    }

    static String format(byte[] gid) {
        if (gid.length != 16) {
            throw new IllegalArgumentException("a GID has 16 bytes, got " + gid.length);
        }
        int[] words = new int[8];
        for (int i = 0; i < 8; i++) {
            words[i] = ((gid[2 * i] & 0xff) << 8) | (gid[2 * i + 1] & 0xff);
        }
        int bestBase = -1;
        int bestLen = 0;
        int curBase = -1;
        int curLen = 0;
        for (int i = 0; i < 8; i++) {
            if (words[i] == 0) {
                if (curBase < 0) {
                    curBase = i;
                    curLen = 1;
                } else {
                    curLen++;
                }
            } else if (curBase >= 0) {
                if (curLen > bestLen) {
                    bestBase = curBase;
                    bestLen = curLen;
                }
                curBase = -1;
            }
        }
        if (curBase >= 0 && curLen > bestLen) {
            bestBase = curBase;
            bestLen = curLen;
        }
        if (bestLen < 2) {
            bestBase = -1;
        }
        StringBuilder sb = new StringBuilder(46);
        for (int i = 0; i < 8; i++) {
            if (bestBase >= 0 && i >= bestBase && i < bestBase + bestLen) {
                if (i == bestBase) {
                    sb.append(':');
                }
                continue;
            }
            if (i != 0) {
                sb.append(':');
            }
            // the embedded IPv4 forms glibc recognises: ::a.b.c.d and ::ffff:a.b.c.d
            if (i == 6 && bestBase == 0 && (bestLen == 6 || (bestLen == 5 && words[5] == 0xffff))) {
                sb.append(gid[12] & 0xff).append('.').append(gid[13] & 0xff).append('.')
                        .append(gid[14] & 0xff).append('.').append(gid[15] & 0xff);
                return sb.toString();
            }
            sb.append(Integer.toHexString(words[i]));
        }
        if (bestBase >= 0 && bestBase + bestLen == 8) {
            sb.append(':');
        }
        return sb.toString();
    }
}
