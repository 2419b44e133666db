package io.github.verbs4j.raw;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.System.Logger.Level;
import java.net.URL;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * softrdma from the {@code io.github.verbs4j:verbs4j-softrdma} jar: finds its prebuilt
 * {@code libibverbs.so.1} and {@code librdmacm.so.1} among the class path's resources and
 * extracts them into a private folder, once per content, so that they can be loaded by path.
 *
 * <h2>Where</h2>
 * {@code <base>/softrdma/<platform>-<hash>/}, where {@code <base>} is the system property
 * {@value #DIR_PROPERTY} when set, else {@code $XDG_CACHE_HOME/verbs4j} (an absolute
 * {@code XDG_CACHE_HOME}), else {@code ~/.cache/verbs4j}, and {@code <hash>} the first 16 hex
 * digits of the SHA-256 of both files: another softrdma gets another folder, so two versions
 * never overwrite each other.
 *
 * <h2>Why it is safe</h2>
 * <ul>
 *   <li>Every folder from {@code <base>} down is created {@code rwx------}; an existing one must be
 *       a real folder (not a symbolic link), owned by this process's user, and writable by nobody
 *       else, or the extraction stops with an {@link UnsatisfiedLinkError} that names it: a folder
 *       others could write is a folder others could put a library into.</li>
 *   <li>A library already there is used only when it is a regular file of this user, writable by
 *       nobody else, and its SHA-256 is the jar's. Otherwise (a crash half-way, a tampered file)
 *       it is written again.</li>
 *   <li>Writing goes to a fresh temporary file in the same folder, which is then renamed over the
 *       final name atomically: a JVM starting at the same moment sees either no file or a whole
 *       one, and two JVMs extracting together both succeed (they write the same bytes).</li>
 * </ul>
 */
final class SoftRdmaBundle {

    /** System property: the folder to extract into instead of the user's cache folder. */
    static final String DIR_PROPERTY = "verbs4j.softrdma.dir";

    /** The files, in load order (librdmacm links against libibverbs). */
    static final List<String> FILES = List.of(NativeLibraries.LIBIBVERBS_SONAME, NativeLibraries.LIBRDMACM_SONAME);

    private static final Set<PosixFilePermission> PRIVATE_DIR = PosixFilePermissions.fromString("rwx------");
    private static final Set<PosixFilePermission> PRIVATE_FILE = PosixFilePermissions.fromString("r-x------");
    private static final System.Logger LOG = System.getLogger("io.github.verbs4j.softrdma");

    private SoftRdmaBundle() {
    }

    /** {@code linux-x86_64}, {@code linux-aarch64}, ...: the folder of the jar this JVM needs. */
    static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        arch = switch (arch) {
            case "amd64", "x86_64" -> "x86_64";
            case "arm64", "aarch64" -> "aarch64";
            default -> arch;
        };
        return (os.startsWith("linux") ? "linux" : os.replace(' ', '_')) + "-" + arch;
    }

    /** The resource folder of a platform: {@code META-INF/verbs4j/softrdma/<platform>/}. */
    static String resourceFolder(String platform) {
        return "META-INF/verbs4j/softrdma/" + platform + "/";
    }

    /** The folder to extract into when {@value #DIR_PROPERTY} is not set. */
    static Path defaultBase() {
        String property = System.getProperty(DIR_PROPERTY);
        if (property != null && !property.isBlank()) {
            return Path.of(property).toAbsolutePath();
        }
        String xdg = System.getenv("XDG_CACHE_HOME");
        if (xdg != null && Path.of(xdg).isAbsolute()) {
            return Path.of(xdg, "verbs4j");
        }
        return Path.of(System.getProperty("user.home"), ".cache", "verbs4j");
    }

    /**
     * Extracts (or finds already extracted) the libraries of this platform from {@code loader}'s
     * resources into {@code base}, and returns their folder.
     *
     * @throws UnsatisfiedLinkError when the jar is not on the class path, has no libraries for
     *         this platform, or the folder is unsafe or cannot be written; the message says which
     */
    static Path extract(ClassLoader loader, String platform, Path base) {
        String folder = resourceFolder(platform);
        List<byte[]> contents = new ArrayList<>();
        for (String file : FILES) {
            URL url = loader.getResource(folder + file);
            if (url == null) {
                boolean jarPresent = loader.getResource(resourceFolder("linux-x86_64") + file) != null;
                throw new UnsatisfiedLinkError("verbs4j: verbs4j.substrate=softrdma needs softrdma's " + file
                        + " for " + platform + " on the class path (resource " + folder + file + "): "
                        + (jarPresent ? "the verbs4j-softrdma jar on the class path has no build for " + platform
                                : "add io.github.verbs4j:verbs4j-softrdma to the dependencies"));
            }
            try (InputStream in = url.openStream()) {
                contents.add(in.readAllBytes());
            } catch (IOException e) {
                throw linkError("cannot read " + url, e);
            }
        }
        MessageDigest all = sha256();
        for (byte[] c : contents) {
            all.update(sha256().digest(c));
        }
        String hash = HexFormat.of().formatHex(all.digest()).substring(0, 16);
        Path dir = base.resolve("softrdma").resolve(platform + "-" + hash);
        try {
            privateDir(base);
            privateDir(base.resolve("softrdma"));
            privateDir(dir);
            for (int i = 0; i < FILES.size(); i++) {
                place(dir.resolve(FILES.get(i)), contents.get(i));
            }
        } catch (IOException e) {
            throw linkError("cannot extract softrdma into " + dir + " (set -D" + DIR_PROPERTY
                    + "=<folder> to use another folder)", e);
        }
        return dir;
    }

    /** Creates {@code dir} private, or checks that the existing one is safe. */
    private static void privateDir(Path dir) throws IOException {
        if (!Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) {
            Files.createDirectories(dir.getParent());
            try {
                Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PRIVATE_DIR));
                Files.setPosixFilePermissions(dir, PRIVATE_DIR); // whatever the umask did
                LOG.log(Level.DEBUG, "created {0}", dir);
            } catch (FileAlreadyExistsException raced) {
                // another JVM made it a moment ago: checked below like any existing folder
            }
        }
        String problem = unsafe(dir, true);
        if (problem != null) {
            throw new UnsatisfiedLinkError("verbs4j: refusing to load softrdma from " + dir + ": it " + problem
                    + ". Remove it (verbs4j recreates it private) or set -D" + DIR_PROPERTY + "=<folder>");
        }
    }

    /**
     * Why {@code path} is not safe to load from (a sentence tail), or {@code null}: not of the
     * expected kind, a symbolic link, owned by another user, or writable by group or others.
     */
    static String unsafe(Path path, boolean directory) throws IOException {
        if (Files.isSymbolicLink(path)) {
            return "is a symbolic link";
        }
        if (directory ? !Files.isDirectory(path, LinkOption.NOFOLLOW_LINKS)
                : !Files.isRegularFile(path, LinkOption.NOFOLLOW_LINKS)) {
            return directory ? "is not a folder" : "is not a regular file";
        }
        int owner = (Integer) Files.getAttribute(path, "unix:uid", LinkOption.NOFOLLOW_LINKS);
        int me = currentUid();
        if (owner != me) {
            return "belongs to uid " + owner + ", not to this process's uid " + me;
        }
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(path, LinkOption.NOFOLLOW_LINKS);
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            return "is writable by others (" + PosixFilePermissions.toString(perms) + ")";
        }
        return null;
    }

    /** The effective uid of this process: the owner of {@code /proc/self}. */
    static int currentUid() throws IOException {
        return (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    }

    /** Leaves {@code target} holding exactly {@code content}, private, replacing it atomically if needed. */
    private static void place(Path target, byte[] content) throws IOException {
        if (Files.exists(target, LinkOption.NOFOLLOW_LINKS)) {
            String problem = unsafe(target, false);
            if (problem == null && MessageDigest.isEqual(sha256().digest(Files.readAllBytes(target)),
                    sha256().digest(content))) {
                return;
            }
            LOG.log(Level.WARNING, "softrdma: {0} {1}; writing it again", target,
                    problem != null ? problem : "differs from the jar's");
        }
        Path tmp = Files.createTempFile(target.getParent(), "." + target.getFileName(), ".tmp",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        try {
            try (OutputStream out = Files.newOutputStream(tmp)) {
                out.write(content);
            }
            Files.setPosixFilePermissions(tmp, PRIVATE_FILE);
            try {
                Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                throw new IOException("the file system of " + target.getParent() + " cannot rename atomically", e);
            }
            LOG.log(Level.DEBUG, "softrdma: extracted {0}", target);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JDK", e);
        }
    }

    private static UnsatisfiedLinkError linkError(String message, Throwable cause) {
        UnsatisfiedLinkError error = new UnsatisfiedLinkError("verbs4j: " + message + ": " + cause);
        error.initCause(cause);
        return error;
    }
}
