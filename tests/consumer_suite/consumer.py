"""Suite consumer: configures tests/consumer from scratch in a temporary directory, with this kiln source
tree as its subprojects/kiln, builds it and runs its tests: the cpu checks, and the gpu checks, which
the consumer's own `meson test` counts as skipped (exit 77) on a machine without a GPU."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import steps


def consumer(args) -> int:
    source = Path(args.source).resolve()
    with steps.Scratch("kiln-consumer-") as tmp:
        project = tmp / "consumer"
        shutil.copytree(source / "tests" / "consumer", project)
        (project / "subprojects").mkdir()
        (project / "subprojects" / "kiln").symlink_to(source)
        build = tmp / "build"
        steps.run([args.meson, "setup", build, project, f"-Darchs={args.archs}", f"-Dkiln:toolkit={args.toolkit}"])
        steps.run([args.meson, "compile", "-C", build])
        # kiln's own tests, benchmarks and CLI are not part of a consumer's build.
        defined = {Path(t["filename"][0]).name for t in introspect(args.meson, build, "--targets")}
        unwanted = defined & {"test_cpu", "test_gpu", "bench_startup", "kiln"}
        if unwanted:
            raise steps.StepFailed(f"kiln built {', '.join(sorted(unwanted))} in the consumer's build")
        code = steps.run([args.meson, "test", "-C", build, "--print-errorlogs"], ok=(0, 1))
        # A test's name in testlog.json is "consumer / cpu" (meson 1.0) or "cpu - consumer:cpu" (1.12).
        results = {re.split(r" / |:", r["name"])[-1]: r["result"]
                   for r in json_lines(build / "meson-logs" / "testlog.json")}
        print(f"consumer tests: {results}")  # gpu: SKIP on a machine without a GPU, OK on one
        if code != 0:
            raise steps.StepFailed("the consumer's tests failed")
        if set(results) != {"cpu", "gpu"}:
            raise steps.StepFailed(f"expected the consumer's tests cpu and gpu, ran {sorted(results)}")
    return 0


def introspect(meson: str, build: Path, what: str) -> list:
    return json.loads(subprocess.run([meson, "introspect", str(build), what], check=True,
                                     stdout=subprocess.PIPE, text=True).stdout)


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="kiln's source tree")
    p.add_argument("--toolkit", required=True)
    p.add_argument("--meson", required=True)
    p.add_argument("--archs", default="sm_80,sm_90", help="the consumer's architectures (fewer: a faster test)")
    sys.exit(steps.main(lambda: consumer(p.parse_args())))
