#!/usr/bin/env python3
"""Fails when the folders of runtime/src include each other in a cycle.

A folder depends on another when one of its files includes a file of the other ("disk/lock.hpp" from
jit/ makes jit depend on disk). The folders must form a graph whose includes run one way: the tiers
over the chain's interface over base (docs/DESIGN.md, "Folders"). Prints the graph with the number of
includes on each edge; with a cycle, names the cycle and each include that closes it.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"', re.M)


def folder_graph(src: Path) -> dict[str, dict[str, list[str]]]:
    """folder -> {folder it includes: ["file: include", ...]}"""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(src.rglob("*")):
        if path.suffix not in {".hpp", ".cpp", ".h", ".cc", ".cuh", ".cu"}:
            continue
        folder = path.relative_to(src).parts[0]
        graph[folder]  # every folder, even one that includes nothing
        for m in INCLUDE.finditer(path.read_text(encoding="utf-8", errors="replace")):
            target = m.group(1)
            if target != folder and (src / target).is_dir():
                graph[folder][target].append(f"{path.relative_to(src)}: {m.group(0).strip()}")
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """A cycle of folders (first folder repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, {})):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent / "runtime" / "src"
    if not src.is_dir():
        print(f"include_cycles: no directory {src}", file=sys.stderr)
        return 2
    graph = folder_graph(src)
    for folder in sorted(graph):
        edges = ", ".join(f"{t} ({len(v)})" for t, v in sorted(graph[folder].items()))
        print(f"{folder} -> {edges or '(nothing)'}")
    cycle = find_cycle(graph)
    if cycle is None:
        print(f"no folder-level include cycle among {len(graph)} folders of {src}")
        return 0
    print(f"FAILED: the folders of {src} include each other in a cycle: {' -> '.join(cycle)}")
    for a, b in zip(cycle, cycle[1:]):
        for line in graph[a][b]:
            print(f"  {a} -> {b}: {line}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
