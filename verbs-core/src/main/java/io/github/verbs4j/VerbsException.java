package io.github.verbs4j;

/**
 * A verb failed on the control path. Carries the rdma-core function that failed and the
 * {@code errno} it reported, by number and by name, so that
 * {@code ibv_modify_qp failed: EINVAL (22, Invalid argument)} reads like the C program's
 * {@code perror}.
 *
 * <p>Program against {@link #error()} or {@link #is(Errno)}, not the number:
 * {@code catch (VerbsException e) { if (e.is(Errno.EAGAIN)) ... }}.
 *
 * <p>Data-path failures are not exceptions: they are completions with a {@code WcStatus}
 * (see {@code Completion}) or an errno returned by a post.
 */
public class VerbsException extends RdmaException {

    private static final long serialVersionUID = 1L;

    private final String verb;
    private final int errno;

    /**
     * @param verb   the rdma-core function, e.g. {@code "ibv_create_qp"}
     * @param errno  the errno it reported (0 when it reported none)
     * @param detail what verbs4j knows about the cause, or {@code null}
     */
    public VerbsException(String verb, int errno, String detail) {
        super(message(verb, errno, detail));
        this.verb = verb;
        this.errno = errno;
    }

    /**
     * @param verb   the rdma-core function, e.g. {@code "rdma_connect"}
     * @param error  the error it reported
     * @param detail what verbs4j knows about the cause, or {@code null}
     */
    public VerbsException(String verb, Errno error, String detail) {
        this(verb, error.code(), detail);
    }

    /** For subclasses whose message is not "verb failed: errno" ({@link RdmaTimeoutException}). */
    VerbsException(String message, String verb, int errno) {
        super(message);
        this.verb = verb;
        this.errno = errno;
    }

    /**
     * A wait that ran out of time: errno ETIMEDOUT and {@link #verb()} the function waited on, with
     * a message that says what was awaited and for how long (the verb itself did not fail), e.g.
     * {@code timed out after 3000 ms waiting for a message on RdmaConnection[...] (ibv_poll_cq: ETIMEDOUT)}.
     *
     * (An {@link RdmaTimeoutException}: see there for the timeout convention.)
     *
     * @param verb    the function polled or waited on, e.g. {@code "ibv_poll_cq"}
     * @param awaited what did not come, e.g. {@code "a message on RdmaConnection[...]"}
     * @param timeout how long the caller asked to wait
     * @return the exception
     */
    public static RdmaTimeoutException timedOut(String verb, String awaited, java.time.Duration timeout) {
        return new RdmaTimeoutException(verb, awaited, timeout);
    }

    /** An exception for {@code verb} failing with {@code errno}, without further detail. */
    public static VerbsException of(String verb, int errno) {
        return new VerbsException(verb, errno, null);
    }

    private static String message(String verb, int errno, String detail) {
        String base = verb + " failed" + (errno != 0 ? ": " + Errno.describe(errno) : "");
        return detail == null ? base : base + ": " + detail;
    }

    /** The rdma-core function that failed, e.g. {@code "ibv_reg_mr"}; {@code null} only for an {@link RdmaTimeoutException} of a wait of verbs4j's own. */
    public String verb() {
        return verb;
    }

    /** The errno number, e.g. 22; 0 when the verb reported none. */
    public int errno() {
        return errno;
    }

    /**
     * The error as a constant, e.g. {@link Errno#EINVAL}; {@code null} when the verb reported
     * none (0) or a number {@link Errno} does not list (then {@link #errno()} has it).
     */
    public Errno error() {
        return Errno.of(errno);
    }

    /** Whether the verb failed with {@code error}. */
    public boolean is(Errno error) {
        return error.code() == errno;
    }

    /** The errno name, e.g. {@code "EINVAL"}. */
    public String errnoName() {
        return Errno.name(errno);
    }
}
