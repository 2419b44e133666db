package io.github.verbs4j.examples;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.Locale;

/**
 * Whether something listens on a local TCP port, read from {@code /proc/net/tcp[6]} (local
 * address {@code :PORT} in hex, state 0A): the tests start a client only once its server can
 * accept it, without connecting to the server first.
 */
public final class TcpListeners {

    private TcpListeners() {
    }

    public static boolean listening(int port) {
        return !listenerInodes(port).isEmpty();
    }

    /**
     * Whether {@code owner} (or a process it started, such as the tool under {@code timeout})
     * listens on {@code port}: not just anything, since another program may hold that port.
     * Where the process's descriptors cannot be read, any listener counts.
     */
    public static boolean listening(int port, ProcessHandle owner) {
        Set<String> inodes = listenerInodes(port);
        if (inodes.isEmpty()) {
            return false;
        }
        List<ProcessHandle> family = new ArrayList<>();
        family.add(owner);
        owner.descendants().forEach(family::add);
        boolean readable = false;
        for (ProcessHandle p : family) {
            try (DirectoryStream<Path> fds = Files.newDirectoryStream(Path.of("/proc", Long.toString(p.pid()), "fd"))) {
                readable = true;
                for (Path fd : fds) {
                    try {
                        String target = Files.readSymbolicLink(fd).toString();
                        if (target.startsWith("socket:[") && inodes.contains(target.substring(8, target.length() - 1))) {
                            return true;
                        }
                    } catch (IOException gone) {
                        // closed meanwhile
                    }
                }
            } catch (IOException unreadable) {
                // exited, or not ours to read
            }
        }
        return !readable;
    }

    /** The socket inodes of the listeners on local {@code port}. */
    private static Set<String> listenerInodes(int port) {
        String needle = String.format(Locale.ROOT, ":%04X ", port);
        Set<String> inodes = new HashSet<>();
        for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
            try {
                for (String line : Files.readAllLines(Path.of(table))) {
                    String[] f = line.trim().split("\\s+");
                    if (f.length > 9 && (f[1] + " ").endsWith(needle) && f[3].equals("0A")) {
                        inodes.add(f[9]);
                    }
                }
            } catch (IOException ignored) {
                // no IPv6 table on this kernel: the other one tells
            }
        }
        return inodes;
    }
}
