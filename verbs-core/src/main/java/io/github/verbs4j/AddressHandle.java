package io.github.verbs4j;

import io.github.verbs4j.internal.Lifecycle;
import io.github.verbs4j.raw.Downcalls;
import io.github.verbs4j.raw.VerbsFunctions;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * An address handle ({@code struct ibv_ah}): the destination of UD sends, named per request
 * with {@link SendRequest#ud(AddressHandle, int, int)}.
 *
 * <p><b>Lifecycle</b>: {@link #close()} ({@code ibv_destroy_ah}) is idempotent; posting a request
 * that names a closed handle throws {@link IllegalStateException}.
 *
 * <p><b>Thread-safety</b>: thread-safe; close must not race with posts using it.
 */
public final class AddressHandle implements AutoCloseable {

    final ProtectionDomain pd;
    final MemorySegment ah;
    final Lifecycle life = new Lifecycle();
    private final String description;

    private AddressHandle(ProtectionDomain pd, MemorySegment ah, String description) {
        this.pd = pd;
        this.ah = ah;
        this.description = description;
    }

    static AddressHandle create(ProtectionDomain pd, AddressVector address) {
        address.validate(pd.context, "ibv_create_ah");
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment attr = address.ahAttr().write(arena);
            MemorySegment ah = (MemorySegment) VerbsFunctions.need(VerbsFunctions.CREATE_AH, "ibv_create_ah").invokeExact(errno, pd.pd, attr);
            if (Downcalls.isNull(ah)) {
                throw new VerbsException("ibv_create_ah", Downcalls.errno(errno), address.toString());
            }
            return new AddressHandle(pd, ah, address.toString());
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_ah", t);
        }
    }

    static AddressHandle fromCompletion(ProtectionDomain pd, Completion wc, MemorySegment grh, int port) {
        if (!wc.ok()) {
            throw new IllegalArgumentException("cannot reply to a failed completion: " + wc);
        }
        if (!wc.hasGrh()) {
            throw new IllegalArgumentException("the completion carries no GRH (IBV_WC_GRH): " + wc);
        }
        if (grh.byteSize() < GRH_BYTES) {
            throw new IllegalArgumentException("the GRH is the first " + GRH_BYTES + " bytes of the receive buffer; got "
                    + grh.byteSize() + " bytes");
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment errno = Downcalls.errnoSegment(arena);
            MemorySegment ah = (MemorySegment) VerbsFunctions.need(VerbsFunctions.CREATE_AH_FROM_WC, "ibv_create_ah_from_wc")
                    .invokeExact(errno, pd.pd, wc.slot(), grh, (byte) port);
            if (Downcalls.isNull(ah)) {
                throw new VerbsException("ibv_create_ah_from_wc", Downcalls.errno(errno), "reply to QP 0x"
                        + Integer.toHexString(wc.sourceQp()));
            }
            return new AddressHandle(pd, ah, "reply to QP 0x" + Integer.toHexString(wc.sourceQp()));
        } catch (Throwable t) {
            throw Downcalls.unexpected("ibv_create_ah_from_wc", t);
        }
    }

    /** Size of the global route header a UD receive starts with. */
    static final int GRH_BYTES = 40;

    /** The protection domain the handle belongs to. */
    public ProtectionDomain protectionDomain() {
        return pd;
    }

    /**
     * Destroys the handle ({@code ibv_destroy_ah}). Idempotent.
     *
     * <p><b>Errors</b>: {@link VerbsException} with the provider's errno.
     */
    @Override
    public void close() {
        life.close(this, () -> Lifecycle.destroyVerb("ibv_destroy_ah", VerbsFunctions.DESTROY_AH, ah),
                () -> {
                    pd.life.removeDependent(this);
                    // requests checked while the handle was open are checked in full at their next post
                    Validity.advance();
                });
    }

    /** Whether {@link #close()} completed. */
    public boolean isClosed() {
        return life.isClosed();
    }

    @Override
    public String toString() {
        return "AddressHandle[" + description + "]";
    }
}
