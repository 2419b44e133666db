package io.github.verbs4j.examples;

import java.io.PrintWriter;
import java.io.StringWriter;

/** One run of the verbs4j tool as the tests see it: exit code, standard output, standard error. */
record ToolRun(int exitCode, String out, String err) {

    /** Runs the tool in this JVM (on the library the build selected), its output captured. */
    static ToolRun inProcess(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int code = Verbs4jTool.execute(new PrintWriter(out, true), new PrintWriter(err, true), args);
        return new ToolRun(code, out.toString(), err.toString());
    }

    /** The outcome of a finished process. */
    static ToolRun of(Proc finished) {
        return new ToolRun(finished.exitCode(), finished.out(), finished.err());
    }
}
