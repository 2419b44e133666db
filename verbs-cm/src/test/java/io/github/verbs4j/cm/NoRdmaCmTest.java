package io.github.verbs4j.cm;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * On a machine without RDMA, the system's librdmacm refuses an event channel with ENODEV; the
 * exception explains that in a sentence, as the core path does for ibv_get_device_list.
 */
class NoRdmaCmTest {

    @Test
    void eventChannelWithoutAnyRdmaCmExplainsTheCause() throws Exception {
        assumeTrue(!Files.exists(Path.of("/dev/infiniband/rdma_cm")), "this machine has a kernel rdma_cm");
        assumeTrue(Files.exists(Path.of("/usr/lib/x86_64-linux-gnu/librdmacm.so.1"))
                || Files.exists(Path.of("/usr/lib/aarch64-linux-gnu/librdmacm.so.1")), "no system librdmacm");
        ProcessBuilder child = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "--enable-native-access=ALL-UNNAMED", "-Dverbs4j.libibverbs=system", "-Dverbs4j.librdmacm=system",
                "-cp", System.getProperty("java.class.path"), Child.class.getName()).redirectErrorStream(true);
        child.environment().remove("LD_LIBRARY_PATH"); // the tests' softrdma folder: the system's libraries here
        Process p = child.start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        p.waitFor(60, TimeUnit.SECONDS);
        assertEquals("rdma_create_event_channel failed: ENODEV (19, No such device): no RDMA connection manager:"
                + " the kernel has no rdma_cm (no /dev/infiniband/rdma_cm) and no user-space RDMA device such as"
                + " softrdma is loaded (-Dverbs4j.substrate=softrdma)", out);
    }

    /** The child JVM: the system's libraries, one event channel. */
    public static final class Child {
        public static void main(String[] args) {
            try (EventChannel channel = EventChannel.create()) {
                System.out.println("created " + channel);
            } catch (RuntimeException e) {
                System.out.println(e.getMessage());
            }
        }
    }
}
