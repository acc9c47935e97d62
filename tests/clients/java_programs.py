"""Apache Kafka's Java client and tools for the real-client suite: the jars are resolved into the
user's Maven cache by scripts/install-clients.sh (tests/clients/java/pom.xml and legacy/pom.xml),
which leaves their classpaths in tests/clients/java/target/. The Java test programs are compiled
here once per pytest session with javac, then each runs in one JVM and reports one
`RESULT <check> PASS|FAIL|UNSUPPORTED <why>` line per check."""

import pathlib
import subprocess
import tempfile

JAVA_DIR = pathlib.Path(__file__).resolve().parent / "java"
TARGET = JAVA_DIR / "target"
LEGACY_VERSIONS = [
    line.strip()
    for line in (JAVA_DIR / "legacy" / "versions.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]
# A JVM program's own checks are bounded (tests/clients/java/src/skiff/Checks.java); this only
# catches a JVM that hangs outright.
PROGRAM_TIMEOUT_S = 240
JVM_OPTIONS = [
    "-XX:+UseSerialGC",  # two shared cores: no parallel GC threads
    "-XX:TieredStopAtLevel=1",  # short programs: C1 only starts faster
    "-Xshare:auto",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
]


class AdminApiMissing(AssertionError):
    """The broker answered UNSUPPORTED_VERSION for an admin API (issue 14 item 4, not in Skiff yet)."""


def classpath(name="classpath.txt"):
    path = TARGET / name
    if not path.exists():
        raise AssertionError(f"{path} is missing: run scripts/install-clients.sh (it resolves the jars with mvn)")
    return path.read_text().strip()


def legacy_classpath(version):
    return classpath(f"classpath-legacy-{version}.txt")


def legacy_generation(version):
    """The release the legacy program is compiled against for `version`: 0.10.0 changed
    KafkaConsumer.subscribe/assign from List to Collection (binary-incompatible), so a 0.9 build and
    a 0.10+ build cover every release."""
    return "0.9.0.1" if version.startswith("0.9.") else "0.10.0.1"


def javac(sources, cp, out_dir):
    result = subprocess.run(
        ["javac", "-Xlint:all,-path,-classfile,-processing", "-Werror", "-d", str(out_dir), "-cp", cp, *map(str, sources)],
        capture_output=True, text=True, timeout=PROGRAM_TIMEOUT_S,
    )
    if result.returncode != 0:
        raise AssertionError(f"javac failed:\n{result.stdout}\n{result.stderr}")
    return out_dir


def compile_modern(out_dir):
    return javac(sorted((JAVA_DIR / "src").rglob("*.java")), classpath(), out_dir)


def compile_legacy(generation, out_dir):
    return javac(sorted((JAVA_DIR / "legacy" / "src").rglob("*.java")), legacy_classpath(generation), out_dir)


def run_java(classes, cp, main_class, *args, stdin=None):
    """Runs one program; returns (exit code, stdout, stderr)."""
    result = subprocess.run(
        ["java", *JVM_OPTIONS, "-cp", f"{classes}:{cp}", main_class, *map(str, args)],
        input=stdin, capture_output=True, text=True, timeout=PROGRAM_TIMEOUT_S,
    )
    return result.returncode, result.stdout, result.stderr


def results(stdout):
    """{check: (status, detail)} from a program's RESULT lines."""
    found = {}
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            parts = line.split(" ", 3)
            found[parts[1]] = (parts[2], parts[3] if len(parts) > 3 else "")
    return found


class ProgramRun:
    """One program's run, shared by the tests that each assert one of its checks."""

    def __init__(self, code, stdout, stderr):
        self.code, self.stdout, self.stderr = code, stdout, stderr
        self.results = results(stdout)

    def expect_pass(self, check):
        status, detail = self.results.get(check, ("MISSING", "no RESULT line"))
        if status == "UNSUPPORTED":
            raise AdminApiMissing(f"{check}: {detail}")
        assert status == "PASS", f"{check}: {status} {detail}\n--- stdout\n{self.stdout}\n--- stderr (tail)\n{self.stderr[-6000:]}"


def run_program(classes, main_class, *args):
    return ProgramRun(*run_java(classes, classpath(), main_class, *args))


def run_tools(classes, commands):
    """Runs Kafka's tools (lists of [main class, args...]) in one JVM; returns [(exit, stdout, stderr)]."""
    script = "".join("\t".join(map(str, command)) + "\n" for command in commands)
    code, stdout, stderr = run_java(classes, classpath(), "skiff.ToolRunner", stdin=script)
    assert code == 0, f"ToolRunner failed ({code}):\n{stdout}\n{stderr[-6000:]}"
    runs = []
    for block in stdout.split("@@TOOL ")[1:]:
        header, rest = block.split("\n", 1)
        status = int(header.split("exit=")[1].split()[0])
        out, rest = rest.split("@@OUT\n", 1)[1].split("@@ERR\n", 1)
        err = rest.split("@@END\n", 1)[0]
        runs.append((status, out, err))
    assert len(runs) == len(commands), f"ran {len(runs)} of {len(commands)} tools:\n{stdout}\n{stderr[-6000:]}"
    return runs


def temp_dir(prefix):
    return pathlib.Path(tempfile.mkdtemp(prefix=prefix))
