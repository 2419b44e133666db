package io.github.verbs4j.raw;

import java.lang.System.Logger.Level;

/**
 * Native access: verbs4j calls restricted FFM methods, which the JVM allows only to modules
 * granted {@code --enable-native-access}. Without it JDK 22-25 print a warning (or, with
 * {@code --illegal-native-access=deny}, refuse); verbs4j says once which flag to add.
 */
final class NativeAccess {

    private static boolean warned;

    private NativeAccess() {
    }

    static String hint() {
        Module module = NativeAccess.class.getModule();
        String grant = module.isNamed() ? module.getName() : "ALL-UNNAMED";
        return "verbs4j: native access is not enabled for " + (module.isNamed() ? "module " + grant : "the class path")
                + "; start the JVM with --enable-native-access=" + grant
                + " (or run from a jar whose manifest has Enable-Native-Access: ALL-UNNAMED)";
    }

    static synchronized void check() {
        if (!warned && !NativeAccess.class.getModule().isNativeAccessEnabled()) {
            warned = true;
            System.getLogger("io.github.verbs4j").log(Level.WARNING, hint());
        }
    }
}
