"""The Python extension module exports its entry point and nothing else: no libkiln, C++ library or CUDA
runtime symbol another extension could bind to (or bind it to), and no GNU-unique symbol, which binds
across the process even under RTLD_LOCAL.

    module_exports_test.py MODULE ENTRY"""

import subprocess
import sys


def main() -> int:
    module, entry = sys.argv[1], sys.argv[2]
    out = subprocess.run(["nm", "-D", "--defined-only", module], check=True, stdout=subprocess.PIPE, text=True).stdout
    symbols = [line.split()[-1] for line in out.splitlines() if line.strip()]
    unique = [line.split()[-1] for line in out.splitlines() if len(line.split()) == 3 and line.split()[1] == "u"]
    print(f"{module}: {len(symbols)} dynamic symbol(s) defined: {', '.join(symbols[:20])}")
    others = [s for s in symbols if s != entry]
    if entry not in symbols:
        print(f"FAIL: {entry} is not exported")
        return 1
    if others or unique:
        print(f"FAIL: {len(others)} symbol(s) besides {entry} exported ({len(unique)} GNU-unique), e.g. {others[:10]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
