import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Checks the repository's Markdown links: every relative link names a file or folder that exists,
 * and every {@code #anchor} (in the same file or another Markdown file) names a heading there, as
 * GitHub makes anchors from headings (lower case, punctuation dropped, spaces to hyphens, a repeated
 * heading numbered -1, -2, ...). External links (http, https, mailto) are not followed.
 *
 * <p>It also checks the section names that code, scripts and other pages quote beside a page's path,
 * as in {@code (docs/channel.md, "The ring")}: the quoted name (it may wrap onto the next line of a
 * comment) must begin a heading or a bold paragraph title of that page, so a section moved to
 * another page (docs/measurements/ holds the dated records) is not left named where it no longer is.
 *
 * <p>Run from the repository root: {@code java scripts/CheckDocLinks.java [file-or-folder ...]}
 * (default: README.md, docs/ and every other tracked-looking *.md outside target/ and .git/).
 * Exit status 0 when every link resolves, 1 with one line per broken link otherwise.
 */
public class CheckDocLinks {
    private static final Pattern HEADING = Pattern.compile("^(#{1,6})\\s+(.*?)\\s*#*\\s*$");
    private static final Pattern FENCE = Pattern.compile("^\\s*(```|~~~)");
    // [text](target) and ![alt](target); the target up to the first space or closing parenthesis
    private static final Pattern LINK = Pattern.compile("!?\\[(?:[^\\[\\]]|\\[[^\\]]*\\])*\\]\\(\\s*<?([^)\\s>]+)>?(?:\\s+\"[^\"]*\")?\\s*\\)");
    private static final Pattern INLINE_CODE = Pattern.compile("`[^`]*`");
    private static final Map<Path, Set<String>> ANCHORS = new HashMap<>();

    public static void main(String[] args) throws IOException {
        Path root = Path.of("").toAbsolutePath();
        List<Path> files = new ArrayList<>();
        if (args.length == 0) {
            collect(root, files);
        } else {
            for (String a : args) {
                collect(root.resolve(a), files);
            }
        }
        List<String> broken = new ArrayList<>();
        int links = 0;
        for (Path file : files) {
            List<String> lines = Files.readAllLines(file);
            boolean inFence = false;
            for (int i = 0; i < lines.size(); i++) {
                String line = lines.get(i);
                if (FENCE.matcher(line).find()) {
                    inFence = !inFence;
                    continue;
                }
                if (inFence) {
                    continue;
                }
                Matcher m = LINK.matcher(INLINE_CODE.matcher(line).replaceAll(""));
                while (m.find()) {
                    String target = m.group(1);
                    if (target.matches("^[a-zA-Z][a-zA-Z0-9+.-]*:.*")) {
                        continue; // http:, https:, mailto:
                    }
                    links++;
                    String why = check(file, target);
                    if (why != null) {
                        broken.add(root.relativize(file) + ":" + (i + 1) + ": " + target + ": " + why);
                    }
                }
            }
        }
        int quoted = 0;
        for (Path file : trackedTextFiles(root)) {
            String text;
            try {
                text = Files.readString(file);
            } catch (java.nio.charset.MalformedInputException binary) {
                continue;
            }
            Matcher q = QUOTED_SECTION.matcher(text);
            while (q.find()) {
                Path page = root.resolve("docs").resolve(q.group(1) == null ? "" : "measurements").resolve(q.group(2) + ".md");
                String name = q.group(3).replaceAll("\\s*\\n\\s*(?:\\*|//|#)?\\s*", " ").replace("`", "").strip();
                quoted++;
                if (!Files.exists(page)) {
                    continue; // a page of another project, or one that names itself differently
                }
                boolean found = titles(page).stream().anyMatch(t -> t.startsWith(name) || name.startsWith(t));
                if (!found) {
                    int line = (int) text.substring(0, q.start()).chars().filter(c -> c == '\n').count() + 1;
                    broken.add(root.relativize(file) + ":" + line + ": \"" + name + "\": no such heading or bold title in "
                            + root.relativize(page));
                }
            }
        }
        broken.forEach(System.out::println);
        System.out.println(files.size() + " files, " + links + " relative links, " + quoted + " quoted section names, "
                + broken.size() + " broken");
        System.exit(broken.isEmpty() ? 0 : 1);
    }

    // docs/X.md, "Name" or docs/measurements/X.md ("Name": the name up to its closing quote
    private static final Pattern QUOTED_SECTION = Pattern.compile(
            "docs/(measurements/)?([a-z0-9-]+)\\.md,? *\\(?[\"\u201c]([^\"\u201d]{3,200})[\"\u201d]");

    private static List<Path> trackedTextFiles(Path root) throws IOException {
        List<Path> out = new ArrayList<>();
        try {
            Process git = new ProcessBuilder("git", "ls-files", "-z").directory(root.toFile())
                    .redirectError(ProcessBuilder.Redirect.DISCARD).start();
            String all = new String(git.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            if (git.waitFor() != 0) {
                return out; // not a git checkout: the links are still checked
            }
            for (String name : all.split("\0")) {
                Path p = root.resolve(name);
                if (!name.isEmpty() && !name.startsWith("docs/measurements/") && Files.isRegularFile(p)
                        && Files.size(p) < 2_000_000) {
                    out.add(p);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return out;
    }

    /** A page's headings and bold paragraph titles, without backquotes. */
    private static List<String> titles(Path page) throws IOException {
        List<String> out = new ArrayList<>();
        Pattern bold = Pattern.compile("\\*\\*([^*]+?)\\.?\\*\\*");
        for (String line : Files.readAllLines(page)) {
            Matcher h = HEADING.matcher(line);
            if (h.matches()) {
                out.add(h.group(2).replace("`", "").strip());
            }
            Matcher b = bold.matcher(line);
            while (b.find()) {
                out.add(b.group(1).replace("`", "").strip());
            }
        }
        return out;
    }

    private static void collect(Path start, List<Path> files) throws IOException {
        if (Files.isRegularFile(start)) {
            files.add(start);
            return;
        }
        try (Stream<Path> s = Files.walk(start)) {
            s.filter(p -> p.toString().endsWith(".md"))
                    .filter(p -> !p.toString().contains("/target/") && !p.toString().contains("/.git/")
                            && !p.toString().contains("/node_modules/"))
                    .sorted().forEach(files::add);
        }
    }

    private static String check(Path from, String target) throws IOException {
        int hash = target.indexOf('#');
        String path = hash < 0 ? target : target.substring(0, hash);
        String anchor = hash < 0 ? null : target.substring(hash + 1);
        Path dest = path.isEmpty() ? from : from.getParent().resolve(decode(path)).normalize();
        if (!Files.exists(dest)) {
            return "no such file " + dest.getFileName();
        }
        if (anchor == null || anchor.isEmpty()) {
            return null;
        }
        if (!dest.toString().endsWith(".md")) {
            return null; // an anchor into source (a line number): not checked
        }
        if (!anchors(dest).contains(decode(anchor))) {
            return "no heading for #" + anchor + " in " + dest.getFileName();
        }
        return null;
    }

    private static String decode(String s) {
        return java.net.URLDecoder.decode(s.replace("+", "%2B"), java.nio.charset.StandardCharsets.UTF_8);
    }

    private static Set<String> anchors(Path file) throws IOException {
        Set<String> cached = ANCHORS.get(file);
        if (cached != null) {
            return cached;
        }
        Set<String> result = new HashSet<>();
        Map<String, Integer> seen = new HashMap<>();
        boolean inFence = false;
        for (String line : Files.readAllLines(file)) {
            if (FENCE.matcher(line).find()) {
                inFence = !inFence;
                continue;
            }
            Matcher h = HEADING.matcher(line);
            if (inFence || !h.matches()) {
                continue;
            }
            String slug = slug(h.group(2));
            int n = seen.merge(slug, 1, Integer::sum) - 1;
            result.add(n == 0 ? slug : slug + "-" + n);
        }
        // explicit HTML anchors: <a id="x"></a> or name="x"
        Matcher a = Pattern.compile("<a\\s+(?:id|name)=\"([^\"]+)\"").matcher(Files.readString(file));
        while (a.find()) {
            result.add(a.group(1));
        }
        ANCHORS.put(file, result);
        return result;
    }

    /** GitHub's anchor for a heading's text. */
    static String slug(String heading) {
        String text = heading.replaceAll("!?\\[([^\\]]*)\\]\\([^)]*\\)", "$1"); // links keep their text
        text = text.replaceAll("<[^>]+>", ""); // inline HTML
        StringBuilder b = new StringBuilder();
        text.toLowerCase(java.util.Locale.ROOT).codePoints().forEach(c -> {
            if (Character.isLetterOrDigit(c) || c == '_' || c == '-') {
                b.appendCodePoint(c);
            } else if (c == ' ') {
                b.append('-');
            }
        });
        return b.toString();
    }
}
