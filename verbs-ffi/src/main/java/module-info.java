/**
 * verbs4j's native layer: the jextract bindings of {@code <infiniband/verbs.h>} and
 * {@code <rdma/rdma_cma.h>} ({@code io.github.verbs4j.ffi}, generated, never edited) and the one
 * hand-written raw package beside them ({@code io.github.verbs4j.raw}: library loading, errno
 * capture, the provider's function pointers, {@code poll(2)}, socket addresses).
 *
 * <p>Nothing here is API: both packages are exported only to verbs4j's own modules. Applications
 * use {@code io.github.verbs4j} and {@code io.github.verbs4j.cm}. The generated package is exported
 * to no module: core and cm reach native layout through raw's struct codecs and layouts, and the
 * compiler keeps it that way (a new struct gets its codec in raw first).
 */
module io.github.verbs4j.ffi {
    exports io.github.verbs4j.raw to io.github.verbs4j.core, io.github.verbs4j.cm, io.github.verbs4j.test;
}
