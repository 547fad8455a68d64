"""README's examples as the consumer suite runs them: a fenced block that follows a
`<!-- tested: NAME -->` line."""

from __future__ import annotations

import re
from pathlib import Path


def block(readme: Path, name: str) -> str:
    """The text of the fenced block after `<!-- tested: name -->`."""
    m = re.search(rf"^<!-- tested: {re.escape(name)} -->\n```[a-z]*\n(.*?)^```$", readme.read_text(encoding="utf-8"),
                  re.M | re.S)
    if not m:
        raise LookupError(f"{readme}: no fenced block after '<!-- tested: {name} -->'")
    return m.group(1)
