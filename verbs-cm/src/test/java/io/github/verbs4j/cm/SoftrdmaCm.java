package io.github.verbs4j.cm;

import java.nio.file.Files;
import java.nio.file.Path;

/** The suites' precondition, checked first so that a missing library fails with its cause. */
final class SoftrdmaCm {

    private SoftrdmaCm() {
    }

    /**
     * When the build selected softrdma's librdmacm (by path, or beside a libibverbs chosen by path),
     * the file must exist: without it librdmacm would be the system's, which needs a kernel
     * rdma_cm this machine may not have.
     */
    static void require() {
        String verbs = System.getProperty("verbs4j.libibverbs");
        String rdmacm = System.getProperty("verbs4j.librdmacm");
        Path file;
        if (rdmacm != null && !rdmacm.isBlank() && !rdmacm.equals("system")) {
            file = Path.of(rdmacm);
        } else if (rdmacm == null && verbs != null && !verbs.equals("system")) {
            file = Path.of(verbs).toAbsolutePath().resolveSibling("librdmacm.so.1");
        } else {
            return;
        }
        if (!Files.isRegularFile(file)) {
            throw new AssertionError("softrdma's librdmacm.so.1 is missing: " + file.toAbsolutePath() + " (the rdma_cm "
                    + "suites run on it; it is built by softrdma/cm's Makefile, which the softrdma module must run)");
        }
    }
}
