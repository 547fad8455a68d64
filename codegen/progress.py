"""What `kiln-gen build` tells its user while it runs: a progress line on a terminal (nothing when its
output goes to a build log), and the compilers' warnings for units that built, shown with `--warnings` or
counted in one line. A failed unit's log is its error, always shown whole (table_build.py)."""

from __future__ import annotations

import sys
import time


class Report:
    """Hears of every step; says nothing. table_build.build's default, and the tests'."""

    def start(self, steps: int) -> None:
        pass

    def step(self, unit: str, ok: bool) -> None:
        pass

    def warnings(self, where: str, text: str) -> None:
        pass

    def shared(self, what: str, units: list[str]) -> None:
        """One compiler run serves these units (table_build.compile_units): "headers listed" by one nvcc
        -M, "names lowered" by one NVRTC run."""

    def finish(self) -> None:
        pass


class TerminalReport(Report):
    """`[#####     ] 12/40 steps, 9.3 s  unit` rewritten in place on `stream` when it is a terminal; the
    warnings printed at the end with `show_warnings`, else counted in one line."""

    def __init__(self, registry: str, show_warnings: bool, stream=None):
        self.registry = registry
        self.show_warnings = show_warnings
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.total = self.done = 0
        self.started = time.monotonic()
        self.collected: list[tuple[str, str]] = []

    def start(self, steps: int) -> None:
        self.total, self.done, self.started = steps, 0, time.monotonic()
        if steps and self.live:
            self.stream.write(f"kiln-gen: registry {self.registry}: {steps} compile steps\n")

    def step(self, unit: str, ok: bool) -> None:
        self.done += 1
        if self.live and self.total:
            width = 30
            filled = width * self.done // self.total
            self.stream.write(f"\r[{'#' * filled}{' ' * (width - filled)}] {self.done}/{self.total}, "
                              f"{time.monotonic() - self.started:.1f} s  {unit}\033[K")
            if self.done == self.total:
                self.stream.write("\n")
            self.stream.flush()

    def warnings(self, where: str, text: str) -> None:
        self.collected.append((where, text))

    def finish(self) -> None:
        if not self.collected:
            return
        if self.show_warnings:
            for where, text in self.collected:
                self.stream.write(f"{where}: compiled with warnings:\n{text.rstrip()}\n")
        else:
            units = len({where for where, _ in self.collected})
            self.stream.write(f"kiln-gen: registry {self.registry}: {units} unit{'s' if units != 1 else ''} compiled "
                              f"with compiler warnings; `kiln-gen build --warnings` shows them\n")
        self.stream.flush()
