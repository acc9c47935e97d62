package skiff;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

// Exit is an internal class of kafka-clients; the tools and the client are pinned to one version
// (pom.xml), so its place is fixed for this runner.
import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Apache Kafka's command-line tools by main class, one after another in this one JVM (a JVM
 * with the tools' classpath takes seconds to start; the tools themselves take a fraction of that).
 * Reads one command per line from stdin, tab-separated: main class, then its arguments; a first
 * field {@code <path} before the main class makes that file the tool's System.in. Kafka's
 * tools end through {@link Exit}, which is pointed here at an exception that carries the status.
 *
 * <p>For each command prints {@code @@TOOL <index> exit=<status> ms=<run time>}, then {@code @@OUT} and the
 * tool's stdout, {@code @@ERR} and its stderr, and {@code @@END}.
 */
public final class ToolRunner {
    /** Thrown by Kafka's Exit.exit/halt instead of ending the JVM. */
    static final class ToolExit extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int status;

        ToolExit(int status) {
            super("exit " + status, null, false, false);
            this.status = status;
        }
    }

    /**
     * The status of the running tool's first Exit call. Tools end with {@code Exit.exit} in a
     * {@code finally} or after a {@code catch (Throwable)}, so the exception may be caught and turned
     * into a second exit with status 1: the first call is the tool's real status.
     */
    private static Integer firstStatus;

    private static void exit(int status) {
        if (firstStatus == null) {
            firstStatus = status;
        }
        throw new ToolExit(status);
    }

    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((status, message) -> exit(status));
        Exit.setHaltProcedure((status, message) -> exit(status));
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        InputStream realIn = System.in;
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        int index = 0;
        for (String line = commands.readLine(); line != null; line = commands.readLine()) {
            if (line.isBlank()) {
                continue;
            }
            String[] fields = line.split("\t");
            InputStream input = null;
            if (fields[0].startsWith("<")) {
                input = new FileInputStream(fields[0].substring(1));
                fields = Arrays.copyOfRange(fields, 1, fields.length);
            }
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            int status;
            long started = System.nanoTime();
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            if (input != null) {
                System.setIn(input);
            }
            try {
                status = run(fields[0], Arrays.copyOfRange(fields, 1, fields.length));
            } catch (Throwable error) {
                error.printStackTrace(System.err);
                status = 255;
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(realOut);
                System.setErr(realErr);
                if (input != null) {
                    System.setIn(realIn);
                    input.close();
                }
            }
            long tookMs = (System.nanoTime() - started) / 1_000_000;
            realOut.println("@@TOOL " + index++ + " exit=" + status + " ms=" + tookMs);
            realOut.println("@@OUT");
            realOut.print(out.toString(StandardCharsets.UTF_8));
            realOut.println("@@ERR");
            realOut.print(err.toString(StandardCharsets.UTF_8));
            realOut.println("@@END");
            realOut.flush();
        }
    }

    static int run(String mainClass, String[] args) throws Throwable {
        Method main = Class.forName(mainClass).getMethod("main", String[].class);
        firstStatus = null;
        try {
            main.invoke(null, (Object) args);
        } catch (InvocationTargetException error) {
            if (!(error.getCause() instanceof ToolExit)) {
                throw error.getCause();
            }
        }
        return firstStatus == null ? 0 : firstStatus;
    }
}
