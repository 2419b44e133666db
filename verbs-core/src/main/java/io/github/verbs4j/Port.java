package io.github.verbs4j;

import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.GidEntryFields;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.net.InetAddress;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

/**
 * A port of an open device: its attributes, GID table and P_Key table. A light handle with no
 * native resource of its own; every query goes to the device. Usable while its {@link Context}
 * is open (after that, {@link IllegalStateException}).
 *
 * <p>Thread-safe.
 */
public final class Port {

    private final Context context;
    private final int number;

    Port(Context context, int number) {
        this.context = context;
        this.number = number;
    }

    /** The port number (from 1). */
    public int number() {
        return number;
    }

    /** The context the port belongs to. */
    public Context context() {
        return context;
    }

    /**
     * Queries the port: {@code verbs_context->query_port} when the library provides it (the
     * extended query rdma-core's {@code ibv_query_port} macro uses), else the compat
     * {@code ibv_query_port} export.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL for a port number the device lacks);
     * {@link IllegalStateException} when the context is closed.
     */
    public PortAttributes query() {
        return context.queryPort(number);
    }

    /**
     * The GID at {@code index}; an empty entry reads as {@link Gid#ZERO} (as {@code ibv_query_gid}
     * reports it). Uses {@code ibv_query_gid_ex} when exported, because it returns its errno
     * (the 4-argument {@code ibv_query_gid} returns -1 without a reliable errno), else
     * {@code ibv_query_gid}.
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL for an index beyond the table or a port the
     * device lacks); {@link IllegalStateException} when the context is closed.
     */
    public Gid gid(int index) {
        context.life.ensureOpen(context);
        if (VerbsFunctions.QUERY_GID_EX != null) {
            try {
                return gidEntry(index).gid();
            } catch (VerbsException e) {
                if (e.is(Errno.ENODATA)) {
                    return Gid.ZERO;
                }
                throw e;
            }
        }
        try {
            return legacyGid(index);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_gid", t);
        }
    }

    /**
     * The GID at {@code index} with its type, port and network interface:
     * {@code ibv_query_gid_ex} when exported (IBVERBS_1.11), else {@code ibv_query_gid} plus the
     * private {@code ibv_query_gid_type}, else the type is {@code null}. Where the extended query
     * answers EOPNOTSUPP (a kernel or provider without GID entries for the port) the GID comes
     * from {@code ibv_query_gid}, with no type and no interface.
     *
     * <p><b>Errors</b>: as {@link #gid(int)}; ENODATA for an empty entry with {@code ibv_query_gid_ex}.
     */
    public GidEntry gidEntry(int index) {
        context.life.ensureOpen(context);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            if (VerbsFunctions.QUERY_GID_EX != null) {
                MemorySegment entry = GidEntryFields.allocate(arena, 1);
                int rc = (int) VerbsFunctions.QUERY_GID_EX.invokeExact(errno, context.ctx, number, index, entry, 0,
                        entry.byteSize());
                int failed = rc == 0 ? 0 : Downcalls.errnoOf(rc, errno);
                if (failed == 0) {
                    return Context.gidEntry(GidEntryFields.read(entry, 0));
                }
                // a port without GID entries for the extended query: read the plain GID
                if (failed != Errno.EOPNOTSUPP.code()) {
                    throw new VerbsException("ibv_query_gid_ex", failed, "port " + number + " index " + index);
                }
                return new GidEntry(index, legacyGid(index), null, number, 0);
            }
            Gid gid = legacyGid(index);
            GidType type = null;
            if (VerbsFunctions.QUERY_GID_TYPE != null) {
                MemorySegment t = arena.allocate(ValueLayout.JAVA_INT);
                int rc = (int) VerbsFunctions.QUERY_GID_TYPE.invokeExact(errno, context.ctx, (byte) number, index, t);
                if (rc == 0) {
                    // enum ibv_gid_type_sysfs: 0 IB or RoCE v1 (by link layer), 1 RoCE v2
                    int sysfs = t.get(ValueLayout.JAVA_INT, 0);
                    type = sysfs == 1 ? GidType.ROCE_V2
                            : query().linkLayer() == LinkLayer.ETHERNET ? GidType.ROCE_V1 : GidType.IB;
                }
            }
            return new GidEntry(index, gid, type, number, 0);
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_gid_ex", t);
        }
    }

    private Gid legacyGid(int index) throws Throwable {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment gid = arena.allocate(16, 8);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.QUERY_GID, "ibv_query_gid").invokeExact(errno, context.ctx, (byte) number, index, gid);
            if (rc != 0) {
                throw new VerbsException("ibv_query_gid", Downcalls.errnoOf(rc, errno), "port " + number + " index " + index);
            }
            return Gid.of(gid.toArray(ValueLayout.JAVA_BYTE));
        }
    }

    /**
     * The non-empty entries of the GID table, in index order. Entries the device reports as
     * empty (all-zero GID, or ENODATA/EINVAL from the query) are skipped.
     */
    public List<GidEntry> gids() {
        int length = query().gidTableLength();
        List<GidEntry> result = new ArrayList<>();
        for (int i = 0; i < length; i++) {
            GidEntry e;
            try {
                e = gidEntry(i);
            } catch (VerbsException ex) {
                if (ex.is(Errno.ENODATA) || ex.is(Errno.EINVAL)) {
                    continue;
                }
                throw ex;
            }
            if (!e.gid().isZero()) {
                result.add(e);
            }
        }
        return List.copyOf(result);
    }

    /**
     * The GID entry for an IP address on a RoCE port: the entry equal to the address's GID
     * (IPv4 mapped into IPv6), preferring RoCE v2 when both versions list it.
     *
     * @throws IllegalArgumentException when no entry holds the address (the message lists the table)
     */
    public GidEntry gidFor(InetAddress address) {
        Gid wanted = Gid.of(address);
        GidEntry best = null;
        List<GidEntry> all = gids();
        for (GidEntry e : all) {
            if (e.gid().equals(wanted) && (best == null || e.type() == GidType.ROCE_V2)) {
                best = e;
            }
        }
        if (best == null) {
            throw new IllegalArgumentException("no GID of port " + number + " of " + context.device().name()
                    + " holds " + address.getHostAddress() + " (table: " + all + ")");
        }
        return best;
    }

    /**
     * The P_Key at {@code index} in host order ({@code ibv_query_pkey}).
     *
     * <p><b>Errors</b>: {@link VerbsException} (EINVAL for an index beyond the table).
     */
    public int pkey(int index) {
        context.life.ensureOpen(context);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment pkey = arena.allocate(ValueLayout.JAVA_SHORT);
            int rc = (int) VerbsFunctions.need(VerbsFunctions.QUERY_PKEY, "ibv_query_pkey").invokeExact(errno, context.ctx, (byte) number, index, pkey);
            if (rc != 0) {
                throw new VerbsException("ibv_query_pkey", Downcalls.errnoOf(rc, errno), "port " + number + " index " + index);
            }
            return Short.toUnsignedInt(pkey.get(ValueLayout.JAVA_SHORT.withOrder(ByteOrder.BIG_ENDIAN), 0)); // __be16
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_query_pkey", t);
        }
    }

    /** The P_Key table (host order), {@code pkey_tbl_len} entries. */
    public List<Integer> pkeys() {
        int length = query().pkeyTableLength();
        List<Integer> result = new ArrayList<>(length);
        for (int i = 0; i < length; i++) {
            result.add(pkey(i));
        }
        return List.copyOf(result);
    }

    @Override
    public String toString() {
        return "Port[" + context.device().name() + ":" + number + "]";
    }
}
