package io.github.verbs4j.internal;

/**
 * Linux {@code errno} values by name (x86-64 and every other Linux architecture verbs4j runs on
 * share these numbers), so errors read {@code ENOMEM (12)} rather than {@code 12}.
 */
public final class Errno {

    public static final int EPERM = 1;
    public static final int ENOENT = 2;
    public static final int EINTR = 4;
    public static final int EIO = 5;
    public static final int EBADF = 9;
    public static final int EAGAIN = 11;
    public static final int ENOMEM = 12;
    public static final int EACCES = 13;
    public static final int EFAULT = 14;
    public static final int EBUSY = 16;
    public static final int EEXIST = 17;
    public static final int ENODEV = 19;
    public static final int EINVAL = 22;
    public static final int ENOSPC = 28;
    public static final int ERANGE = 34;
    public static final int ENOSYS = 38;
    public static final int ENODATA = 61;
    public static final int ETIME = 62;
    public static final int EPROTONOSUPPORT = 93;
    public static final int EOPNOTSUPP = 95;
    public static final int EADDRINUSE = 98;
    public static final int EADDRNOTAVAIL = 99;
    public static final int ENETUNREACH = 101;
    public static final int ECONNABORTED = 103;
    public static final int ECONNRESET = 104;
    public static final int ETIMEDOUT = 110;
    public static final int ECONNREFUSED = 111;
    public static final int EHOSTUNREACH = 113;
    public static final int EALREADY = 114;
    public static final int EINPROGRESS = 115;

    private static final String[] NAMES = new String[134];
    private static final String[] MESSAGES = new String[134];

    static {
        define(1, "EPERM", "Operation not permitted");
        define(2, "ENOENT", "No such file or directory");
        define(3, "ESRCH", "No such process");
        define(4, "EINTR", "Interrupted system call");
        define(5, "EIO", "Input/output error");
        define(6, "ENXIO", "No such device or address");
        define(7, "E2BIG", "Argument list too long");
        define(9, "EBADF", "Bad file descriptor");
        define(11, "EAGAIN", "Resource temporarily unavailable");
        define(12, "ENOMEM", "Cannot allocate memory");
        define(13, "EACCES", "Permission denied");
        define(14, "EFAULT", "Bad address");
        define(16, "EBUSY", "Device or resource busy");
        define(17, "EEXIST", "File exists");
        define(19, "ENODEV", "No such device");
        define(22, "EINVAL", "Invalid argument");
        define(24, "EMFILE", "Too many open files");
        define(28, "ENOSPC", "No space left on device");
        define(32, "EPIPE", "Broken pipe");
        define(34, "ERANGE", "Numerical result out of range");
        define(38, "ENOSYS", "Function not implemented");
        define(61, "ENODATA", "No data available");
        define(62, "ETIME", "Timer expired");
        define(71, "EPROTO", "Protocol error");
        define(75, "EOVERFLOW", "Value too large for defined data type");
        define(93, "EPROTONOSUPPORT", "Protocol not supported");
        define(95, "EOPNOTSUPP", "Operation not supported");
        define(97, "EAFNOSUPPORT", "Address family not supported by protocol");
        define(98, "EADDRINUSE", "Address already in use");
        define(99, "EADDRNOTAVAIL", "Cannot assign requested address");
        define(100, "ENETDOWN", "Network is down");
        define(101, "ENETUNREACH", "Network is unreachable");
        define(103, "ECONNABORTED", "Software caused connection abort");
        define(104, "ECONNRESET", "Connection reset by peer");
        define(107, "ENOTCONN", "Transport endpoint is not connected");
        define(110, "ETIMEDOUT", "Connection timed out");
        define(111, "ECONNREFUSED", "Connection refused");
        define(113, "EHOSTUNREACH", "No route to host");
        define(114, "EALREADY", "Operation already in progress");
        define(115, "EINPROGRESS", "Operation now in progress");
        define(125, "ECANCELED", "Operation canceled");
    }

    private Errno() {
    }

    private static void define(int number, String name, String message) {
        NAMES[number] = name;
        MESSAGES[number] = message;
    }

    /** The symbolic name, e.g. {@code "EINVAL"}, or {@code "errno 200"} for numbers not listed. */
    public static String name(int errno) {
        return errno > 0 && errno < NAMES.length && NAMES[errno] != null ? NAMES[errno] : "errno " + errno;
    }

    /** The C library's message for the number, e.g. {@code "Invalid argument"}. */
    public static String message(int errno) {
        return errno > 0 && errno < MESSAGES.length && MESSAGES[errno] != null ? MESSAGES[errno] : "Unknown error " + errno;
    }

    /** {@code "EINVAL (22, Invalid argument)"}. */
    public static String describe(int errno) {
        return name(errno) + " (" + errno + ", " + message(errno) + ")";
    }
}
