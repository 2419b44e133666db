package io.github.verbs4j.jmh;

/** Loaded once per jar (its own class loader): loops over the rigs' operations inside that jar's code. */
public final class XpathLoop {
    private XpathLoop() {
    }

    public static Object extended() {
        ExtendedRig r = new ExtendedRig();
        r.setUp();
        return r;
    }

    public static Object classic() {
        JavaRig r = new JavaRig();
        r.setUp();
        return r;
    }

    public static long run(Object rig, int kind, int n) {
        long s = 0;
        if (kind == 0) {
            ExtendedRig r = (ExtendedRig) rig;
            for (int i = 0; i < n; i++) {
                s += r.write();
            }
        } else if (kind == 1) {
            ExtendedRig r = (ExtendedRig) rig;
            for (int i = 0; i < n; i++) {
                s += r.pollEmpty() ? 1 : 0;
            }
        } else {
            JavaRig r = (JavaRig) rig;
            for (int i = 0; i < n; i++) {
                s += r.write();
            }
        }
        return s;
    }
}
