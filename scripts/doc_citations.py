#!/usr/bin/env python3
"""Checks that every citation of a docs page names a heading the page has.

Code, tests, scripts and docs cite the pages of docs/ (DESIGN.md, facts.md and the guide's pages) by
heading title: `docs/DESIGN.md, "Tiers"` (or without the comma), `docs/python.md, "Install"`, or several
at once: `docs/DESIGN.md, "Embedded fatbins", "Tiers" and "A cold compile's first worker"`, and a page
links it as `[DESIGN.md](DESIGN.md), "Tiers"`. A title may
run over lines of a comment (the comment markers between are dropped). A title counts when it is the
whole text of a Markdown heading of that page (`## Tiers`, any level, outside fenced blocks).
Prints each citation of a title the page lacks (file, line, title) and exits 1; exits 0 when there is
none.

    doc_citations.py SOURCE_ROOT
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

# The folder of the pages that may be cited: each of its Markdown files, by the file name a citation spells
# (a section moved from DESIGN.md to a guide page is cited there, and checked alike).
DOCS = Path("docs")
DESIGN = "DESIGN.md"

# A cited page's file name, an optional Markdown link target, a comma or a space, and quoted titles joined
# by commas and "and".
TITLE = r'"([^"\n]+)"'
QUOTED = re.compile(TITLE)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
# What starts a comment's continuation line: C++'s, Python's and shell's markers, a block comment's star.
COMMENT = re.compile(r"^\s*(?://+!?|#+|\*+(?!\*)|--)?\s?")

SKIPPED_DIRS = {".git", "subprojects", "__pycache__", "node_modules"}
MAX_BYTES = 4 << 20


def headings(page: Path) -> set[str]:
    """The text of every Markdown heading of a page, outside fenced blocks."""
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match:
            found.add(" ".join(match.group(1).split()))
    return found


def flatten(text: str) -> tuple[str, list[int]]:
    """The text as one line, comment markers at line starts dropped and escaped quotes unescaped, with
    the offset where each source line starts in it (to name a citation's line)."""
    parts: list[str] = []
    starts: list[int] = []
    offset = 0
    for line in text.split("\n"):
        body = COMMENT.sub("", line, count=1).replace('\\"', '"')
        starts.append(offset)
        parts.append(body)
        offset += len(body) + 1
    return " ".join(parts), starts


def pages(root: Path) -> dict[str, Path]:
    """The pages that may be cited, by file name, with their path in the tree."""
    return {path.name: path.relative_to(root) for path in sorted((root / DOCS).glob("*.md")) if path.is_file()}


def citation_pattern(names) -> re.Pattern:
    """A citation of one of the named pages."""
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    return re.compile(r'(?<![\w-])(' + alternatives + r')(?:\]\([^)\s]*\))?\)?(?:,\s*|\s+)(' + TITLE +
                      r'(?:\s*(?:,\s*and|,|and)\s*' + TITLE + r')*)')


def citations(text: str, pattern: re.Pattern):
    """(line, page name, title) of each title cited in a file's text."""
    flat, starts = flatten(text)
    for match in pattern.finditer(flat):
        line = next(i for i in range(len(starts) - 1, -1, -1) if starts[i] <= match.start()) + 1
        for title in QUOTED.findall(match.group(2)):
            yield line, match.group(1), " ".join(title.split())


def tree_paths(root: Path) -> list[Path]:
    """The tree's files: in a git checkout, those git does not ignore (tracked or not; a contributor's
    ignored scratch copies left out); elsewhere every file, build directories (those Meson made:
    meson-info/) left out."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                                capture_output=True, timeout=60, check=True).stdout
        return sorted(root / p for p in listed.decode("utf-8", "replace").split("\0") if p)
    except (OSError, subprocess.SubprocessError):
        pass
    paths = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not (Path(folder) / d / "meson-info").is_dir())
        paths += [Path(folder) / name for name in sorted(files)]
    return paths


def source_files(root: Path):
    """Every text file of the tree (tree_paths)."""
    for path in tree_paths(root):
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_BYTES:
            continue
        try:
            yield path.relative_to(root), path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue


def check(root: Path) -> list[str]:
    """One line per citation of a title its page lacks."""
    cited = pages(root)
    titles = {name: headings(root / page) for name, page in cited.items()}
    pattern = citation_pattern(cited)
    wrong: list[str] = []
    for rel, text in source_files(root):
        if not any(name in text for name in cited):
            continue
        for line, page, title in citations(text, pattern):
            if title not in titles[page]:
                wrong.append(f'{rel}:{line}: {cited[page]} has no heading "{title}"')
    return wrong


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="the source tree (docs/DESIGN.md under it)")
    args = parser.parse_args(argv)
    if not (args.root / DOCS / DESIGN).is_file():
        print(f"doc_citations: {args.root / DOCS / DESIGN} is not a file", file=sys.stderr)
        return 2
    wrong = check(args.root)
    for line in wrong:
        print(line)
    if wrong:
        print(f"doc_citations: {len(wrong)} citation(s) name a heading their page does not have")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
