package quickstart;

import io.github.verbs4j.Access;
import io.github.verbs4j.Completion;
import io.github.verbs4j.CompletionQueue;
import io.github.verbs4j.Completions;
import io.github.verbs4j.Context;
import io.github.verbs4j.Endpoint;
import io.github.verbs4j.MemoryRegion;
import io.github.verbs4j.ProtectionDomain;
import io.github.verbs4j.QpType;
import io.github.verbs4j.QueuePair;
import io.github.verbs4j.RemoteBuffer;
import io.github.verbs4j.SendRequest;
import io.github.verbs4j.Verbs;

import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * An RDMA WRITE between two processes. This process (the target) registers a buffer, starts a
 * second JVM (the writer), and the two exchange their queue pairs' endpoints and the buffer's
 * address and key over a TCP socket on the loopback interface; the writer then writes a line into
 * the target's memory with one RDMA WRITE, and the target prints it. Run it with
 * {@code -Dverbs4j.substrate=softrdma} and the verbs4j-softrdma jar on the class path
 * ({@code mvn exec:exec} does both).
 */
public final class Quickstart {

    public static void main(String[] args) throws Exception {
        if (args.length == 2 && args[0].equals("--writer")) {
            writer(Integer.parseInt(args[1]));
        } else {
            System.out.println("target received: " + target());
        }
    }

    /** Starts the writer process, lets it write into a local buffer, returns what it wrote. */
    public static String target() throws Exception {
        try (ServerSocket listener = new ServerSocket(0, 1, InetAddress.getLoopbackAddress()); // any free port
             Context ctx = Verbs.openFirst();
             ProtectionDomain pd = ctx.allocatePd();
             CompletionQueue cq = ctx.createCq(16);
             QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build();
             MemoryRegion buffer = pd.allocate(4096, Access.LOCAL_WRITE, Access.REMOTE_WRITE)) {
            Process writer = startWriter(listener.getLocalPort());
            try (Socket s = listener.accept();
                 DataInputStream in = new DataInputStream(s.getInputStream());
                 DataOutputStream out = new DataOutputStream(s.getOutputStream())) {
                out.write(qp.endpoint().toBytes());
                out.write(buffer.remote().toBytes());
                out.flush();
                qp.connect(Endpoint.fromBytes(in.readNBytes(Endpoint.BYTES)));
                out.write(1); // connected: the writer may write
                out.flush();
                if (in.read() != 1) {
                    throw new IllegalStateException("the writer did not finish its RDMA WRITE");
                }
            }
            if (!writer.waitFor(60, TimeUnit.SECONDS) || writer.exitValue() != 0) {
                throw new IllegalStateException("the writer process failed");
            }
            return buffer.segment().getString(0);
        }
    }

    /** The second process: connects to the target's queue pair and writes one line into its buffer. */
    static void writer(int port) throws Exception {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port);
             DataInputStream in = new DataInputStream(s.getInputStream());
             DataOutputStream out = new DataOutputStream(s.getOutputStream());
             Context ctx = Verbs.openFirst();
             ProtectionDomain pd = ctx.allocatePd();
             // confined: this thread alone posts, polls and closes them (verbs4j's guide, "8.1
             // Confining a queue pair and its queues")
             CompletionQueue cq = ctx.createCq(16).confine();
             QueuePair qp = pd.queuePair(QpType.RC).cq(cq).build().confine();
             MemoryRegion source = pd.allocate(4096, Access.LOCAL_WRITE)) {
            Endpoint target = Endpoint.fromBytes(in.readNBytes(Endpoint.BYTES));
            RemoteBuffer remote = RemoteBuffer.fromBytes(in.readNBytes(RemoteBuffer.BYTES));
            qp.connect(target);
            out.write(qp.endpoint().toBytes());
            out.flush();
            if (in.read() != 1) {
                throw new IllegalStateException("the target did not connect");
            }
            String line = "hello from process " + ProcessHandle.current().pid();
            source.segment().setString(0, line);
            qp.postSend(SendRequest.rdmaWrite().id(1).local(source, 0, line.length() + 1).remote(remote).signaled());
            Completions wcs = new Completions(1);
            while (cq.poll(wcs) == 0) {
                Thread.onSpinWait();
            }
            Completion wc = wcs.get(0);
            if (!wc.ok()) {
                throw wc.error();
            }
            System.out.println("writer: " + wc);
            out.write(1);
            out.flush();
        }
    }

    private static Process startWriter(int port) throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process writer = new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED",
                "-Dverbs4j.substrate=softrdma", "-cp", System.getProperty("java.class.path"),
                Quickstart.class.getName(), "--writer", Integer.toString(port)).redirectErrorStream(true).start();
        Thread.ofVirtual().start(() -> { // its output, through this process's System.out
            try {
                writer.getInputStream().transferTo(System.out);
            } catch (java.io.IOException ignored) {
                // the writer is gone
            }
        });
        return writer;
    }
}
