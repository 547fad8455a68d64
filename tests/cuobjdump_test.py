"""CUDA's own tools see kiln's embedded images: `cuobjdump --list-elf` and `--list-ptx` on a file kiln's
catalogs are linked into list at least one image per unit and architecture `kiln list` says is embedded.
Exits 77 (skipped) where the toolkit has no cuobjdump (CI's has none).

  cuobjdump_test.py KILN_CLI FILE=REGISTRY [FILE=REGISTRY...]
"""

import collections
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

LABEL = re.compile(r"^\s+((?:sm|compute)_(\d+))\s+[0-9.]+ KiB\s+[0-9.]+ KiB\s+(zstd|as is)$")
ARCH = re.compile(r"(?:sm|compute)_(\d+)")


def cuobjdump() -> str | None:
    toolkit = Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda"))
    found = toolkit / "bin" / "cuobjdump"
    return str(found) if found.is_file() else shutil.which("cuobjdump")


def embedded(cli: str) -> dict[str, dict[str, collections.Counter]]:
    """{registry: {"elf"|"ptx": Counter(arch -> units)}} from `kiln list`."""
    out = subprocess.run([cli, "list"], check=True, stdout=subprocess.PIPE, text=True).stdout
    registries: dict = {}
    current = None
    for line in out.splitlines():
        if line.startswith("registry "):
            current = registries.setdefault(line.split()[1].rstrip(":"), {"elf": collections.Counter(),
                                                                         "ptx": collections.Counter()})
        elif (m := LABEL.match(line)) and current is not None:
            current["ptx" if m.group(1).startswith("compute") else "elf"][int(m.group(2))] += 1
    return registries


def listed(tool: str, option: str, path: str) -> tuple[collections.Counter, str]:
    out = subprocess.run([tool, option, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    counts = collections.Counter()
    for line in out.splitlines():
        if m := ARCH.search(line):
            counts[int(m.group(1))] += 1
    return counts, out


def main() -> int:
    tool = cuobjdump()
    if tool is None:
        print("skipped: no cuobjdump in the toolkit or on PATH")
        return 77
    expected = embedded(sys.argv[1])
    failed = False
    for pair in sys.argv[2:]:
        path, registry = pair.rsplit("=", 1)
        for kind, option in (("elf", "--list-elf"), ("ptx", "--list-ptx")):
            want = expected[registry][kind]
            got, out = listed(tool, option, path)
            short = {arch: (got[arch], n) for arch, n in sorted(want.items()) if got[arch] < n}
            print(f"{Path(path).name} {option}: {sum(got.values())} images listed; registry {registry} embeds "
                  f"{sum(want.values())} ({', '.join(f'{a}: {n}' for a, n in sorted(want.items()))})")
            if short:
                failed = True
                print(f"FAIL: cuobjdump lists fewer images than embedded (arch: (listed, embedded)) {short}\n{out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
