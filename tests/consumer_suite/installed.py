"""Suite consumer: `meson install` of kiln into a temporary prefix, then README's "Installed, without
Meson" lines, run as written, in a copy of tests/installed: the installed kiln-gen generates a catalog, a
program builds with `pkg-config --cflags --libs kiln` and runs. Without a GPU the program prints that
it launched nothing and exits 77; that still counts as a pass here, since the build is what is tested."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import readme
import steps

# What `meson install` must put where (prefix-relative; --libdir lib keeps it one path on every distro).
INSTALLED = ["include/kiln/kiln.hpp", "include/kiln/registry.hpp", "lib/libkiln.so", "lib/pkgconfig/kiln.pc",
             "bin/kiln", "bin/kiln-gen", "share/kiln/codegen/kiln_gen.py", "share/kiln/codegen/table_build.py",
             "share/kiln/templates/unit.cu.j2", "share/kiln/templates/families/block_reduce.cu.j2"]


def installed(args) -> int:
    source = Path(args.source).resolve()
    with steps.Scratch("kiln-installed-") as tmp:
        prefix = tmp / "prefix"
        # README's install lines, with options that keep the test short: kiln's own example table for
        # one architecture (the CLI embeds it).
        steps.run([args.meson, "setup", tmp / "build-kiln", source, f"--prefix={prefix}", "--libdir=lib",
                   "-Dtests=false", "-Dbench=false", f"-Dtoolkit={args.toolkit}", "-Darchs=sm_80", "-Dembed_ptx=false"])
        steps.run([args.meson, "install", "-C", tmp / "build-kiln"])
        missing = [f for f in INSTALLED if not (prefix / f).exists()]
        if missing:
            raise steps.StepFailed(f"not installed: {', '.join(missing)}")
        steps.run([prefix / "bin" / "kiln", "list"], env={"LD_LIBRARY_PATH": str(prefix / "lib")})

        app = tmp / "app"
        shutil.copytree(source / "tests" / "installed", app)
        code = steps.run(["bash", "-euxo", "pipefail", "-c", readme.block(source / "README.md", "installed")],
                         cwd=app, env={"PREFIX": str(prefix)}, ok=(0, 77))
        print("the program built and launched its kernel" if code == 0 else
              "the program built and ran; no GPU here, so it launched nothing (exit 77)")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="kiln's source tree")
    p.add_argument("--toolkit", required=True)
    p.add_argument("--meson", required=True)
    sys.exit(steps.main(lambda: installed(p.parse_args())))
