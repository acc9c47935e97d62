#!/usr/bin/env python3
"""Fails when a document reference in the repository does not resolve.

Scans the tracked source and documentation (*.rs, *.py, *.sh, *.toml, *.yml, *.md; not the
generated reports and run data under bench/reports/, nor fuzz or frame corpora) for every
`something.md` path and checks that it names a file of the repository:
- relative to the referring file's folder (markdown links), or to the repository root;
- a path with folders may also be the tail of a tracked path (an output name under a report
  folder, such as `latency-data/latency-skiff.md`);
- a bare file name must be a tracked file outside docs/ (a report a tool writes, a README); a
  bare name that exists only under docs/ must be written as its docs/ path, so a reader can
  open it (`docs/design/cluster.md`, not `cluster.md`), except inside docs/ itself.
When the path is followed by section marks (`docs/design/cluster.md §2a, §3` or `§5.3–5.4`),
each section must be a heading of that document (`## 2a.`, `### 5.3 ...`); a mark three levels
deep (`§6.1.26`, an item of a numbered list) needs its two-level heading.

Skipped: absolute paths (/tmp/...), placeholders (`$REPORT.md`, `<kind>.md`, `OUT_DIR/NAME.md`),
and names a tool writes at a path the operator chooses (OUTPUT_NAMES below).

Usage: scripts/doc-references.py [--self-test]. Prints each dangling reference as
`file:line: reference: why` and exits 1 if there is one.
"""

import os
import re
import subprocess
import sys

SCANNED_SUFFIXES = (".rs", ".py", ".sh", ".toml", ".yml", ".yaml", ".md")
# Generated output and raw data: what they say is what a run wrote, not a reference to keep.
SKIPPED_PREFIXES = ("bench/reports/", "fuzz/corpus/", "tests/corpus/")
# This script's own docs and self-test are made of examples, some dangling on purpose.
SKIPPED_FILES = {"scripts/doc-references.py"}
# Report names tools write into a folder the operator passes (`--out`), never committed.
OUTPUT_NAMES = {"spread.md", "scale.md"}

REFERENCE = re.compile(r"(?<![\w/.$<{-])((?:\.\.?/)*[\w.-]*[\w-](?:/[\w.-]+)*\.md)(?![\w/-])")
SECTIONS = re.compile(r"\s*\(?§\s?([0-9]+[a-z]?(?:\.[0-9]+[a-z]?)*)")
MORE_SECTIONS = re.compile(r"(?:\s*(?:,|–|-|and)\s*§?\s?)([0-9]+[a-z]?(?:\.[0-9]+[a-z]?)*)")
HEADING = re.compile(r"^#{1,6}\s+([0-9]+[a-z]?(?:\.[0-9]+[a-z]?)*)\.?\s")


def tracked_files(root):
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True
    ).stdout.decode()
    return [path for path in out.split("\0") if path]


def is_placeholder(reference):
    parts = reference[: -len(".md")].split("/")
    return any(re.fullmatch(r"[A-Z][A-Z0-9_]*", part) for part in parts)


def sections_of(text):
    return {m.group(1) for line in text.splitlines() if (m := HEADING.match(line))}


def section_marks(rest):
    """The section marks right after a reference: `§2a, §3`, `§5.3–5.4`, `§2–§3, §7`."""
    first = SECTIONS.match(rest)
    if not first:
        return []
    marks = [first.group(1)]
    position = first.end()
    while True:
        more = MORE_SECTIONS.match(rest, position)
        if not more:
            return marks
        marks.append(more.group(1))
        position = more.end()


def resolve(reference, referrer, files, root):
    """The tracked path `reference` names from `referrer`, or None with why."""
    folder = os.path.dirname(referrer)
    candidates = [os.path.normpath(os.path.join(folder, reference))]
    if "/" in reference:
        candidates.append(os.path.normpath(reference))
    for candidate in candidates:
        if candidate in files:
            return candidate, None
    if "/" in reference and not reference.startswith("."):
        tails = [path for path in files if path.endswith("/" + reference)]
        if tails:
            return tails[0], None
        return None, "no such file in the repository"
    if "/" in reference:
        return None, "no such file relative to " + (folder or "the root")
    if reference in OUTPUT_NAMES:
        return "", None
    named = [path for path in files if os.path.basename(path) == reference]
    outside_docs = [path for path in named if not path.startswith("docs/")]
    if outside_docs:
        return outside_docs[0], None
    if named:
        return None, "write it as its path: " + " or ".join(sorted(named))
    return None, "no file of that name in the repository"


def check(root):
    files = set(tracked_files(root))
    texts = {}
    problems = []
    for path in sorted(files):
        if (
            not path.endswith(SCANNED_SUFFIXES)
            or path.startswith(SKIPPED_PREFIXES)
            or path in SKIPPED_FILES
        ):
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(lines, 1):
            for match in REFERENCE.finditer(line):
                reference = match.group(1)
                if reference.startswith("/") or is_placeholder(reference):
                    continue
                target, why = resolve(reference, path, files, root)
                if target is None:
                    problems.append(f"{path}:{number}: {reference}: {why}")
                    continue
                marks = section_marks(line[match.end():])
                if not marks or not target:
                    continue
                if target not in texts:
                    with open(os.path.join(root, target), encoding="utf-8") as handle:
                        texts[target] = sections_of(handle.read())
                for mark in marks:
                    wanted = mark if mark.count(".") < 2 else mark.rsplit(".", 1)[0]
                    if wanted not in texts[target]:
                        problems.append(
                            f"{path}:{number}: {reference} §{mark}: {target} has no such section"
                        )
    return problems


def self_test():
    assert section_marks(" §2a, §3): x") == ["2a", "3"]
    assert section_marks(" §5.3–5.4)") == ["5.3", "5.4"]
    assert section_marks(" §2–§3, §7).") == ["2", "3", "7"]
    assert section_marks(" practice 6") == []
    assert is_placeholder("OUT_DIR/NAME.md") and not is_placeholder("docs/style.md")
    found = [m.group(1) for m in REFERENCE.finditer(
        "see docs/design/cluster.md §3, $REPORT.md, <kind>.md, [a](../b.md) and x.md.")]
    assert found == ["docs/design/cluster.md", "../b.md", "x.md"], found
    files = {"docs/design/cluster.md", "bench/reports/kip283.md", "docs/style.md"}
    assert resolve("cluster.md", "cluster/src/lib.rs", files, ".")[0] is None
    assert resolve("cluster.md", "docs/design/groups.md", files, ".")[0] == "docs/design/cluster.md"
    assert resolve("kip283.md", "bench/src/x.rs", files, ".")[0] == "bench/reports/kip283.md"
    assert resolve("../style.md", "docs/design/x.md", files, ".")[0] == "docs/style.md"
    assert resolve("docs/nope.md", "README.md", files, ".")[0] is None
    print("doc-references self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    root = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], check=True, capture_output=True, text=True
    ).stdout.strip()
    problems = check(root)
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} document reference(s) do not resolve", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
