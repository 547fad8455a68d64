"""Suite cpu: a consumer that compiles kiln's public headers below C++20 gets one message saying so
(kiln/config.hpp), not the parser errors the headers would give; at C++20 the same includes compile.
g++ on kiln.hpp and prim.hpp, nvcc (preprocessing stops it) on a plan header, each syntax-only: a second.
prim.hpp where the build has the primitives: `--prim-include DIR` names where kiln/prim/plan_types.hpp,
which it includes, was generated."""

import subprocess
import sys
import tempfile
from pathlib import Path

MESSAGE = "kiln needs C++20: compile with -std=c++20"


def compile_text(cmd: list[str], text: str, suffix: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="kiln-cxx20-") as tmp:
        src = Path(tmp) / f"use{suffix}"
        src.write_text(text)
        return subprocess.run([*cmd, str(src)], capture_output=True, text=True, timeout=120, cwd=tmp)


def main() -> int:
    cxx, source, toolkit = sys.argv[1], Path(sys.argv[2]).resolve(), Path(sys.argv[3])
    prim = sys.argv[5] if sys.argv[4:5] == ["--prim-include"] else None
    inc = [f"-I{source / 'runtime' / 'include'}", f"-I{source / 'primitives' / 'include'}",
           *([f"-I{prim}"] if prim else []), f"-I{source / 'primitives' / 'device'}", f"-I{toolkit / 'include'}"]
    failures = []
    text = "#include <kiln/kiln.hpp>\n" + ("#include <kiln/prim.hpp>\n" if prim else "")
    cases = [([cxx, "-fsyntax-only", *inc], text, ".cpp")]
    nvcc = toolkit / "bin" / "nvcc"
    if nvcc.exists():  # the plans: nvcc's host preprocessing meets the check before CUB's headers
        cases.append(([str(nvcc), "-E", *inc], "#include <kiln/prim/scan_plan.cuh>\n", ".cu"))
    for cmd, text, suffix in cases:
        old = compile_text([cmd[0], "-std=c++17", *cmd[1:]], text, suffix)
        errors = [line for line in old.stderr.splitlines() if "error" in line]
        if old.returncode == 0 or MESSAGE not in old.stderr:
            failures.append(f"{cmd[0]} -std=c++17: expected '{MESSAGE}', got:\n{old.stderr[-2000:]}")
        elif any("config.hpp" not in line and "#error" not in line and "^" not in line for line in errors):
            failures.append(f"{cmd[0]} -std=c++17: errors besides kiln's message:\n{old.stderr[-2000:]}")
        else:
            print(f"{Path(cmd[0]).name} -std=c++17: one message ({len(errors)} error lines, all kiln/config.hpp's)")
    # ... and C++20 is all it takes (g++; nvcc's full compile of a plan is the consumer suite's).
    new = compile_text([cxx, "-std=c++20", *cases[0][0][1:]], cases[0][1], ".cpp")
    if new.returncode != 0:
        failures.append(f"{cxx} -std=c++20 failed:\n{new.stderr[-2000:]}")
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
