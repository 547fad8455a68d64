"""The documentation's examples as the test suites run them: a fenced block that follows a
`<!-- tested: NAME -->` line in README.md or a page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

MARKED = re.compile(r"^<!-- tested: (.+?) -->\n```[a-z]*\n(.*?)^```$", re.M | re.S)


def pages(source: Path) -> list[Path]:
    """The pages whose tested blocks count: the README and the guide."""
    return [source / "README.md", *sorted((source / "docs").glob("*.md"))]


def marked(source: Path) -> dict[str, tuple[Path, str]]:
    """Every tested block of every page: name -> (page, text). A name used twice is an error."""
    found: dict[str, tuple[Path, str]] = {}
    for page in pages(source):
        for m in MARKED.finditer(page.read_text(encoding="utf-8")):
            if m.group(1) in found:
                raise LookupError(f"'<!-- tested: {m.group(1)} -->' in {found[m.group(1)][0]} and {page}")
            found[m.group(1)] = (page, m.group(2))
    return found


def block(where: Path, name: str) -> str:
    """The text of the fenced block after `<!-- tested: name -->`: in the page `where`, or, when `where`
    is kiln's source tree, in whichever page of it has that block."""
    if where.is_dir():
        blocks = marked(where)
        if name not in blocks:
            raise LookupError(f"no page of {where} has a fenced block after '<!-- tested: {name} -->'")
        return blocks[name][1]
    m = re.search(rf"^<!-- tested: {re.escape(name)} -->\n```[a-z]*\n(.*?)^```$", where.read_text(encoding="utf-8"),
                  re.M | re.S)
    if not m:
        raise LookupError(f"{where}: no fenced block after '<!-- tested: {name} -->'")
    return m.group(1)


def quickstart_precompile(source: Path) -> list[str]:
    """The README quickstart's precompile command, as arguments after the tool's name."""
    for line in block(source, "quickstart run").splitlines():
        words = line.split("#")[0].split()
        if len(words) > 1 and words[0].endswith("-kiln") and words[1] == "precompile":
            return words[1:]
    raise LookupError("the README's 'quickstart run' block has no `...-kiln precompile` line")
