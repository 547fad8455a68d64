"""Suite consumer: kiln installed, and used by a pkg-config build and a CMake project.

- This build's own install (`meson install --destdir` of what it built), moved elsewhere: the tree
  holds together wherever it lies (run paths relative to the binaries, kiln-gen's launcher, libkiln's way
  to kiln-jitd, the CMake package, pkg-config files relative to where they lie). Its `kiln` starts without
  LD_LIBRARY_PATH, and kiln.pc passes no flags of libkiln's own dependencies.
- tests/installed's CMakeLists.txt (find_package(kiln), kiln_add_registry, kiln_add_tool) builds against
  it; its tool precompiles for sm_90 (no GPU needed) with the moved kiln-jitd, and a touched source reruns
  kiln-gen once. Its pkg-config files: kiln_prim.pc names libkiln_prim and libkiln, and kiln/prim.hpp
  compiles with its flags alone; kiln_prim_headers.pc names the plans' and the device headers' directories
  and CUB's defines, and every open plan compiles (nvcc) with those alone.
- The "Installed, without Meson" lines of docs/building.md, run as written with $PREFIX the moved tree,
  in a copy of tests/installed (a consumer's layout: its headers in include/ inside the table's folder, a
  family of its own, CUB, typed launches): the installed kiln-gen generates a catalog, a program and the
  project's own command line (tiny-kiln) build with `pkg-config --cflags --libs kiln`, and the program
  runs. Without a GPU it prints that it launched nothing and exits 77; that still counts as a pass here,
  since the build is what is tested. tiny-kiln precompiles its registry for an architecture it did not
  embed with the toolkit's headers hidden.
- Portable keys: the CMake build (another path, another build system) finds every unit the pkg-config
  build precompiled already cached: the same table gives the same cache keys.
- What `meson install` puts where, and what libkiln_prim is built from (kiln configured at top level, its
  install plan and targets read; nothing to build): with -Dprimitives=false the plan headers
  kiln_prim_headers.pc names stay and the library goes; with -Dprimitives=operators the library, built
  from the operator plans alone and the table's linked rows (kiln-gen --linked-only, whose rows
  tests/codegen checks), and its operator header stay, the fixed-type headers go.

kiln as a Meson subproject, built and installed with a consumer's project, is consumer.py's."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import readme
import steps

# What `meson install` must put where, relative to the prefix; lib/ stands for the build's libdir.
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
# kiln configured at top level for the install plans below (nothing is built): as a user installs it, without
# tests, benchmarks or the Python package.
KILN_OPTIONS = ["-Dtests=false", "-Dbench=false", "-Dpython=false", "-Darchs=sm_80", "-Dembed_ptx=false",
                "-Dprimitive_archs=none"]


def precompiled(arch: str, compiled: int, cached: int) -> str:
    """The line a precompile of tiny's units for `arch` ends with."""
    return f"registry tiny, {arch}: {compiled} compiled and cached, {cached} already cached, 0 compiled but not cached, 0 failed"


def installed(args) -> int:
    source = Path(args.source).resolve()
    with steps.Scratch("kiln-installed-") as tmp:
        moved, dirs = this_build_moved(args, tmp)
        cmake_tool = cmake_project(args, source, moved, tmp)
        primitives_pkg_config(args, source, moved, dirs, tmp)
        # libkiln links its own dependencies: kiln.pc gives its users only kiln's and cuda.h's directories.
        steps.check_kiln_pc(moved, args.toolkit)

        app = tmp / "app"
        shutil.copytree(source / "tests" / "installed", app)
        code = steps.run(["bash", "-euxo", "pipefail", "-c", readme.block(source, "installed")],
                         cwd=app, env={"PREFIX": str(moved)}, ok=(0, 77))
        print("the program built and launched its kernels" if code == 0 else
              "the program built and ran; no GPU here, so it launched nothing (exit 77)")

        # The JIT tier for sm_120 (not embedded), where the toolkit's headers are not installed.
        out: list[str] = []
        precompile = [app / "tiny-kiln", *readme.quickstart_precompile(source)]  # the README's quickstart
        hidden = steps.without_toolkit_headers(precompile, args.toolkit, tmp)
        if hidden is None:
            print("no private mount namespace here (not root?): precompiling with the toolkit's headers visible")
        steps.run(hidden or precompile, env={"KILN_CACHE_DIR": str(tmp / "jit-cache")}, out=out)
        if precompiled(precompile[-1], 4, 0) not in out[-1]:
            raise steps.StepFailed(f"expected '{precompiled(precompile[-1], 4, 0)}'")

        # Portable keys: the same table built elsewhere, by CMake (another path, another build system),
        # finds every unit the pkg-config build compiled already in the cache, under the same keys.
        steps.run([cmake_tool, "precompile", "--arch", precompile[-1]], env={"KILN_CACHE_DIR": str(tmp / "jit-cache")}, out=out)
        if precompiled(precompile[-1], 0, 4) not in out[-1]:
            raise steps.StepFailed(f"the CMake build's cache keys differ from the pkg-config build's: expected "
                                   f"'{precompiled(precompile[-1], 0, 4)}'")

        install_plans(args, source, tmp)
    return 0


def this_build_moved(args, tmp: Path) -> tuple[Path, dict]:
    """This build's install into a DESTDIR, from what it built, moved elsewhere; with the build's
    directories (prefix-relative: libdir, ...). Nothing is at the configured prefix while the moved tree is
    used."""
    dirs = options(args.meson, Path(args.build))
    if not all(not Path(dirs[d]).is_absolute() for d in ("bindir", "libdir", "includedir", "datadir")):
        raise steps.StepFailed(f"the build's directories must lie inside its prefix to be moved: {dirs}")
    if dirs["libdir"] != "lib":  # docs/building.md's lines name $PREFIX/lib
        raise steps.StepFailed(f"the build's libdir is {dirs['libdir']}: configure it with --libdir=lib (kiln's default)")
    steps.run([args.meson, "install", "-C", args.build, "--destdir", tmp / "staged"])  # (up to date: builds nothing)
    moved = tmp / "elsewhere" / "kiln"
    moved.parent.mkdir()
    (tmp / "staged" / Path(dirs["prefix"]).relative_to("/")).rename(moved)
    missing = [f for f in INSTALLED if not (moved / in_build(f, dirs)).exists()]
    if missing:
        raise steps.StepFailed(f"not installed: {', '.join(missing)}")
    steps.run([moved / dirs["bindir"] / "kiln", "list"], env={"LD_LIBRARY_PATH": ""})
    return moved, dirs


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


def primitives_pkg_config(args, source: Path, moved: Path, dirs: dict, tmp: Path) -> None:
    """The primitives' pkg-config files of the moved install, with the prefix they were configured with
    replaced by the tree's place."""
    pkg_config = ["pkg-config", f"--define-variable=prefix={moved}"]
    env = {"PKG_CONFIG_PATH": str(moved / dirs["libdir"] / "pkgconfig")}
    out: list[str] = []
    steps.run([*pkg_config, "--libs", "kiln_prim"], env=env, out=out)
    if "-lkiln_prim" not in out[-1] or "-lkiln" not in out[-1].replace("-lkiln_prim", ""):
        raise steps.StepFailed("pkg-config --libs kiln_prim does not name libkiln_prim and libkiln")
    # The fixed-type plans' headers compile (g++) with kiln_prim.pc's flags alone: the list of their types
    # they include, generated in the build tree, is installed beside them.
    steps.run([*pkg_config, "--cflags", "kiln_prim"], env=env, out=out)
    (tmp / "prim_headers.cpp").write_text("#include <kiln/prim.hpp>\n")
    steps.run(["c++", "-std=c++20", "-fsyntax-only", *out[-1].split(), str(tmp / "prim_headers.cpp")])
    # The header-only plans and their device types, for a project's own nvcc code on its kiln.* rows.
    steps.run([*pkg_config, "--cflags", "kiln_prim_headers"], env=env, out=out)
    flags = out[-1].split()
    device = [Path(f[2:]) for f in flags if f.startswith("-I") and (Path(f[2:]) / "kiln_prim" / "reduce.cuh").is_file()]
    plans = [Path(f[2:]) for f in flags if f.startswith("-I") and (Path(f[2:]) / "kiln" / "prim" / "reduce_plan.cuh").is_file()]
    if not device or not plans or "-DCUB_DISABLE_NAMESPACE_MAGIC" not in flags:
        raise steps.StepFailed(f"pkg-config --cflags kiln_prim_headers lacks the plans, the device headers or CUB's "
                               f"defines: {out[-1].strip()}")
    # ... and they are enough: every open plan compiles with those flags alone (nvcc, no link).
    steps.run([str(Path(args.toolkit) / "bin" / "nvcc"), "-std=c++20", "--expt-relaxed-constexpr", "-c",
               str(source / "tests" / "installed" / "open_plans.cu"), "-o", str(tmp / "open_plans.o"), *flags])


def install_plans(args, source: Path, tmp: Path) -> None:
    """What `meson install` would put where with -Dprimitives=false and with -Dprimitives=operators, and
    what libkiln_prim is built from with the latter: kiln configured at top level (nothing built), its
    install plan and targets read."""
    build = tmp / "build-plan"
    steps.run([args.meson, "setup", build, source, f"--prefix={tmp / 'plan-prefix'}", "--libdir=lib",
               f"-Dtoolkit={args.toolkit}", *KILN_OPTIONS, "-Dprimitives=false"])
    files = install_plan(args.meson, build)
    missing = [f for f in PLANS_ONLY if f not in files]
    extra = [f for f in PRIM_LIBRARY if f in files]
    if missing or extra:
        raise steps.StepFailed(f"-Dprimitives=false installs {extra} and not {missing}")
    config = files.get("lib/cmake/kiln/kilnConfig.cmake")
    if config is None or "kiln_prim_FOUND FALSE" not in config.read_text():
        raise steps.StepFailed("kilnConfig.cmake of an install without primitives offers kiln::prim")

    steps.run([args.meson, "setup", "--reconfigure", build, source, "-Dprimitives=operators"])
    files = install_plan(args.meson, build)
    missing = [f for f in ["lib/libkiln_prim.so", "lib/pkgconfig/kiln_prim.pc", "include/kiln/prim/operator.hpp", *PLANS_ONLY]
               if f not in files]
    extra = [f for f in ["include/kiln/prim.hpp", "include/kiln/prim/reduce.hpp", "include/kiln/prim/plan_types.hpp"]
             if f in files]
    if missing or extra:
        raise steps.StepFailed(f"-Dprimitives=operators installs {extra} and not {missing}")
    # libkiln_prim is built from the operator plans and the linked rows' catalog alone.
    targets = {t["name"]: t for t in introspect(args.meson, build, "--targets")}
    sources = sorted(Path(f).name for t in targets["kiln_prim"]["target_sources"] for f in t["sources"])
    if sources != ["operator.cu"]:
        raise steps.StepFailed(f"libkiln_prim of -Dprimitives=operators is built from {sources}, not the operator plans alone")
    catalog = targets["primitives_catalog"]["target_sources"][0]
    if "--linked-only" not in catalog.get("parameters", []) + catalog.get("compiler", []):
        raise steps.StepFailed(f"the primitives' catalog of -Dprimitives=operators is not the linked rows alone: {catalog}")


def options(meson: str, build: Path) -> dict:
    """The build's install directories, by option name (prefix absolute; the others as configured)."""
    return {o["name"]: o["value"] for o in introspect(meson, build, "--buildoptions")
            if o["section"] == "directory"}


def in_build(path: str, dirs: dict) -> str:
    """A path of INSTALLED (lib/, bin/, include/, share/ at the start) with the build's own directories."""
    top, _, rest = path.partition("/")
    name = {"lib": "libdir", "bin": "bindir", "include": "includedir", "share": "datadir"}[top]
    return str(Path(dirs[name]) / rest)


def install_plan(meson: str, build: Path) -> dict[str, Path]:
    """What `meson install` of `build` puts where: prefix-relative path -> the file installed there
    (install_subdir's directories expanded; files bound for Python's own directories left out)."""
    dirs = options(meson, build)
    names = {**dirs, "prefix": "", "libdir_shared": dirs["libdir"], "libdir_static": dirs["libdir"]}
    files: dict[str, Path] = {}
    for kind, entries in introspect(meson, build, "--install-plan").items():
        for src, where in entries.items():
            dest = where["destination"]
            if dest.startswith("{py_"):
                continue
            for name, value in names.items():
                dest = dest.replace("{" + name + "}", value)
            dest = dest.lstrip("/")
            if kind == "install_subdirs":
                for path in Path(src).rglob("*"):
                    if path.is_file():
                        files[str(Path(dest) / path.relative_to(src))] = path
            else:
                files[dest] = Path(src)
    return files


def introspect(meson: str, build: Path, what: str):
    return json.loads(subprocess.run([meson, "introspect", str(build), what], check=True,
                                     stdout=subprocess.PIPE, text=True).stdout)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps.add_arguments(p)
    p.add_argument("--build", required=True, help="kiln's build directory, installed from what it built")
    sys.exit(steps.main(lambda: installed(p.parse_args())))
