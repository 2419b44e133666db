package io.github.verbs4j;

/**
 * Linux {@code errno} values that rdma-core's verbs and librdmacm report, by name: the error
 * contract of verbs4j. {@link VerbsException#error()} and the return value of the
 * {@code tryPost*} methods are compared against these, never against bare numbers:
 *
 * <pre>{@code
 * int rc = qp.tryPostSend(request);
 * if (rc == Errno.ENOMEM.code()) { ... the send queue is full: poll, then post again ... }
 *
 * try { qp.modify(...); } catch (VerbsException e) { if (e.is(Errno.EINVAL)) ... }
 * }</pre>
 *
 * <p>The numbers are those of every Linux architecture verbs4j runs on (x86-64, aarch64 share
 * the generic table). Numbers not listed here still reach the caller as
 * {@link VerbsException#errno()}; {@link #of(int)} returns {@code null} for them.
 */
public enum Errno {

    /** Operation not permitted (1). */
    EPERM(1, "Operation not permitted"),
    /** No such file or directory (2). */
    ENOENT(2, "No such file or directory"),
    /** No such process (3). */
    ESRCH(3, "No such process"),
    /** Interrupted system call (4). */
    EINTR(4, "Interrupted system call"),
    /** Input/output error (5). */
    EIO(5, "Input/output error"),
    /** No such device or address (6). */
    ENXIO(6, "No such device or address"),
    /** Argument list too long (7). */
    E2BIG(7, "Argument list too long"),
    /** Bad file descriptor (9). */
    EBADF(9, "Bad file descriptor"),
    /** Resource temporarily unavailable (11). */
    EAGAIN(11, "Resource temporarily unavailable"),
    /** Cannot allocate memory (12). */
    ENOMEM(12, "Cannot allocate memory"),
    /** Permission denied (13). */
    EACCES(13, "Permission denied"),
    /** Bad address (14). */
    EFAULT(14, "Bad address"),
    /** Device or resource busy (16). */
    EBUSY(16, "Device or resource busy"),
    /** File exists (17). */
    EEXIST(17, "File exists"),
    /** No such device (19). */
    ENODEV(19, "No such device"),
    /** Invalid argument (22). */
    EINVAL(22, "Invalid argument"),
    /** Too many open files (24). */
    EMFILE(24, "Too many open files"),
    /** No space left on device (28). */
    ENOSPC(28, "No space left on device"),
    /** Broken pipe (32). */
    EPIPE(32, "Broken pipe"),
    /** Numerical result out of range (34). */
    ERANGE(34, "Numerical result out of range"),
    /** Function not implemented (38). */
    ENOSYS(38, "Function not implemented"),
    /** No data available (61). */
    ENODATA(61, "No data available"),
    /** Timer expired (62). */
    ETIME(62, "Timer expired"),
    /** Protocol error (71). */
    EPROTO(71, "Protocol error"),
    /** Value too large for defined data type (75). */
    EOVERFLOW(75, "Value too large for defined data type"),
    /** Protocol not supported (93). */
    EPROTONOSUPPORT(93, "Protocol not supported"),
    /** Operation not supported (95). */
    EOPNOTSUPP(95, "Operation not supported"),
    /** Address family not supported by protocol (97). */
    EAFNOSUPPORT(97, "Address family not supported by protocol"),
    /** Address already in use (98). */
    EADDRINUSE(98, "Address already in use"),
    /** Cannot assign requested address (99). */
    EADDRNOTAVAIL(99, "Cannot assign requested address"),
    /** Network is down (100). */
    ENETDOWN(100, "Network is down"),
    /** Network is unreachable (101). */
    ENETUNREACH(101, "Network is unreachable"),
    /** Software caused connection abort (103). */
    ECONNABORTED(103, "Software caused connection abort"),
    /** Connection reset by peer (104). */
    ECONNRESET(104, "Connection reset by peer"),
    /** Transport endpoint is not connected (107). */
    ENOTCONN(107, "Transport endpoint is not connected"),
    /** Connection timed out (110). */
    ETIMEDOUT(110, "Connection timed out"),
    /** Connection refused (111). */
    ECONNREFUSED(111, "Connection refused"),
    /** No route to host (113). */
    EHOSTUNREACH(113, "No route to host"),
    /** Operation already in progress (114). */
    EALREADY(114, "Operation already in progress"),
    /** Operation now in progress (115). */
    EINPROGRESS(115, "Operation now in progress"),
    /** Operation canceled (125). */
    ECANCELED(125, "Operation canceled");

    private static final Errno[] BY_CODE = new Errno[134];

    static {
        for (Errno e : values()) {
            BY_CODE[e.code] = e;
        }
    }

    private final int code;
    private final String description;

    Errno(int code, String description) {
        this.code = code;
        this.description = description;
    }

    /** The number, e.g. 12 for {@link #ENOMEM}. */
    public int code() {
        return code;
    }

    /** The C library's message, e.g. {@code "Cannot allocate memory"}. */
    public String description() {
        return description;
    }

    /** Whether {@code code} is this error's number. */
    public boolean is(int code) {
        return this.code == code;
    }

    /** The constant for {@code code}, or {@code null} when it is 0 or not listed here. */
    public static Errno of(int code) {
        return code > 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }

    /** The symbolic name, e.g. {@code "EINVAL"}, or {@code "errno 200"} for numbers not listed. */
    public static String name(int code) {
        Errno e = of(code);
        return e != null ? e.name() : "errno " + code;
    }

    /** The C library's message for {@code code}, or {@code "Unknown error N"}. */
    public static String message(int code) {
        Errno e = of(code);
        return e != null ? e.description : "Unknown error " + code;
    }

    /** {@code "EINVAL (22, Invalid argument)"}. */
    public static String describe(int code) {
        return name(code) + " (" + code + ", " + message(code) + ")";
    }
}
