package skiff;

import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.common.errors.UnsupportedVersionException;

/**
 * The results of one test program, one line per named check, read by tests/clients/java_programs.py:
 * {@code RESULT <name> PASS}, {@code RESULT <name> FAIL <why>} or {@code RESULT <name> UNSUPPORTED <why>}
 * (the broker answered UNSUPPORTED_VERSION: an API Skiff does not have yet). A check's failure never
 * stops the next check, so one JVM reports every check.
 */
final class Checks {
    /** A check's body; any exception is its failure. */
    interface Body {
        void run() throws Exception;
    }

    /** Every client call is bounded: a broker that does not answer fails the check, never hangs it. */
    static final int REQUEST_TIMEOUT_MS = 10_000;
    static final int API_TIMEOUT_MS = 20_000;
    static final long POLL_DEADLINE_MS = 30_000;

    private final List<String> failed = new ArrayList<>();

    void run(String name, Body body) {
        try {
            body.run();
            System.out.println("RESULT " + name + " PASS");
        } catch (Throwable error) {
            Throwable cause = rootCause(error);
            String status = cause instanceof UnsupportedVersionException ? "UNSUPPORTED" : "FAIL";
            System.out.println("RESULT " + name + " " + status + " " + oneLine(cause));
            error.printStackTrace(System.err);
            failed.add(name);
        }
        System.out.flush();
    }

    /** Exit status of the program: 0 only when every check passed. */
    int exitCode() {
        return failed.isEmpty() ? 0 : 1;
    }

    static void check(boolean condition, String what) {
        if (!condition) {
            throw new AssertionError(what);
        }
    }

    static void equal(Object expected, Object actual, String what) {
        if (expected == null ? actual != null : !expected.equals(actual)) {
            throw new AssertionError(what + ": expected " + expected + ", got " + actual);
        }
    }

    /** Runs {@code body}, which must fail with {@code expected} (as the cause of an ExecutionException or itself). */
    static void expectError(Class<? extends Throwable> expected, Body body) throws Exception {
        try {
            body.run();
        } catch (ExecutionException | RuntimeException error) {
            Throwable cause = error instanceof ExecutionException ? error.getCause() : error;
            if (cause instanceof UnsupportedVersionException) {
                throw (UnsupportedVersionException) cause;
            }
            if (expected.isInstance(cause)) {
                return;
            }
            throw new AssertionError("expected " + expected.getSimpleName() + ", got " + oneLine(cause), cause);
        }
        throw new AssertionError("expected " + expected.getSimpleName() + ", but the call succeeded");
    }

    static Properties common(String bootstrap) {
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("request.timeout.ms", String.valueOf(REQUEST_TIMEOUT_MS));
        props.put("default.api.timeout.ms", String.valueOf(API_TIMEOUT_MS));
        return props;
    }

    /** The value of record {@code index} of a test stream: compressible (runs) and unique. */
    static byte[] value(String prefix, int index, int size) {
        String unit = prefix + "-value-" + index + "-";
        return unit.repeat(size / unit.length() + 1).substring(0, size).getBytes();
    }

    static byte[] key(String prefix, int index) {
        return (prefix + "-key-" + index).getBytes();
    }

    private static Throwable rootCause(Throwable error) {
        Throwable cause = error;
        while ((cause instanceof ExecutionException || cause.getClass() == RuntimeException.class)
                && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    static String oneLine(Throwable error) {
        return (error.getClass().getSimpleName() + ": " + error.getMessage()).replace('\n', ' ');
    }
}
