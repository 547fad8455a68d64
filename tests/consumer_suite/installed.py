"""Suite consumer: kiln installed, and used by a pkg-config build and a CMake project.

- An install into a DESTDIR, moved elsewhere: the tree holds together wherever it lies (run paths
  relative to the binaries, kiln-gen's launcher, libkiln's way to kiln-jitd, the CMake package). Its
  `kiln` starts without LD_LIBRARY_PATH, and tests/installed's CMakeLists.txt (find_package(kiln),
  kiln_add_registry, kiln_add_tool) builds against it; its tool precompiles for sm_90 (no GPU needed)
  with the moved kiln-jitd, and a touched source reruns kiln-gen once.
- `meson install` into a temporary prefix, then README's "Installed, without Meson" lines, run as
  written, in a copy of tests/installed (a consumer's layout: its headers in include/ inside the table's
  folder, a family of its own, CUB, typed launches): the installed kiln-gen generates a catalog, a program
  and the project's own command line (tiny-kiln) build with `pkg-config --cflags --libs kiln`, and the
  program runs. Without a GPU it prints that it launched nothing and exits 77; that still counts as a pass
  here, since the build is what is tested. tiny-kiln precompiles its registry for an architecture it did
  not embed with the toolkit's headers hidden; kiln_prim.pc and kiln_prim_headers.pc are installed (the
  latter names the plans' and the device headers' directories), and kiln.pc passes no flags of libkiln's
  own dependencies.
- Portable keys: the CMake build (another path, another install, another build system) finds every unit
  the pkg-config build precompiled already cached: the same table gives the same cache keys.
- An install with -Dprimitives=false still installs the plan headers kiln_prim_headers.pc names."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import readme
import steps

# What `meson install` must put where (prefix-relative; --libdir lib keeps it one path on every distro).
INSTALLED = ["lib/cmake/kiln/kilnConfig.cmake", "lib/cmake/kiln/kilnConfigVersion.cmake", "include/kiln/prim/detail/plan.hpp",
             "include/kiln/kiln.hpp", "include/kiln/registry.hpp", "include/kiln/cli.hpp", "lib/libkiln.so",
             "lib/pkgconfig/kiln.pc", "lib/libkiln_prim.so", "lib/pkgconfig/kiln_prim.pc", "include/kiln/prim.hpp",
             "include/kiln/prim/plan_types.hpp",
             "lib/pkgconfig/kiln_prim_headers.pc", "include/kiln/prim/reduce_plan.cuh",
             "share/kiln/primitives/device/kiln_prim/iterators.cuh",
             "bin/kiln", "bin/kiln-gen", "share/kiln/codegen/kiln_gen.py", "share/kiln/codegen/table_build.py",
             "share/kiln/templates/unit.cu.j2", "share/kiln/templates/families/block_reduce.cu.j2"]
# With -Dprimitives=false: the plans stay (kiln_prim_headers.pc names them), the library and its headers go.
PLANS_ONLY = ["lib/pkgconfig/kiln_prim_headers.pc", "include/kiln/prim/reduce_plan.cuh", "include/kiln/prim/scan_plan.cuh",
              "include/kiln/prim/common.hpp", "include/kiln/prim/detail/plan.hpp"]
PRIM_LIBRARY = ["lib/libkiln_prim.so", "lib/pkgconfig/kiln_prim.pc", "include/kiln/prim.hpp", "include/kiln/prim/reduce.hpp",
                "include/kiln/prim/plan_types.hpp"]  # generated from kernels/primitives.toml


def precompiled(arch: str, compiled: int, cached: int) -> str:
    """The line a precompile of tiny's units for `arch` ends with."""
    return f"registry tiny, {arch}: {compiled} compiled and cached, {cached} already cached, 0 compiled but not cached, 0 failed"


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
        # Installed into a DESTDIR and moved: nothing is at the configured prefix while the moved tree is used.
        steps.run([args.meson, "install", "-C", tmp / "build-kiln", "--destdir", tmp / "staged"])
        moved = tmp / "elsewhere" / "kiln"
        moved.parent.mkdir()
        (tmp / "staged" / prefix.relative_to("/")).rename(moved)
        missing = [f for f in INSTALLED if not (moved / f).exists()]
        if missing:
            raise steps.StepFailed(f"not installed: {', '.join(missing)}")
        steps.run([moved / "bin" / "kiln", "list"], env={"LD_LIBRARY_PATH": ""})
        cmake_tool = cmake_project(args, source, moved, tmp)

        steps.run([args.meson, "install", "-C", tmp / "build-kiln"])
        # The installed kiln finds the installed libkiln by itself (its run path).
        steps.run([prefix / "bin" / "kiln", "list"], env={"LD_LIBRARY_PATH": ""})
        out: list[str] = []
        # libkiln links its own dependencies: kiln.pc gives its users only kiln's and cuda.h's directories.
        steps.run(["pkg-config", "--cflags", "--libs", "kiln"], env={"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}, out=out)
        if sorted(out[-1].split()) != sorted([f"-I{prefix}/include", f"-I{args.toolkit}/include", f"-L{prefix}/lib", "-lkiln"]):
            raise steps.StepFailed(f"pkg-config --cflags --libs kiln gives more than libkiln's own flags: {out[-1].strip()}")
        steps.run(["pkg-config", "--libs", "kiln_prim"], env={"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}, out=out)
        if "-lkiln_prim" not in out[-1] or "-lkiln" not in out[-1].replace("-lkiln_prim", ""):
            raise steps.StepFailed("pkg-config --libs kiln_prim does not name libkiln_prim and libkiln")
        # The fixed-type plans' headers compile (g++) with kiln_prim.pc's flags alone: the list of their types
        # they include, generated in the build tree, is installed beside them.
        steps.run(["pkg-config", "--cflags", "kiln_prim"], env={"PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}, out=out)
        (tmp / "prim_headers.cpp").write_text("#include <kiln/prim.hpp>\n")
        steps.run(["c++", "-std=c++20", "-fsyntax-only", *out[-1].split(), str(tmp / "prim_headers.cpp")])
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
        code = steps.run(["bash", "-euxo", "pipefail", "-c", readme.block(source, "installed")],
                         cwd=app, env={"PREFIX": str(prefix)}, ok=(0, 77))
        print("the program built and launched its kernels" if code == 0 else
              "the program built and ran; no GPU here, so it launched nothing (exit 77)")

        # The JIT tier for sm_120 (embedded: sm_80, sm_90), where the toolkit's headers are not installed.
        precompile = [app / "tiny-kiln", *readme.quickstart_precompile(source)]  # the README's quickstart
        hidden = steps.without_toolkit_headers(precompile, args.toolkit, tmp)
        if hidden is None:
            print("no private mount namespace here (not root?): precompiling with the toolkit's headers visible")
        steps.run(hidden or precompile, env={"KILN_CACHE_DIR": str(tmp / "jit-cache")}, out=out)
        if precompiled(precompile[-1], 4, 0) not in out[-1]:
            raise steps.StepFailed(f"expected '{precompiled(precompile[-1], 4, 0)}'")

        # Portable keys: the same table built elsewhere finds every unit the pkg-config build compiled
        # already in the cache, under the same keys: by CMake (another path, another install of kiln), and
        # by Meson with kiln as a subproject (another path, kiln built from source in the project's build).
        for build, tool in (("CMake", cmake_tool), ("Meson subproject", meson_subproject(args, source, tmp))):
            steps.run([tool, "precompile", "--arch", precompile[-1]], env={"KILN_CACHE_DIR": str(tmp / "jit-cache")}, out=out)
            if precompiled(precompile[-1], 0, 4) not in out[-1]:
                raise steps.StepFailed(f"the {build} build's cache keys differ from the pkg-config build's: expected "
                                       f"'{precompiled(precompile[-1], 0, 4)}'")

        operators_only(args, tmp)
        without_primitives(args, tmp)
    return 0


def cmake_project(args, source: Path, install: Path, tmp: Path) -> Path:
    """tests/installed's CMakeLists.txt against the install at `install`, in a copy at another path than
    the pkg-config build's: configured, built, its program run, its tool precompiling for sm_90 (not
    embedded: the JIT tier, through the install's kiln-jitd); a touched source reruns kiln-gen, and then
    nothing. Returns the tool."""
    app = tmp / "other-checkout" / "tiny"
    shutil.copytree(source / "tests" / "installed", app)
    build = tmp / "build-cmake"
    steps.run(["cmake", "-G", "Ninja", "-S", app, "-B", build, f"-DCMAKE_PREFIX_PATH={install}", "-DCMAKE_BUILD_TYPE=Debug"])
    steps.run(["cmake", "--build", build])
    steps.run([build / "tiny"], env={"LD_LIBRARY_PATH": ""}, ok=(0, 77))
    out: list[str] = []
    steps.run([build / "tiny-kiln", "precompile", "--arch", "sm_90"], env={"KILN_CACHE_DIR": str(tmp / "cmake-cache")},
              out=out)
    if precompiled("sm_90", 4, 0) not in out[-1] or "no worker" in out[-1]:
        raise steps.StepFailed(f"expected '{precompiled('sm_90', 4, 0)}', compiled by the installed kiln-jitd")
    (app / "iota.cu").touch()
    steps.run(["ninja", "-C", build], out=out)
    if "kiln-gen" not in out[-1]:
        raise steps.StepFailed("a touched source did not rerun kiln-gen (the depfile)")
    steps.run(["ninja", "-C", build], out=out)
    if "no work to do" not in out[-1]:
        raise steps.StepFailed("the build after a touched source's rebuild is not up to date")
    return build / "tiny-kiln"


def meson_subproject(args, source: Path, tmp: Path) -> Path:
    """tests/installed's meson.build, with this kiln source tree as its subproject, in a copy at a third
    path; returns its tool."""
    app = tmp / "third-checkout" / "tiny"
    shutil.copytree(source / "tests" / "installed", app)
    (app / "subprojects").mkdir()
    (app / "subprojects" / "kiln").symlink_to(source)
    build = tmp / "build-subproject"
    steps.run([args.meson, "setup", build, app, f"-Dkiln:toolkit={args.toolkit}", "-Doptimization=0", "-Darchs=sm_80"])
    steps.run(["ninja", "-C", build, "tiny-kiln"])
    return build / "tiny-kiln"


def operators_only(args, tmp: Path) -> None:
    """The same build with -Dprimitives=operators, installed into a DESTDIR: libkiln_prim holds the plans
    of kiln/prim/operator.hpp and the table's linked rows, and none of the fixed-type primitives (their
    objects, compiled above, are not linked in)."""
    steps.run([args.meson, "configure", tmp / "build-kiln", "-Dprimitives=operators"])
    steps.run([args.meson, "install", "-C", tmp / "build-kiln", "--destdir", tmp / "operators"])
    root = tmp / "operators" / (tmp / "prefix").relative_to("/")
    missing = [f for f in ["lib/libkiln_prim.so", "lib/pkgconfig/kiln_prim.pc", "include/kiln/prim/operator.hpp", *PLANS_ONLY]
               if not (root / f).exists()]
    extra = [f for f in ["include/kiln/prim.hpp", "include/kiln/prim/reduce.hpp", "include/kiln/prim/plan_types.hpp"]
             if (root / f).exists()]
    if missing or extra:
        raise steps.StepFailed(f"-Dprimitives=operators installed {extra} and not {missing}")
    out: list[str] = []
    steps.run(["nm", "-DC", "--defined-only", root / "lib" / "libkiln_prim.so"], out=out)
    if "kiln::prim::ReduceWith<float>::ReduceWith" not in out[-1] or "kiln::prim::RadixSortPairs" in out[-1]:
        raise steps.StepFailed("libkiln_prim of -Dprimitives=operators lacks ReduceWith or holds RadixSortPairs")
    steps.run([root / "bin" / "kiln", "list", "--json"], env={"LD_LIBRARY_PATH": ""}, out=out)
    units = [u["name"] for r in json.loads(out[-1])["registries"] if r["name"] == "primitives" for u in r["units"]]
    if len(units) != 54 or not all(u.startswith("linked_") for u in units):
        raise steps.StepFailed(f"the operators' registry holds {len(units)} units, not the 54 linked rows: {units}")


def without_primitives(args, tmp: Path) -> None:
    """The same build without the primitives, installed into a DESTDIR: the plans stay, the library goes."""
    steps.run([args.meson, "configure", tmp / "build-kiln", "-Dprimitives=false"])
    steps.run([args.meson, "install", "-C", tmp / "build-kiln", "--destdir", tmp / "plans-only"])
    root = tmp / "plans-only" / (tmp / "prefix").relative_to("/")
    missing = [f for f in PLANS_ONLY if not (root / f).exists()]
    extra = [f for f in PRIM_LIBRARY if (root / f).exists()]
    if missing or extra:
        raise steps.StepFailed(f"-Dprimitives=false installed {extra} and not {missing}")
    if "kiln_prim_FOUND FALSE" not in (root / "lib" / "cmake" / "kiln" / "kilnConfig.cmake").read_text():
        raise steps.StepFailed("kilnConfig.cmake of an install without primitives offers kiln::prim")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="kiln's source tree")
    p.add_argument("--toolkit", required=True)
    p.add_argument("--meson", required=True)
    sys.exit(steps.main(lambda: installed(p.parse_args())))
