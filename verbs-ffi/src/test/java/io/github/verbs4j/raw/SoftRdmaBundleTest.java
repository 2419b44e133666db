package io.github.verbs4j.raw;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Extraction of softrdma's libraries from a jar: private folders, content-hashed, repaired when a
 * file was tampered with, refused when a folder is unsafe, and safe for JVMs extracting together.
 * The "libraries" here are stand-in bytes: extraction never loads them.
 */
class SoftRdmaBundleTest {

    static final String PLATFORM = "linux-test";

    @TempDir
    Path tmp;
    Path jar;
    Path base;
    ClassLoader loader;

    @BeforeEach
    void bundle() throws IOException {
        jar = tmp.resolve("jar");
        base = tmp.resolve("cache");
        loader = loaderWith(jar, "ibverbs v1", "rdmacm v1");
    }

    static ClassLoader loaderWith(Path root, String verbs, String rdmacm) throws IOException {
        Path folder = root.resolve(SoftRdmaBundle.resourceFolder(PLATFORM));
        Files.createDirectories(folder);
        Files.writeString(folder.resolve("libibverbs.so.1"), verbs);
        Files.writeString(folder.resolve("librdmacm.so.1"), rdmacm);
        return new URLClassLoader(new URL[] {root.toUri().toURL()}, null);
    }

    static String perms(Path p) throws IOException {
        return PosixFilePermissions.toString(Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS));
    }

    @Test
    void extractsIntoPrivateContentHashedFolder() throws IOException {
        Path dir = SoftRdmaBundle.extract(loader, PLATFORM, base);
        assertEquals(base.resolve("softrdma"), dir.getParent());
        assertTrue(dir.getFileName().toString().matches(PLATFORM + "-[0-9a-f]{16}"), dir.toString());
        assertEquals("ibverbs v1", Files.readString(dir.resolve("libibverbs.so.1")));
        assertEquals("rdmacm v1", Files.readString(dir.resolve("librdmacm.so.1")));
        for (Path d : List.of(base, base.resolve("softrdma"), dir)) {
            assertEquals("rwx------", perms(d), d.toString());
        }
        assertEquals("r-x------", perms(dir.resolve("libibverbs.so.1")));
        assertEquals("r-x------", perms(dir.resolve("librdmacm.so.1")));
    }

    @Test
    void secondExtractionReusesTheFilesUntouched() throws IOException {
        Path dir = SoftRdmaBundle.extract(loader, PLATFORM, base);
        Object key = Files.readAttributes(dir.resolve("libibverbs.so.1"),
                java.nio.file.attribute.BasicFileAttributes.class).fileKey();
        assertEquals(dir, SoftRdmaBundle.extract(loader, PLATFORM, base));
        assertEquals(key, Files.readAttributes(dir.resolve("libibverbs.so.1"),
                java.nio.file.attribute.BasicFileAttributes.class).fileKey(), "rewritten although intact");
    }

    @Test
    void anotherBuildGetsAnotherFolder() throws IOException {
        Path first = SoftRdmaBundle.extract(loader, PLATFORM, base);
        Path second = SoftRdmaBundle.extract(loaderWith(tmp.resolve("jar2"), "ibverbs v2", "rdmacm v1"),
                PLATFORM, base);
        assertNotEquals(first, second);
        assertEquals("ibverbs v1", Files.readString(first.resolve("libibverbs.so.1")));
        assertEquals("ibverbs v2", Files.readString(second.resolve("libibverbs.so.1")));
    }

    @Test
    void tamperedFileIsWrittenAgain() throws IOException {
        Path dir = SoftRdmaBundle.extract(loader, PLATFORM, base);
        Path lib = dir.resolve("libibverbs.so.1");
        Files.setPosixFilePermissions(lib, PosixFilePermissions.fromString("rw-------"));
        Files.writeString(lib, "evil");
        assertEquals(dir, SoftRdmaBundle.extract(loader, PLATFORM, base));
        assertEquals("ibverbs v1", Files.readString(lib));
        assertEquals("r-x------", perms(lib));
    }

    @Test
    void symbolicLinkInPlaceOfALibraryIsReplacedByTheRealFile() throws IOException {
        Path dir = SoftRdmaBundle.extract(loader, PLATFORM, base);
        Path lib = dir.resolve("librdmacm.so.1");
        Path elsewhere = Files.writeString(tmp.resolve("elsewhere"), "rdmacm v1"); // same bytes, another file
        Files.delete(lib);
        Files.createSymbolicLink(lib, elsewhere);
        SoftRdmaBundle.extract(loader, PLATFORM, base);
        assertFalse(Files.isSymbolicLink(lib));
        assertEquals("rdmacm v1", Files.readString(lib));
    }

    @Test
    void groupWritableFolderIsRefused() throws IOException {
        Path dir = SoftRdmaBundle.extract(loader, PLATFORM, base);
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxrwx---"));
        UnsatisfiedLinkError e = assertThrows(UnsatisfiedLinkError.class,
                () -> SoftRdmaBundle.extract(loader, PLATFORM, base));
        assertTrue(e.getMessage().contains("refusing to load softrdma from " + dir), e.getMessage());
        assertTrue(e.getMessage().contains("is writable by others (rwxrwx---)"), e.getMessage());
    }

    @Test
    void symbolicLinkAsTheBaseFolderIsRefused() throws IOException {
        Path real = Files.createDirectories(tmp.resolve("real"));
        Files.setPosixFilePermissions(real, PosixFilePermissions.fromString("rwx------"));
        Files.createSymbolicLink(base, real);
        UnsatisfiedLinkError e = assertThrows(UnsatisfiedLinkError.class,
                () -> SoftRdmaBundle.extract(loader, PLATFORM, base));
        assertTrue(e.getMessage().contains("is a symbolic link"), e.getMessage());
    }

    @Test
    void folderOfAnotherUserIsRefused() throws IOException {
        assumeTrue(SoftRdmaBundle.currentUid() == 0, "changing a folder's owner needs root");
        Path dir = SoftRdmaBundle.extract(loader, PLATFORM, base);
        Files.setAttribute(dir, "unix:uid", 4242);
        UnsatisfiedLinkError e = assertThrows(UnsatisfiedLinkError.class,
                () -> SoftRdmaBundle.extract(loader, PLATFORM, base));
        assertTrue(e.getMessage().contains("belongs to uid 4242, not to this process's uid 0"), e.getMessage());
    }

    @Test
    void missingJarSaysWhichDependencyToAdd() {
        UnsatisfiedLinkError e = assertThrows(UnsatisfiedLinkError.class,
                () -> SoftRdmaBundle.extract(new URLClassLoader(new URL[0], null), PLATFORM, base));
        assertTrue(e.getMessage().contains("add io.github.verbs4j:verbs4j-softrdma to the dependencies"),
                e.getMessage());
    }

    @Test
    void platformNamesTheJarFolder() {
        assumeTrue(System.getProperty("os.name").equals("Linux"));
        String arch = System.getProperty("os.arch");
        assertEquals(arch.equals("amd64") ? "linux-x86_64" : "linux-" + arch, SoftRdmaBundle.platform());
    }

    /** Several JVMs extracting into one empty folder at the same moment: all succeed, one result. */
    @Test
    void concurrentJvmsAllSucceed() throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<Process> jvms = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            jvms.add(new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), Extract.class.getName(),
                    jar.toString(), base.toString()).redirectErrorStream(true).start());
        }
        List<String> dirs = new ArrayList<>();
        for (Process p : jvms) {
            assertTrue(p.waitFor(120, TimeUnit.SECONDS), "an extracting JVM hung");
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            assertEquals(0, p.exitValue(), out);
            dirs.add(out);
        }
        assertEquals(1, dirs.stream().distinct().count(), dirs.toString());
        Path dir = Path.of(dirs.getFirst());
        assertArrayEquals("ibverbs v1".getBytes(StandardCharsets.UTF_8), Files.readAllBytes(dir.resolve("libibverbs.so.1")));
        assertArrayEquals("rdmacm v1".getBytes(StandardCharsets.UTF_8), Files.readAllBytes(dir.resolve("librdmacm.so.1")));
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(List.of("libibverbs.so.1", "librdmacm.so.1"),
                    files.map(f -> f.getFileName().toString()).sorted().toList(), "temporary files left behind");
        }
    }

    /** The child JVM of {@link #concurrentJvmsAllSucceed}: extracts, prints the folder. */
    public static final class Extract {
        public static void main(String[] args) throws Exception {
            ClassLoader loader = new URLClassLoader(new URL[] {Path.of(args[0]).toUri().toURL()}, null);
            System.out.println(SoftRdmaBundle.extract(loader, PLATFORM, Path.of(args[1])));
        }
    }
}
