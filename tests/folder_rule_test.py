#!/usr/bin/env python3
"""runtime/folder_rule.py: passes on the tree, and fails, naming the include, on a planted forbidden edge.

Copies runtime/src to a temporary directory and plants, one at a time, includes the rule forbids: a tier
including another tier, the chain including the registry, a folder the rule does not name. Each must fail
with exit 1 and name the file and the edge; the tree as it is must pass. --help must print the usage, not
take "--help" for a folder.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)


def main(argv: list[str]) -> int:
    script, src = Path(argv[1]), Path(argv[2])
    failures: list[str] = []

    def expect(what: str, ok: bool, output: str) -> None:
        if not ok:
            failures.append(f"{what}:\n{output}")

    tree = run(script, str(src))
    expect("the tree as it is passes", tree.returncode == 0, tree.stdout + tree.stderr)

    usage = run(script, "--help")
    expect("--help prints the usage and exits 0",
           usage.returncode == 0 and usage.stdout.startswith("usage:") and "folders.txt" in usage.stdout,
           usage.stdout + usage.stderr)

    planted = [
        ("a tier including another tier", "jit/ptx_tier.cpp", '#include "embedded/embedded_tier.hpp"', "jit -> embedded"),
        ("the chain including the registry", "chain/tier_chain.cpp", '#include "registry/query.hpp"', "chain -> registry"),
        ("base including the chain", "base/catalog.cpp", '#include "chain/tier.hpp"', "base -> chain"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for what, file, include, edge in planted:
            copy = Path(tmp) / what.replace(" ", "_") / "src"
            shutil.copytree(src, copy)
            target = copy / file
            target.write_text(include + "\n" + target.read_text(encoding="utf-8"), encoding="utf-8")
            r = run(script, str(copy))
            expect(f"{what} ({file}: {include}) fails naming the edge", r.returncode == 1 and
                   f"{edge} is not allowed" in r.stdout and f"{file}:1: {include}" in r.stdout, r.stdout + r.stderr)
        # A folder the rule does not name.
        copy = Path(tmp) / "new_folder" / "src"
        shutil.copytree(src, copy)
        (copy / "extra").mkdir()
        (copy / "extra" / "x.cpp").write_text('#include "base/result.hpp"\n', encoding="utf-8")
        r = run(script, str(copy))
        expect("a folder the rule does not name fails", r.returncode == 1 and "extra/ is not in" in r.stdout,
               r.stdout + r.stderr)

    for f in failures:
        print(f"FAILED: {f}")
    print(f"{3 + len(planted) - len(failures)} of {3 + len(planted)} checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
