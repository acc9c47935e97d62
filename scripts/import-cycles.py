#!/usr/bin/env python3
"""Checks that the folders of a crate do not import each other back.

Usage: scripts/import-cycles.py broker/src        exit 1 naming every pair, and one import line
                                                  of each direction, when two folders import
                                                  each other or a handler imports a handler
       scripts/import-cycles.py --self-test       shows on made-up trees that both rules fail
       scripts/import-cycles.py --counts DIR      prints the counts only, exit 0 (for a report)

A unit is a folder directly under the source root (`net/`, `cluster/`) or a top-level file
(`context.rs` is `context`); `lib.rs` is the unit `lib` and `main.rs`, a separate binary crate,
is not scanned. Every path beginning `crate::`, `super::` or `self::`, in code or in a `use`
tree (groups expanded), is resolved to the module it names; its unit is the first component of
that module's path, or `lib` when the item is defined in `lib.rs` itself. Inline modules
(`mod tests { .. }`) are followed so that `super::` inside them resolves as the compiler does.

Rule 1: no two units import each other (an import of a unit from itself does not count), and
no longer cycle either (a -> b -> c -> a): every cycle is named with one import line per step.
Rule 2: a file of `handlers/` imports another handler only through `handlers/common/`: a
handler file (`handlers/x.rs`) names no `handlers::y` other than `handlers::common` (and the
folder's own `mod.rs`, which routes requests to them, is exempt).

This is a text scan, not a compiler: it sees paths inside macros too, and nothing reached
through a glob import of another unit's names.
"""
import os
import re
import sys

from rust_text import strip_comments_and_strings
import tempfile

HANDLERS = "handlers"
HANDLERS_SHARED = "common"


def module_files(root):
    """Maps module path (tuple of names, () for the crate root) to its file."""
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(directory, name)
            parts = tuple(os.path.relpath(path, root)[:-3].split(os.sep))
            if parts == ("main",):
                continue
            if parts[-1] in ("mod", "lib"):
                parts = parts[:-1]
            files[parts] = path
    return files


def expand_use_tree(tree):
    """`a::{b, c::{d, e as f}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)

    def parse(s, pos, prefix):
        paths, current = [], prefix
        while pos < len(s):
            ch = s[pos]
            if ch == "{":
                inner, pos = parse(s, pos + 1, current)
                paths += inner
                current = None
            elif ch == "}":
                if current is not None and current != prefix:
                    paths.append(current)
                return paths, pos + 1
            elif ch == ",":
                if current is not None and current != prefix:
                    paths.append(current)
                current = prefix
                pos += 1
                continue
            else:
                word = re.match(r"(::)?(\w+|\*)", s[pos:])
                if not word:
                    pos += 1
                    continue
                name = word.group(2)
                if name == "self":
                    paths.append(prefix)
                    current = None
                else:
                    current = (current + "::" if current else "") + name
                pos += word.end()
                continue
            pos += 1
        if current is not None and current != prefix:
            paths.append(current)
        return paths, pos

    return parse(tree, 0, "")[0]


def scan(text, children=()):
    """Yields (line, module-path-suffix, path) for every path that starts `crate`, `super`,
    `self` or one of `children` (the file's child modules, named directly only in the crate root
    for a path to another unit); the suffix names the inline modules the path sits in."""
    stack = []  # (depth at which the inline module opened, name)
    depth = 0
    line = 1
    starts = "|".join(["crate", "super", "self", *sorted(children)])
    tokens = re.finditer(
        rf"\n|\{{|\}}|\bmod\s+(\w+)\s*\{{|\buse\s+((?:{starts})\b[^;]*);"
        rf"|(?<![\w:])((?:{starts})(?:::\w+)+)",
        text,
    )
    for token in tokens:
        whole = token.group(0)
        if whole == "\n":
            line += 1
            continue
        line_here = line
        line += whole.count("\n")
        if token.group(1):
            depth += 1
            stack.append((depth, token.group(1)))
        elif whole == "{":
            depth += 1
        elif whole == "}":
            if stack and stack[-1][0] == depth:
                stack.pop()
            depth -= 1
        elif token.group(2):
            inside = tuple(name for _, name in stack)
            for path in expand_use_tree(token.group(2)):
                yield line_here, inside, path
        else:
            yield line_here, tuple(name for _, name in stack), token.group(3)


def resolve(module, path, files):
    """The absolute module path `path` (crate::/super::/self::...) names from `module`."""
    parts = path.split("::")
    if parts[0] == "crate":
        base, rest = (), parts[1:]
    elif parts[0] not in ("self", "super"):
        base, rest = tuple(module), parts
    else:
        base = list(module)
        while parts and parts[0] in ("self", "super"):
            if parts[0] == "super":
                if not base:
                    return None
                base.pop()
            parts = parts[1:]
        base, rest = tuple(base), parts
    full = base + tuple(rest)
    for end in range(len(full), -1, -1):
        if full[:end] in files:
            return full[:end] if end else ("lib",)
    return full[:1] if full else ("lib",)


def unit_of(module):
    return module[0] if module else "lib"


def imports(root):
    """[(from unit, to unit, from module, to module, 'file:line')], cross-unit only."""
    files = module_files(root)
    found = []
    for module, path in sorted(files.items()):
        with open(path, encoding="utf-8") as source:
            text = strip_comments_and_strings(source.read())
        children = [m[0] for m in files if len(m) == 1] if module == () else ()
        for line, inline, name in scan(text, children):
            here = module + inline
            target = resolve(here, name, files)
            if target is None:
                continue
            if unit_of(module) != unit_of(target) or module[:1] == (HANDLERS,):
                where = f"{os.path.relpath(path, root)}:{line}"
                found.append((unit_of(module), unit_of(target), module, target, where))
    return found


def pairs(found):
    """{(from unit, to unit): ['file:line' of each distinct (file, target module) import]} and
    the unit pairs that import each other."""
    by_edge, seen = {}, set()
    for source, target, module, target_module, where in found:
        if source != target and (module, target_module) not in seen:
            seen.add((module, target_module))
            by_edge.setdefault((source, target), []).append(where)
    mutual = sorted((a, b) for (a, b) in by_edge if a < b and (b, a) in by_edge)
    return by_edge, mutual


def longer_cycles(by_edge):
    """One shortest cycle of three or more units through each unit that is on one, deduplicated
    (pairs are reported on their own)."""
    graph = {}
    for source, target in by_edge:
        graph.setdefault(source, set()).add(target)
    found = set()
    for start in sorted(graph):
        # Breadth-first from start's successors back to start, never through a 2-cycle's step.
        paths = [[start, nxt] for nxt in sorted(graph[start])]
        seen = {start}
        while paths:
            longer = []
            for path in paths:
                last = path[-1]
                if last == start:
                    if len(path) > 3:
                        i = path.index(min(path[:-1]))
                        found.add(tuple(path[i:-1] + path[:i]))
                    continue
                if last in seen:
                    continue
                seen.add(last)
                longer += [path + [nxt] for nxt in sorted(graph.get(last, ()))]
            paths = longer
    return sorted(found)


def handler_violations(found):
    bad, seen = [], set()
    for source, target, module, target_module, where in found:
        if (module, target_module) in seen:
            continue
        seen.add((module, target_module))
        if source != HANDLERS or target != HANDLERS or len(module) < 2:
            continue
        if len(target_module) < 2 or target_module[1] == HANDLERS_SHARED:
            continue
        if module[1] != target_module[1] and module[1] != HANDLERS_SHARED:
            bad.append((module, target_module, where))
    return bad


def counts(found):
    by_edge, mutual = pairs(found)
    cross = sum(len(lines) for lines in by_edge.values())
    back = sum(min(len(by_edge[(a, b)]), len(by_edge[(b, a)])) for a, b in mutual)
    return {
        "cross-folder imports": cross,
        "folder edges": len(by_edge),
        "pairs importing each other": len(mutual),
        "imports running back up": back,
    }


def check(root, out=sys.stdout):
    found = imports(root)
    by_edge, mutual = pairs(found)
    bad_handlers = handler_violations(found)
    summary = ", ".join(f"{v} {k}" for k, v in counts(found).items())
    cycles = longer_cycles(by_edge)
    print(
        f"{root}: {summary}, {len(cycles)} longer cycles, "
        f"{len(bad_handlers)} handler-to-handler imports",
        file=out,
    )
    for a, b in mutual:
        print(
            f"pair {a} <-> {b}: {a} -> {b} at {by_edge[(a, b)][0]} "
            f"({len(by_edge[(a, b)])} lines), {b} -> {a} at {by_edge[(b, a)][0]} "
            f"({len(by_edge[(b, a)])} lines)",
            file=out,
        )
    for cycle in cycles:
        steps = list(zip(cycle, cycle[1:] + cycle[:1]))
        lines = ", ".join(f"{a} -> {b} at {by_edge[(a, b)][0]}" for a, b in steps)
        print(f"cycle {' -> '.join(cycle + cycle[:1])}: {lines}", file=out)
    for module, target, where in bad_handlers:
        print(
            f"handler {'/'.join(module)} imports handler {'/'.join(target)} at {where}; "
            f"share it through {HANDLERS}/{HANDLERS_SHARED}/",
            file=out,
        )
    return 1 if mutual or cycles or bad_handlers else 0


SELF_TEST_TREES = {
    "mutual pair through super::": (
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a/mod.rs": "mod x;\n",
            "a/x.rs": "use super::super::b::Thing;\n",
            "b/mod.rs": "use crate::a::x::Other; // a comment naming crate::c\n",
        },
        1,
    ),
    "a use group reaching back": (
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::{b::{One, two::Two}};\n",
            "b/mod.rs": "mod two;\n",
            "b/two.rs": "fn f() { super::super::a::go(); }\n",
        },
        1,
    ),
    "a cycle of three folders": (
        {
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b::B;\n",
            "b.rs": "use crate::c::C;\n",
            "c.rs": "use crate::a::A;\n",
        },
        1,
    ),
    "handler importing a handler": (
        {
            "lib.rs": "mod handlers;\n",
            "handlers/mod.rs": "mod produce;\nmod metadata;\nmod common;\n",
            "handlers/produce.rs": "use super::metadata::auto_create;\n",
            "handlers/metadata.rs": "use super::common::leader;\n",
            "handlers/common/mod.rs": "",
        },
        1,
    ),
    "the crate root named back": (
        {
            "lib.rs": "mod a;\nfn start() { a::go(); }\npub struct Root;\n",
            "a.rs": "use crate::Root;\n",
        },
        1,
    ),
    "a clean tree": (
        {
            "lib.rs": "mod a;\nmod b;\nmod handlers;\n",
            "a/mod.rs": "use crate::b::Thing;\n#[cfg(test)]\nmod tests {\n    use super::*;\n"
            "    use super::super::b::Other;\n}\n",
            "b/mod.rs": 'const S: &str = "crate::a::Nothing";\n',
            "handlers/mod.rs": "mod produce;\nmod common;\nuse produce::handle;\n",
            "handlers/produce.rs": "use super::common::leader;\nuse crate::a::Thing;\n",
            "handlers/common/mod.rs": "use crate::b::Other;\n",
        },
        0,
    ),
}


def self_test():
    failures = 0
    for name, (tree, expected) in SELF_TEST_TREES.items():
        with tempfile.TemporaryDirectory() as root:
            for relative, text in tree.items():
                path = os.path.join(root, relative)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as file:
                    file.write(text)
            with open(os.devnull, "w", encoding="utf-8") as quiet:
                status = check(root, out=quiet)
        verdict = "ok" if status == expected else "WRONG"
        failures += status != expected
        print(f"self-test {name}: exit {status}, expected {expected}: {verdict}")
    assert expand_use_tree("a::{b, c::{d, e as f}, self}") == ["a::b", "a::c::d", "a::c::e", "a"]
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    if len(sys.argv) == 3 and sys.argv[1] == "--counts":
        for key, value in counts(imports(sys.argv[2])).items():
            print(f"{key}: {value}")
        sys.exit(0)
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(check(sys.argv[1]))


if __name__ == "__main__":
    main()
