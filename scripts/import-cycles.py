#!/usr/bin/env python3
"""Checks that a crate's modules import each other without a cycle.

Usage: scripts/import-cycles.py broker/src   (exit 1 and the cycles when there are any)

Nodes are source files (`a/mod.rs` is `a`); there is an edge a -> b when a names `crate::<path>`
(in code, not in comments, and not in an inline `#[cfg(test)] mod tests`) and the longest prefix of
that path that is a file is b. A strongly connected component of more than one file is a cycle.
This is a text scan, not a compiler: it sees every `crate::` path, including those inside macros,
and nothing reached through `super::` or a glob re-export.
"""
import os
import re
import sys


def modules(root):
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(directory, name)
                parts = tuple(os.path.relpath(path, root)[:-3].split(os.sep))
                if parts[-1] in ("mod", "lib", "main"):
                    parts = parts[:-1]
                files[parts] = path
    return files


def edges_of(files):
    def resolve(path):
        for end in range(len(path), 0, -1):
            if tuple(path[:end]) in files:
                return tuple(path[:end])
        return None

    edges = {module: set() for module in files}
    for module, path in files.items():
        with open(path, encoding="utf-8") as source:
            text = source.read()
        text = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", text, flags=re.S)
        text = re.sub(r"//[^\n]*", "", text)
        names = [m.group(1) for m in re.finditer(r"crate::((?:\w+::)*\w+)", text)]
        for group in re.finditer(r"\buse crate::\{([^;]*)\}", text, flags=re.S):
            names += re.findall(r"(\w+(?:::\w+)*)", group.group(1))
        for name in names:
            target = resolve(name.split("::"))
            if target is not None and target != module:
                edges[module].add(target)
    return edges


def cycles(edges):
    """Tarjan's strongly connected components, iteratively; returns those of more than one node."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(edges[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted("/".join(m) for m in component))
    return found


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    files = modules(sys.argv[1])
    edges = edges_of(files)
    found = cycles(edges)
    print(f"{len(files)} files, {sum(map(len, edges.values()))} imports, {len(found)} cycles")
    for component in found:
        print(f"cycle of {len(component)} files: {' '.join(component)}")
    sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
