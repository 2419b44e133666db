import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Interleaved before/after probe: the two benchmarks jars in two class loaders of one JVM; per
 * round, each variant runs N operations timed in thread CPU time (order rotating); reported:
 * per variant the median over rounds of ns per operation, and the median of the per-round
 * difference after - before.
 */
public class XpathProbe {
    public static void main(String[] a) throws Exception {
        Path loop = Path.of(a[0]);
        String[] jars = {a[1], a[2]};
        int rounds = Integer.parseInt(a[3]);
        int n = Integer.parseInt(a[4]);
        String[] sides = {"before", "after"};
        String[] kinds = {"writeExtended", "pollEmptyExtended", "writeClassic"};
        Method[] run = new Method[2];
        Object[][] rigs = new Object[2][3];
        String[] libs = {a[5], a[6]};
        for (int s = 0; s < 2; s++) {
            // one copy of the provider per loader: the JDK loads a library file into one class loader only
            System.setProperty("verbs4j.libibverbs", libs[s]);
            URLClassLoader cl = new URLClassLoader(new URL[] {loop.toUri().toURL(), Path.of(jars[s]).toUri().toURL()},
                    ClassLoader.getPlatformClassLoader());
            Class<?> c = cl.loadClass("io.github.verbs4j.jmh.XpathLoop");
            run[s] = c.getMethod("run", Object.class, int.class, int.class);
            Object ext = c.getMethod("extended").invoke(null);
            rigs[s][0] = ext;
            rigs[s][1] = ext;
            rigs[s][2] = c.getMethod("classic").invoke(null);
        }
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        int variants = 6;
        double[][] ns = new double[variants][rounds];
        long sink = 0;
        // warm-up: every variant, both sides
        for (int w = 0; w < 20; w++) {
            for (int v = 0; v < variants; v++) {
                sink += (long) run[v % 2].invoke(null, rigs[v % 2][v / 2], v / 2, n);
            }
        }
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < variants; k++) {
                int v = (k + r) % variants;
                long t0 = mx.getCurrentThreadCpuTime();
                sink += (long) run[v % 2].invoke(null, rigs[v % 2][v / 2], v / 2, n);
                ns[v][r] = (mx.getCurrentThreadCpuTime() - t0) / (double) n;
            }
        }
        System.out.printf("rounds %d, %d operations per batch, thread CPU time (sink %d)%n", rounds, n, sink);
        System.out.printf("%-20s %12s %12s %16s %18s%n", "operation", "before ns", "after ns", "after-before ns",
                "rounds after<before");
        for (int k = 0; k < 3; k++) {
            double[] b = ns[2 * k].clone();
            double[] f = ns[2 * k + 1].clone();
            double[] d = new double[rounds];
            int faster = 0;
            for (int r = 0; r < rounds; r++) {
                d[r] = ns[2 * k + 1][r] - ns[2 * k][r];
                if (d[r] < 0) {
                    faster++;
                }
            }
            System.out.printf("%-20s %12.1f %12.1f %16.1f %12d of %d%n", kinds[k], median(b), median(f), median(d), faster,
                    rounds);
        }
    }

    static double median(double[] x) {
        double[] y = x.clone();
        Arrays.sort(y);
        return y.length % 2 == 1 ? y[y.length / 2] : (y[y.length / 2 - 1] + y[y.length / 2]) / 2;
    }
}
