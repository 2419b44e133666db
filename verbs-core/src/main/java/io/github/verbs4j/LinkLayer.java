package io.github.verbs4j;

import io.github.verbs4j.raw.VerbsConstants;

/** The link layer of a port ({@code IBV_LINK_LAYER_*}). */
public enum LinkLayer {
    UNSPECIFIED(VerbsConstants.IBV_LINK_LAYER_UNSPECIFIED),
    INFINIBAND(VerbsConstants.IBV_LINK_LAYER_INFINIBAND),
    /** RoCE: addressing by GID, every QP needs a GRH. */
    ETHERNET(VerbsConstants.IBV_LINK_LAYER_ETHERNET);

    private final int value;

    LinkLayer(int value) {
        this.value = value;
    }

    /** The C value. */
    public int value() {
        return value;
    }

    /** The link layer for a C value; {@link #UNSPECIFIED} (which rdma-core treats as InfiniBand) for others. */
    public static LinkLayer of(int value) {
        for (LinkLayer l : values()) {
            if (l.value == value) {
                return l;
            }
        }
        return UNSPECIFIED;
    }
}
