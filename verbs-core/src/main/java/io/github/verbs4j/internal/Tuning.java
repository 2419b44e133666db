package io.github.verbs4j.internal;

import java.util.List;
import java.util.Locale;
import java.util.function.LongPredicate;

/**
 * The one reader of verbs4j's tuning system properties ({@code verbs4j.emptyPollYieldEvery},
 * {@code verbs4j.closeGuard}, {@code verbs4j.channel.standDownMicros}), and their one policy for a
 * bad value, the one Netty's {@code SystemPropertyUtil} has for its knobs:
 *
 * <ul>
 *   <li>A property that is not set is its default, silently.</li>
 *   <li>A value is read with surrounding white space trimmed (a choice also ignoring case).</li>
 *   <li>A value that is not a number, is out of the accepted range, or is not one of the choices
 *       is <b>logged once</b>, at {@code WARNING} through {@link System#getLogger System.Logger}
 *       {@code io.github.verbs4j}, naming the property, the value given, what is accepted and the
 *       default used instead; then the library goes on with the default. It never throws: a bad
 *       value costs no class-initialisation failure (an {@code ExceptionInInitializerError}
 *       for the first user of the class and a {@code NoClassDefFoundError} for every later one).</li>
 * </ul>
 *
 * <p>Each property is read once, in its class's static initialiser, into a {@code static final}
 * field: a constant to the JIT compilers, so a hot path that depends on it costs what it would
 * with the value written into the source. Changing the property later has no effect. The
 * properties, their values and this policy for users: docs/guide.md, "8.2 Tuning properties".
 */
public final class Tuning {

    private Tuning() {
    }

    /**
     * What reading a property gave: the value to use, and the warning to log, or {@code null}
     * when the value was taken (or the property not set).
     *
     * @param <T> the value's type
     * @param value the value to use
     * @param warning the warning, or {@code null}
     */
    record Read<T>(T value, String warning) {
    }

    /**
     * The {@code int} property {@code name}, or {@code defaultValue} (with a warning, see the
     * class) when it is not a number or {@code accepted} refuses it.
     *
     * @param name the property
     * @param defaultValue its default, which {@code accepted} must take
     * @param accepted the values taken
     * @param acceptedText what is taken, in words, for the warning ("0 or a power of two &gt;= 1024")
     * @return the value to use
     */
    public static int intProperty(String name, int defaultValue, LongPredicate accepted, String acceptedText) {
        return Math.toIntExact(log(parseInt(name, System.getProperty(name), defaultValue, accepted, acceptedText)));
    }

    /**
     * The {@code long} property {@code name}, or {@code defaultValue} (with a warning, see the
     * class) when it is not a number or {@code accepted} refuses it.
     *
     * @param name the property
     * @param defaultValue its default, which {@code accepted} must take
     * @param accepted the values taken
     * @param acceptedText what is taken, in words, for the warning
     * @return the value to use
     */
    public static long longProperty(String name, long defaultValue, LongPredicate accepted, String acceptedText) {
        return log(parseLong(name, System.getProperty(name), defaultValue, accepted, acceptedText));
    }

    /**
     * The property {@code name} as one of {@code choices} (compared ignoring case; returned as
     * written in {@code choices}), or {@code defaultValue} (with a warning, see the class).
     *
     * @param name the property
     * @param defaultValue its default, one of {@code choices}
     * @param choices the values taken
     * @return the value to use
     */
    public static String choiceProperty(String name, String defaultValue, String... choices) {
        return log(parseChoice(name, System.getProperty(name), defaultValue, List.of(choices)));
    }

    private static <T> T log(Read<T> read) {
        if (read.warning() != null) {
            // looked up only for a warning: reading a good value touches no logging
            System.getLogger("io.github.verbs4j").log(System.Logger.Level.WARNING, read.warning());
        }
        return read.value();
    }

    static Read<Long> parseInt(String name, String text, int defaultValue, LongPredicate accepted, String acceptedText) {
        return parse(name, text, defaultValue, Integer.MIN_VALUE, Integer.MAX_VALUE, accepted, acceptedText);
    }

    static Read<Long> parseLong(String name, String text, long defaultValue, LongPredicate accepted, String acceptedText) {
        return parse(name, text, defaultValue, Long.MIN_VALUE, Long.MAX_VALUE, accepted, acceptedText);
    }

    /**
     * {@code text} as a number in {@code min..max} that {@code accepted} takes, else the default
     * and the warning. A default that {@code accepted} refuses is a bug of the caller (a constant
     * of the library's, never a user's value), refused at once.
     */
    private static Read<Long> parse(String name, String text, long defaultValue, long min, long max,
                                    LongPredicate accepted, String acceptedText) {
        if (!accepted.test(defaultValue)) {
            throw new IllegalArgumentException(name + ": the default " + defaultValue + " is not " + acceptedText);
        }
        if (text == null) {
            return new Read<>(defaultValue, null);
        }
        long value;
        try {
            value = Long.parseLong(text.trim());
        } catch (NumberFormatException e) {
            return new Read<>(defaultValue, warning(name, text, "is not a number (accepted: " + acceptedText + ")", defaultValue));
        }
        if (value < min || value > max || !accepted.test(value)) {
            return new Read<>(defaultValue, warning(name, text, "is out of range (accepted: " + acceptedText + ")", defaultValue));
        }
        return new Read<>(value, null);
    }

    static Read<String> parseChoice(String name, String text, String defaultValue, List<String> choices) {
        if (!choices.contains(defaultValue)) {
            throw new IllegalArgumentException(name + ": the default " + defaultValue + " is not one of " + choices);
        }
        if (text == null) {
            return new Read<>(defaultValue, null);
        }
        String given = text.trim().toLowerCase(Locale.ROOT);
        for (String choice : choices) {
            if (choice.toLowerCase(Locale.ROOT).equals(given)) {
                return new Read<>(choice, null);
            }
        }
        return new Read<>(defaultValue, warning(name, text, "is not one of " + String.join(", ", choices), defaultValue));
    }

    /** {@code name="text" problem: using the default, defaultValue}: the one form of the warning. */
    private static String warning(String name, String text, String problem, Object defaultValue) {
        return name + "=\"" + text + "\" " + problem + ": using the default, " + defaultValue;
    }
}
