package quickstart;

import io.github.verbs4j.*;

/** The README's first program: one RDMA WRITE on softrdma, between two queue pairs of one process. */
public class Hello {
    public static void main(String[] args) {
        Verbs.useSoftRdma(); // softrdma from the verbs4j-softrdma jar; leave out on RDMA hardware
        try (Context ctx = Verbs.openFirst();
             ProtectionDomain pd = ctx.allocatePd();
             // confine(): this thread alone polls, posts and closes them, which makes its calls
             // cheaper (verbs4j's guide: "8.1 Confining a queue pair and its queues")
             CompletionQueue cq = ctx.createCq(16).confine();
             QueuePair a = pd.queuePair(QpType.RC).cq(cq).build().confine();
             QueuePair b = pd.queuePair(QpType.RC).cq(cq).build().confine();
             MemoryRegion src = pd.allocate(64, Access.LOCAL_WRITE);
             MemoryRegion dst = pd.allocate(64, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            a.connect(b.endpoint());
            b.connect(a.endpoint());
            src.segment().setString(0, "hello, RDMA");
            a.postSend(SendRequest.rdmaWrite().local(src, 0, 12).remote(dst.remote()).signaled());
            Completions wcs = new Completions(1);
            while (cq.poll(wcs) == 0) Thread.onSpinWait();
            System.out.println(wcs.get(0).status() + ": " + dst.segment().getString(0));
        }
    }
}
