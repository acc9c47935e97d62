#!/usr/bin/env python3
"""Holds the library crates' functions to at most 70 lines, with a ratchet for older long ones.

Usage:
  scripts/function-lengths.py            check: exit 1 naming every function over the limit that
                                         is not in the allowance file, or that grew past its entry
  scripts/function-lengths.py --update   rewrite the allowance file from today's tree (only to
                                         shrink it: a review should see every line it adds)
  scripts/function-lengths.py --self-test

A function's length is counted from the line of its `fn` keyword to the line of the brace that
closes its body, blank and comment lines included (what a reader scrolls through). Test code is
left out: files named `tests.rs`, `*_tests.rs` or under a `tests/` folder, files of modules
declared `#[cfg(test)] mod name;`, and inline `#[cfg(test)] mod name { ... }` blocks.
This is a text scan that tracks braces outside strings, chars and comments; it does not expand
macros, and a `fn` inside a macro body counts as a function.
"""
import os
import re
import sys

from rust_text import strip_comments_and_strings

LIMIT_LINES = 70
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ALLOWANCE = os.path.join(ROOT, "scripts", "function-lengths.allow")
# The library crates: every workspace crate's `src/` except the benches' and the tests crate's.
LIBRARY_SOURCES = [
    "protocol/src", "storage/src", "placement/src", "meta/src", "cluster/src", "group/src",
    "broker/src",
]
FN_RE = re.compile(r"\bfn\s+([A-Za-z_][A-Za-z0-9_]*)")


INLINE_TEST_MOD_RE = re.compile(r"^#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+\w+\s*\{", re.M)


def blank_inline_test_modules(code):
    """Blanks every `#[cfg(test)] mod name { ... }` block of stripped code (newlines kept)."""
    while True:
        m = INLINE_TEST_MOD_RE.search(code)
        if not m:
            return code
        depth, k = 0, m.end() - 1
        while k < len(code):
            depth += {"{": 1, "}": -1}.get(code[k], 0)
            if depth == 0:
                break
            k += 1
        code = code[:m.start()] + re.sub(r"[^\n]", " ", code[m.start():k + 1]) + code[k + 1:]


def functions_in(text):
    """Yields (name, first_line, line_count) for every function body in the code text."""
    code = strip_comments_and_strings(text)
    code = blank_inline_test_modules(code)
    line_starts = [0] + [m.end() for m in re.finditer("\n", code)]

    def line_of(offset):
        lo, hi = 0, len(line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    for m in FN_RE.finditer(code):
        # The body opens at the first `{` before any `;` (a `;` first means a declaration only).
        j, depth_paren = m.end(), 0
        while j < len(code):
            ch = code[j]
            if ch in "([":
                depth_paren += 1
            elif ch in ")]":
                depth_paren -= 1
            elif ch == ";" and depth_paren == 0:
                j = -1
                break
            elif ch == "{" and depth_paren == 0:
                break
            j += 1
        if j < 0 or j >= len(code):
            continue
        depth, k = 0, j
        while k < len(code):
            if code[k] == "{":
                depth += 1
            elif code[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        first, last = line_of(m.start()), line_of(k)
        yield m.group(1), first, last - first + 1


def is_test_file(path):
    name = os.path.basename(path)
    return name == "tests.rs" or name.endswith("_tests.rs") or "/tests/" in path


TEST_MOD_RE = re.compile(r"^#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+(\w+)\s*;", re.M)


def test_module_files(path, text):
    """The files of the modules that `path` declares only under `#[cfg(test)]`."""
    directory, name = os.path.split(path)
    if name not in ("mod.rs", "lib.rs", "main.rs"):
        directory = os.path.join(directory, name[:-3])
    files = set()
    for m in TEST_MOD_RE.finditer(text):
        files.add(os.path.join(directory, m.group(1) + ".rs"))
        files.add(os.path.join(directory, m.group(1), "mod.rs"))
    return files


def long_functions(root):
    found = {}
    for source in LIBRARY_SOURCES:
        base = os.path.join(root, source)
        sources, test_files = {}, set()
        for directory, _, names in os.walk(base):
            for name in sorted(names):
                path = os.path.join(directory, name)
                if name.endswith(".rs"):
                    with open(path, encoding="utf-8") as f:
                        sources[path] = f.read()
                    test_files |= test_module_files(path, sources[path])
        for path, text in sorted(sources.items()):
            rel = os.path.relpath(path, root)
            if path in test_files or is_test_file(rel):
                continue
            for fn, _, lines in functions_in(text):
                if lines > LIMIT_LINES:
                    key = f"{rel}::{fn}"
                    # Two functions of one name in one file: keep the longer, one entry.
                    found[key] = max(lines, found.get(key, 0))
    return found


def read_allowance(path):
    allowed = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    key, lines = line.rsplit(" ", 1)
                    allowed[key] = int(lines)
    return allowed


def check(found, allowed):
    problems = []
    for key, lines in sorted(found.items()):
        if key not in allowed:
            problems.append(f"{key}: {lines} lines (limit {LIMIT_LINES}; split it)")
        elif lines > allowed[key]:
            problems.append(f"{key}: grew from {allowed[key]} to {lines} lines (limit "
                            f"{LIMIT_LINES}; it may only shrink)")
    return problems


def write_allowance(path, found):
    with open(path, "w", encoding="utf-8") as f:
        f.write("# Functions over 70 lines that predate the limit, with their length: they may\n"
                "# shrink, never grow, and a new one may not join. scripts/function-lengths.py\n"
                "# --update rewrites this file from the tree.\n")
        for key, lines in sorted(found.items()):
            f.write(f"{key} {lines}\n")


def self_test():
    body = "\n".join(["    let x = 1;"] * 80)
    text = (f"fn long() {{\n{body}\n}}\n"
            "fn short(s: &str) -> &str { \"}\" }\n"
            "// fn commented() {\n"
            "fn decl();\n"
            f"#[cfg(test)]\nmod tests {{ fn long_test() {{\n{body}\n}} }}\n"
            f"#[cfg(test)]\nmod sim;\nfn after() {{\n{body}\n}}\n")
    got = list(functions_in(text))
    assert got == [("long", 1, 82), ("short", 83, 1), ("after", 171, 82)], got
    assert check({"a.rs::long": 82}, {}) and not check({"a.rs::long": 82}, {"a.rs::long": 82})
    assert check({"a.rs::long": 83}, {"a.rs::long": 82})
    print("function-lengths self-test passed")


def main(argv):
    if "--self-test" in argv:
        self_test()
        return 0
    found = long_functions(ROOT)
    if "--update" in argv:
        write_allowance(ALLOWANCE, found)
        print(f"{len(found)} functions over {LIMIT_LINES} lines written to {ALLOWANCE}")
        return 0
    problems = check(found, read_allowance(ALLOWANCE))
    for problem in problems:
        print(problem)
    print(f"{len(found)} functions over {LIMIT_LINES} lines in the library crates "
          f"({len(problems)} not allowed)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
