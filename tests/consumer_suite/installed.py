"""Suite consumer: `meson install` of kiln into a temporary prefix, then README's "Installed, without
Meson" lines, run as written, in a copy of tests/installed (a consumer's layout: its headers in include/
inside the table's folder, a family of its own, CUB, typed launches): the installed kiln-gen generates a
catalog, a program and the project's own command line (tiny-kiln) build with `pkg-config --cflags --libs
kiln`, and the program runs. Without a GPU it prints that it launched nothing and exits 77; that still
counts as a pass here, since the build is what is tested. Then tiny-kiln precompiles its registry for an
architecture it did not embed with the toolkit's headers hidden, the installed `kiln` starts without
LD_LIBRARY_PATH, and kiln_prim.pc and kiln_prim_headers.pc are installed (the latter names the plans'
and the device headers' directories)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import readme
import steps

# What `meson install` must put where (prefix-relative; --libdir lib keeps it one path on every distro).
INSTALLED = ["include/kiln/kiln.hpp", "include/kiln/registry.hpp", "include/kiln/cli.hpp", "lib/libkiln.so",
             "lib/pkgconfig/kiln.pc", "lib/libkiln_prim.so", "lib/pkgconfig/kiln_prim.pc", "include/kiln/prim.hpp",
             "lib/pkgconfig/kiln_prim_headers.pc", "include/kiln/prim/reduce_plan.cuh",
             "share/kiln/primitives/device/kiln_prim/iterators.cuh",
             "bin/kiln", "bin/kiln-gen", "share/kiln/codegen/kiln_gen.py", "share/kiln/codegen/table_build.py",
             "share/kiln/templates/unit.cu.j2", "share/kiln/templates/families/block_reduce.cu.j2"]


def installed(args) -> int:
    source = Path(args.source).resolve()
    with steps.Scratch("kiln-installed-") as tmp:
        prefix = tmp / "prefix"
        # README's install lines, with options that keep the test short: kiln's own example table for
        # one architecture (the CLI embeds it), the primitives' kernels JIT-only (their host code, library
        # and pkg-config file are what is tested here), host code at -O0 (-O3 doubled the compiles), no
        # Python package (the python test of the cpu suite covers it).
        steps.run([args.meson, "setup", tmp / "build-kiln", source, f"--prefix={prefix}", "--libdir=lib",
                   "-Dtests=false", "-Dbench=false", f"-Dtoolkit={args.toolkit}", "-Darchs=sm_80", "-Dembed_ptx=false",
                   "-Dprimitive_archs=none", "-Doptimization=0", "-Dpython=false"])
        steps.run([args.meson, "install", "-C", tmp / "build-kiln"])
        missing = [f for f in INSTALLED if not (prefix / f).exists()]
        if missing:
            raise steps.StepFailed(f"not installed: {', '.join(missing)}")
        # The installed kiln finds the installed libkiln by itself (its run path).
        steps.run([prefix / "bin" / "kiln", "list"], env={"LD_LIBRARY_PATH": ""})
        out: list[str] = []
        steps.run(["pkg-config", "--libs", "kiln_prim"], env={"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}, out=out)
        if "-lkiln_prim" not in out[-1] or "-lkiln" not in out[-1].replace("-lkiln_prim", ""):
            raise steps.StepFailed("pkg-config --libs kiln_prim does not name libkiln_prim and libkiln")
        # The header-only plans and their device types, for a project's own nvcc code on its kiln.* rows.
        steps.run(["pkg-config", "--cflags", "kiln_prim_headers"],
                  env={"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}, out=out)
        flags = out[-1].split()
        device = [Path(f[2:]) for f in flags if f.startswith("-I") and (Path(f[2:]) / "kiln_prim" / "reduce.cuh").is_file()]
        plans = [Path(f[2:]) for f in flags if f.startswith("-I") and (Path(f[2:]) / "kiln" / "prim" / "reduce_plan.cuh").is_file()]
        if not device or not plans or "-DCUB_DISABLE_NAMESPACE_MAGIC" not in flags:
            raise steps.StepFailed(f"pkg-config --cflags kiln_prim_headers lacks the plans, the device headers or CUB's "
                                   f"defines: {out[-1].strip()}")
        # ... and they are enough: every open plan compiles with those flags alone (nvcc, no link).
        steps.run([str(Path(args.toolkit) / "bin" / "nvcc"), "-std=c++20", "--expt-relaxed-constexpr", "-c",
                   str(source / "tests" / "installed" / "open_plans.cu"), "-o", str(tmp / "open_plans.o"), *flags])

        app = tmp / "app"
        shutil.copytree(source / "tests" / "installed", app)
        code = steps.run(["bash", "-euxo", "pipefail", "-c", readme.block(source / "README.md", "installed")],
                         cwd=app, env={"PREFIX": str(prefix)}, ok=(0, 77))
        print("the program built and launched its kernels" if code == 0 else
              "the program built and ran; no GPU here, so it launched nothing (exit 77)")

        # The JIT tier for sm_120 (embedded: sm_80, sm_90), where the toolkit's headers are not installed.
        precompile = [app / "tiny-kiln", "precompile", "--arch", "sm_120"]
        hidden = steps.without_toolkit_headers(precompile, args.toolkit, tmp)
        if hidden is None:
            print("no private mount namespace here (not root?): precompiling with the toolkit's headers visible")
        steps.run(hidden or precompile, env={"KILN_CACHE_DIR": str(tmp / "jit-cache")}, out=out)
        wanted = "registry tiny, sm_120: 3 compiled and cached, 0 already cached, 0 compiled but not cached, 0 failed"
        if wanted not in out[-1]:
            raise steps.StepFailed(f"expected '{wanted}'")
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="kiln's source tree")
    p.add_argument("--toolkit", required=True)
    p.add_argument("--meson", required=True)
    sys.exit(steps.main(lambda: installed(p.parse_args())))
