package io.github.verbs4j;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Constructor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * What verbs4j refuses on a device that reports the iWARP transport, before the provider is
 * asked: UD and UC queue pairs, moving a QP to RTR by hand, atomic and immediate-data opcodes.
 *
 * <p>The first test runs on every substrate: it views the test device through a {@link Context}
 * whose {@link Device} says iWARP (the same native context, borrowed), which is all verbs4j
 * decides from. The second runs only where the device itself reports iWARP (siw0).
 */
class IwarpRefusalTest {

    /** {@code ctx}'s native context seen as a device of transport iWARP; closing it leaves {@code ctx} open. */
    private static Context asIwarp(Context ctx) throws Exception {
        Device d = ctx.device();
        Device iwarp = new Device(d.name(), d.guid(), d.nodeType(), Rig.TRANSPORT_IWARP);
        Constructor<Context> c = Context.class.getDeclaredConstructor(MemorySegment.class, Device.class, boolean.class);
        c.setAccessible(true);
        return c.newInstance(ctx.ctx, iwarp, true);
    }

    @Test
    void aDeviceReportingIwarpRefusesWhatIwarpCannotDo() throws Exception {
        try (Context real = Rig.open(); Context ctx = asIwarp(real); ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue cq = ctx.createCq(8); MemoryRegion mr = pd.allocate(4096)) {
            for (QpType type : new QpType[] {QpType.UD, QpType.UC}) {
                UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
                        () -> pd.queuePair(type).cq(cq).build());
                assertEquals("cannot create a " + type + " queue pair on " + ctx.device().name()
                        + ": iWARP devices support RC queue pairs only", e.getMessage());
            }
            try (QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build();
                 QueuePair peer = pd.queuePair(QpType.RC).cq(cq).build()) {
                assertTrue(qp.iwarp);
                qp.init();
                Endpoint remote = peer.endpoint(1, 0); // GID 0: the only one an iWARP port has
                UnsupportedOperationException rtr = assertThrows(UnsupportedOperationException.class,
                        () -> qp.connect(remote));
                assertTrue(rtr.getMessage().contains("iWARP devices (" + ctx.device().name()
                        + ") connect queue pairs only through rdma_cm"), rtr.getMessage());
                assertEquals(QpState.INIT, qp.trackedState(), "the device was not asked to go to RTR");

                // What a QP connected through rdma_cm would face: pretend RTS (verbs-cm tracks it
                // so); the refusals come before the provider's post_send is called.
                qp.track(QpState.RTS);
                SendRequest[] refused = {
                    SendRequest.fetchAndAdd(1).id(1).local(mr, 0, 8).remote(mr.remote()),
                    SendRequest.compareAndSwap(0, 1).id(2).local(mr, 0, 8).remote(mr.remote()),
                    SendRequest.sendWithImm(7).id(3).local(mr, 0, 8),
                    SendRequest.rdmaWriteWithImm(7).id(4).local(mr, 0, 8).remote(mr.remote()),
                };
                for (SendRequest wr : refused) {
                    UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
                            () -> qp.postSend(wr));
                    String lacks = wr.opcode().name().startsWith("ATOMIC") ? "atomic operations" : "immediate data";
                    assertEquals(wr.opcode() + " cannot be posted to " + qp + ": iWARP devices (" + ctx.device().name()
                            + ") have no " + lacks + " (request " + wr.id() + ")", e.getMessage());
                }
                qp.track(QpState.INIT);
            }
        }
    }

    @Test
    void theSameDeviceReportingItsOwnTransportIsNotRefused() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(8)) {
            assumeTrue(!Rig.iwarp(ctx), () -> ctx.device().name() + " reports the iWARP transport itself");
            try (QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build()) {
                assertFalse(qp.iwarp, "decided from the device's transport, " + ctx.device().transportType());
            }
        }
    }

    @Test
    void aRealIwarpDeviceRefusesUdQueuePairsNamingIwarp() {
        try (Context ctx = Rig.open(); ProtectionDomain pd = ctx.allocatePd(); CompletionQueue cq = ctx.createCq(8)) {
            assumeTrue(Rig.iwarp(ctx), () -> ctx.device().name() + " reports transport "
                    + ctx.device().transportType() + ", not iWARP (1): the iWARP refusals do not apply");
            UnsupportedOperationException e = assertThrows(UnsupportedOperationException.class,
                    () -> pd.queuePair(QpType.UD).cq(cq).build());
            assertTrue(e.getMessage().contains("iWARP devices support RC queue pairs only"), e.getMessage());
        }
    }
}
