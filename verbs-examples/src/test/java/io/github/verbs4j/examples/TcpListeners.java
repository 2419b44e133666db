package io.github.verbs4j.examples;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
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
        String needle = String.format(Locale.ROOT, ":%04X ", port);
        for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
            try {
                for (String line : Files.readAllLines(Path.of(table))) {
                    String[] f = line.trim().split("\\s+");
                    if (f.length > 3 && (f[1] + " ").endsWith(needle) && f[3].equals("0A")) {
                        return true;
                    }
                }
            } catch (IOException ignored) {
                // no IPv6 table on this kernel: the other one tells
            }
        }
        return false;
    }
}
