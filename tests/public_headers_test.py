"""Suite cpu: each public header of libkiln (runtime/include/kiln/*.hpp) compiles alone, as the first and
only include of a file, so that none relies on what another happens to include first; and <kiln/kiln.hpp>
brings of kiln's headers only the registry and the errors (what a consumer of kiln.hpp compiles: the disk
cache's, the catalog's and the driver table's headers stay out, with <filesystem> and the rest they need).

    public_headers_test.py CXX SOURCE_ROOT CUDA_ROOT
"""

import concurrent.futures
import subprocess
import sys
import tempfile
from pathlib import Path

# What <kiln/kiln.hpp> includes of runtime/include/kiln, directly or not.
KILN_HPP_BRINGS = {"kiln.hpp", "config.hpp", "error.hpp", "registry.hpp"}


def compile_alone(cxx: str, inc: list[str], header: str, tmp: Path, trace: bool = False):
    src = tmp / f"use_{header.replace('.', '_')}.cpp"
    src.write_text(f"#include <kiln/{header}>\n")
    return subprocess.run([cxx, "-std=c++20", "-fsyntax-only", *(["-H"] if trace else []), *inc, str(src)],
                          capture_output=True, text=True, timeout=300, cwd=tmp)


def main() -> int:
    cxx, source, toolkit = sys.argv[1], Path(sys.argv[2]).resolve(), Path(sys.argv[3])
    include = source / "runtime" / "include"
    inc = [f"-I{include}", f"-I{toolkit / 'include'}"]
    headers = sorted(p.name for p in (include / "kiln").glob("*.hpp") if p.name != "config.hpp")
    failures = []
    with tempfile.TemporaryDirectory(prefix="kiln-headers-") as name:
        tmp = Path(name)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            runs = dict(zip(headers, pool.map(lambda h: compile_alone(cxx, inc, h, tmp, h == "kiln.hpp"), headers)))
        for header, run in runs.items():
            if run.returncode != 0:
                failures.append(f"<kiln/{header}> does not compile alone:\n{run.stderr[-3000:]}")
        trace = runs["kiln.hpp"].stderr.splitlines()
        brought = {Path(line.lstrip(". ")).name for line in trace
                   if line.startswith(".") and Path(line.lstrip(". ")).parent == include / "kiln"}
        if runs["kiln.hpp"].returncode == 0 and brought != KILN_HPP_BRINGS:
            failures.append(f"<kiln/kiln.hpp> brings {sorted(brought)}, expected {sorted(KILN_HPP_BRINGS)}")
    for failure in failures:
        print(failure)
    print(f"{len(headers)} public headers, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
