#!/usr/bin/env python3
"""Checks that the folders of runtime/src include one another only as runtime/src/folders.txt allows.

A folder uses another when one of its files includes a file of the other ("disk/lock.hpp" from jit/
makes jit use disk). folders.txt lists, for each folder, the folders it may use; every other include of
a folder is forbidden, and so is a folder the list does not name. Prints the allowed edges and the
includes counted on each; on a forbidden include, names each one (file, line) and exits 1.

The build runs it before compiling libkiln (--stamp, --depfile), so a wrong include fails the build; the
cpu suite's include_rule test runs it on the tree.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/[^"]+"', re.M)
SUFFIXES = {".hpp", ".cpp", ".h", ".cc", ".cuh", ".cu"}


def read_rule(path: Path) -> dict[str, list[str]]:
    """folder -> the folders it may use, in folders.txt's order."""
    rule: dict[str, list[str]] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        folder, sep, uses = line.partition(":")
        if not sep or not folder.strip():
            raise ValueError(f"{path}:{number}: expected 'folder: folder...', found '{raw}'")
        rule[folder.strip()] = uses.split()
    for folder, uses in rule.items():
        for used in uses:
            if used not in rule:
                raise ValueError(f"{path}: {folder} may use '{used}', which is not a folder of the list")
            # Each folder's library is linked against those it lists alone: they must reach no further.
            missing = [u for u in rule[used] if u not in uses]
            if missing:
                raise ValueError(f"{path}: {folder} may use {used}, which uses {', '.join(missing)}: "
                                 f"list {'them' if len(missing) > 1 else 'it'} for {folder} too")
    return rule


def includes(src: Path) -> tuple[dict[str, dict[str, list[str]]], list[Path]]:
    """folder -> {folder it includes: ["file:line: include", ...]}, and every file read."""
    graph: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    read: list[Path] = []
    for path in sorted(src.rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        read.append(path)
        folder = path.relative_to(src).parts[0]
        graph[folder]  # every folder, even one that includes nothing
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in INCLUDE.finditer(text):
            target = m.group(1)
            if target != folder and (src / target).is_dir():
                line = text.count("\n", 0, m.start()) + 1
                graph[folder][target].append(f"{path.relative_to(src)}:{line}: {m.group(0).strip()}")
    return graph, read


def write_depfile(depfile: Path, stamp: Path, src: Path, rule_file: Path, read: list[Path]) -> None:
    # The folders themselves too: a file added or removed changes the directory's time.
    deps = [rule_file, *sorted({p.parent for p in read} | {src}), *read]
    escaped = " ".join(str(p).replace(" ", "\\ ") for p in deps)
    depfile.write_text(f"{stamp}: {escaped}\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("src", nargs="?", type=Path, default=here / "src",
                        help="the runtime's source folder (default: %(default)s)")
    parser.add_argument("--rule", type=Path, help="the allowed edges (default: SRC/folders.txt)")
    parser.add_argument("--stamp", type=Path, help="written when the check passes (for the build)")
    parser.add_argument("--depfile", type=Path, help="the files read, as a Make rule for --stamp (for the build)")
    parser.add_argument("--quiet", action="store_true", help="print only what is wrong")
    args = parser.parse_args(argv)

    src: Path = args.src
    rule_file: Path = args.rule or src / "folders.txt"
    if not src.is_dir():
        print(f"folder_rule: no directory {src}", file=sys.stderr)
        return 2
    try:
        rule = read_rule(rule_file)
    except (OSError, ValueError) as e:
        print(f"folder_rule: {e}", file=sys.stderr)
        return 2
    graph, read = includes(src)

    wrong: list[str] = []
    for folder in sorted(graph):
        if folder not in rule:
            wrong.append(f"{folder}/ is not in {rule_file}: say which folders it may use")
            continue
        for target, lines in sorted(graph[folder].items()):
            if target not in rule[folder]:
                wrong += [f"{folder} -> {target} is not allowed ({folder} may use: "
                          f"{', '.join(rule[folder]) or 'nothing'}): {line}" for line in lines]
    if not args.quiet:
        for folder, uses in rule.items():
            counted = ", ".join(f"{t} ({len(graph[folder].get(t, []))})" for t in uses)
            print(f"{folder} -> {counted or '(nothing)'}")
    if wrong:
        print(f"FAILED: {len(wrong)} include(s) of runtime/src break the folder rule ({rule_file}):")
        for w in wrong:
            print(f"  {w}")
        return 1
    if not args.quiet:
        print(f"every include of the {len(graph)} folders of {src} is allowed by {rule_file}")
    if args.stamp:
        args.stamp.write_text("// runtime/folder_rule.py passed: every folder includes only what folders.txt allows\n",
                              encoding="utf-8")
    if args.depfile and args.stamp:
        write_depfile(args.depfile, args.stamp, src, rule_file, read)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
