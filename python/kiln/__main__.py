"""python -m kiln: kiln's command line (list, info, precompile, why, status, cache ...; --help lists them)
over the registries this package holds: kiln's examples, its primitives where the package has them.
The same commands as the `kiln` tool (docs/command-line.md), with the package's own kiln-jitd."""

import sys

from . import _kiln


def main() -> int:
    return _kiln._cli_main(["python -m kiln", *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())
