package io.github.verbs4j.test;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.SendRequest;

import java.lang.foreign.ValueLayout;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.fail;

/** An RC queue pair on each of two contexts, connected, each with a 4 KiB region: one RDMA WRITE across. */
final class Wire implements AutoCloseable {

    final ProtectionDomain pdA;
    final ProtectionDomain pdB;
    final CompletionQueue cqA;
    final CompletionQueue cqB;
    final QueuePair a;
    final QueuePair b;
    final MemoryRegion mrA;
    final MemoryRegion mrB;

    Wire(Context ctx, Context peer) {
        pdA = ctx.allocatePd();
        pdB = peer.allocatePd();
        cqA = ctx.createCq(16);
        cqB = peer.createCq(16);
        a = pdA.queuePair(QpType.RC).cq(cqA).build();
        b = pdB.queuePair(QpType.RC).cq(cqB).build();
        mrA = pdA.allocate(4096, Access.LOCAL_WRITE);
        mrB = pdB.allocate(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE);
        a.connect(b.endpoint());
        b.connect(a.endpoint());
    }

    /** Writes {@code value} from A's region into B's by RDMA WRITE and waits for the completion. */
    void write(long value) {
        mrA.segment().set(ValueLayout.JAVA_LONG, 0, value);
        a.postSend(SendRequest.rdmaWrite().id(value).local(mrA, 0, 8).remote(mrB.remote()).signaled());
        Completions wcs = new Completions(1);
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (cqA.poll(wcs) == 0) {
            if (System.nanoTime() > deadline) {
                fail("no completion of the RDMA WRITE within 10 s");
            }
            Thread.onSpinWait();
        }
        Completion wc = wcs.get(0);
        if (!wc.ok()) {
            throw wc.error();
        }
        assertEquals(value, mrB.segment().get(ValueLayout.JAVA_LONG, 0));
    }

    @Override
    public void close() {
        mrB.close();
        mrA.close();
        b.close();
        a.close();
        cqB.close();
        cqA.close();
        pdB.close();
        pdA.close();
    }
}
