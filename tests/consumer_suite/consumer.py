"""Suite consumer: configures tests/consumer from scratch in a temporary directory, with this kiln source
tree as its subprojects/kiln and the README's quickstart (tests/installed, built by its own meson.build) as
subprojects/tiny, builds it and runs its tests: the cpu checks, and the gpu checks, which
the consumer's own `meson test` counts as skipped (exit 77) on a machine without a GPU. Then, as a user
of that project would:
- its own command line (consumer-kiln: kiln::cli_main over its registries) lists them, and precompiles
  them for an architecture the build did not embed, with the toolkit's headers hidden (the JIT tier from
  the bundled headers alone, the project's own among them);
- kiln installed with it (kiln's CLI asked for) runs from the prefix without LD_LIBRARY_PATH, and its
  kiln.pc passes no flags of libkiln's own dependencies;
- a touched source rewrites no catalog output and recompiles nothing; a registry renamed in its table
  while meson.build still names the old outputs stops the build with a clear error."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import steps

# Not embedded by the consumer (sm_80, sm_90): only the JIT tier can make these.
JIT_ARCH = "sm_120"


def consumer(args) -> int:
    source = Path(args.source).resolve()
    with steps.Scratch("kiln-consumer-") as tmp:
        project = tmp / "project"
        shutil.copytree(source / "tests" / "consumer", project)
        (project / "subprojects").mkdir()
        (project / "subprojects" / "kiln").symlink_to(source)
        # The README's quickstart (tests/installed: its own meson.build) as a second subproject.
        (project / "subprojects" / "tiny").symlink_to(source / "tests" / "installed")
        build = tmp / "build"
        prefix = tmp / "prefix"
        steps.run([args.meson, "setup", build, project, f"--prefix={prefix}", "--libdir=lib", f"-Darchs={args.archs}",
                   f"-Dkiln:toolkit={args.toolkit}", "-Dkiln:cli=true", *steps.SUBPROJECT_OPTIONS,
                   *steps.names_cache_options(args)])
        steps.run([args.meson, "compile", "-C", build])
        # kiln's own tests, benchmarks and primitives are not part of a consumer's build (its CLI is, asked
        # for here: -Dkiln:cli=true, for the install below).
        defined = {Path(t["filename"][0]).name for t in introspect(args.meson, build, "--targets")}
        unwanted = defined & {"test_cpu", "test_gpu", "bench_startup", "libkiln_prim.so", "primitives_catalog.hpp"}
        if unwanted:
            raise steps.StepFailed(f"kiln built {', '.join(sorted(unwanted))} in the consumer's build")
        code = steps.run([args.meson, "test", "-C", build, "--print-errorlogs"], ok=(0, 1))
        # A test's name in testlog.json is "consumer / cpu" (meson 1.0) or "cpu - consumer:cpu" (1.12).
        results = {re.split(r" / |:", r["name"])[-1]: r["result"]
                   for r in json_lines(build / "meson-logs" / "testlog.json")}
        print(f"consumer tests: {results}")  # gpu, prim: SKIP on a machine without a GPU, OK on one
        if code != 0:
            raise steps.StepFailed("the consumer's tests failed")
        if set(results) != {"cpu", "gpu", "prim", "tiny"}:
            raise steps.StepFailed(f"expected the consumer's tests cpu, gpu, prim and tiny, ran {sorted(results)}")
        its_command_line(args, build / "consumer-kiln", tmp)
        installed_with_it(args, build, prefix)
        incremental(project, build)
    return 0


def its_command_line(args, tool: Path, tmp: Path) -> None:
    """The project's registries through kiln's command line."""
    out: list[str] = []
    steps.run([tool, "list"], out=out)
    for registry in ("geo", "stats", "examples"):
        if f"registry {registry}:" not in out[-1]:
            raise steps.StepFailed(f"consumer-kiln list does not show registry {registry}")
    steps.run([tool, "list", "--json"], out=out)
    units = {u["name"] for r in json.loads(out[-1])["registries"] if r["name"] == "geo" for u in r["units"]}
    if units != {"point_in_polygon", "translate_f32", "bounds", "scan_sum_f32", "max_by_a_tagged", "running_max_i32",
                 "count_scan_i64", "ramp_i32", "sum_squares_f64", "dot_f64", "sort_desc_f32", "positive_f64",
                 "segment_squares_f64", "multiples_i64", "products_f64", "run_starts_i32", "argsort_desc_f32"}:
        raise steps.StepFailed(f"consumer-kiln list --json: geo's units are {sorted(units)}")
    steps.run([tool, "precompile", "--help"], out=out)
    if not out[-1].startswith("usage: consumer-kiln precompile"):
        raise steps.StepFailed("consumer-kiln precompile --help does not print its usage")

    # The JIT tier for an architecture the build did not embed, on a machine without the toolkit's
    # headers: every unit of every registry compiled from what the binary carries.
    env = {"KILN_CACHE_DIR": str(tmp / "jit-cache")}
    precompile = [tool, "precompile", "--arch", JIT_ARCH]
    hidden = steps.without_toolkit_headers(precompile, args.toolkit, tmp)
    if hidden is None:
        print("no private mount namespace here (not root?): precompiling with the toolkit's headers visible")
    steps.run(hidden or precompile, env=env, out=out)
    for registry, units in (("geo", 17), ("stats", 1), ("examples", 3)):
        wanted = f"registry {registry}, {JIT_ARCH}: {units} compiled and cached, 0 already cached, 0 compiled but not cached, 0 failed"
        if wanted not in out[-1]:
            raise steps.StepFailed(f"expected '{wanted}'")
    steps.run([tool, "cache", "stats", "--json"], env=env, out=out)
    if json.loads(out[-1])["disk_cache"]["entries"] != 21:
        raise steps.StepFailed("the cache does not hold the 21 units precompiled")


def installed_with_it(args, build: Path, prefix: Path) -> None:
    """kiln installed with the project (`meson install` of its build; kiln's CLI asked for): the installed
    `kiln` finds the installed libkiln by itself (its run path), and kiln.pc gives its users only kiln's and
    cuda.h's directories (libkiln links its own dependencies)."""
    steps.run([args.meson, "install", "-C", build])
    steps.run([prefix / "bin" / "kiln", "list"], env={"LD_LIBRARY_PATH": ""})
    steps.check_kiln_pc(prefix, args.toolkit)


def incremental(project: Path, build: Path) -> None:
    """What a rebuild does after a touch, and after a rename the build file does not follow."""
    outputs = [build / f"geo_catalog.{ext}" for ext in ("hpp", "cpp")] + [build / "geo_blobs.S"]
    before = [p.stat().st_mtime_ns for p in outputs]
    (project / "geo" / "point_in_polygon.cu").touch()
    out: list[str] = []
    steps.run(["ninja", "-C", build], out=out)
    recompiled = [line for line in out[-1].splitlines() if re.search(r"Compiling|Linking", line)]
    if recompiled or [p.stat().st_mtime_ns for p in outputs] != before:
        raise steps.StepFailed(f"a touched source rewrote the catalog or recompiled: {recompiled}")
    steps.run(["ninja", "-C", build], out=out)
    if "no work to do" not in out[-1]:
        raise steps.StepFailed("ninja reruns kiln-gen after a touch (restat)")

    table = project / "geo" / "geo.toml"
    text = table.read_text()
    table.write_text(text.replace('name = "geo"', 'name = "geo2"', 1))
    steps.run(["ninja", "-C", build], ok=(1,), out=out)
    if '[registry] name = "geo2": kiln-gen writes geo2_catalog.hpp' not in out[-1]:
        raise steps.StepFailed("a renamed registry did not stop the build with a clear error")
    table.write_text(text)
    steps.run(["ninja", "-C", build])


def introspect(meson: str, build: Path, what: str) -> list:
    return json.loads(subprocess.run([meson, "introspect", str(build), what], check=True,
                                     stdout=subprocess.PIPE, text=True).stdout)


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    steps.add_arguments(p)
    # One: what the build of each more would check is the same, and nvcc's work grows with each.
    p.add_argument("--archs", default="sm_80", help="the consumer's architectures (comma-separated)")
    sys.exit(steps.main(lambda: consumer(p.parse_args())))
