"""Rendering a table's templates (kernel name expressions, families) within bounds of time, memory and
output size, so that no table can hang the build or exhaust the machine.

Jinja2's sandbox keeps a template away from Python's internals, not from `'a' * 10**11` (one allocation of
100 GB) or two nested loops over `range(100000)` (10^10 steps), and no check inside Python can stop a single
long operation in C. So the templates run in a child process (forked: it has every compiled template
already) under an address-space limit, and the parent kills it when one template takes longer than its
time. Each template's outcome comes back as it is done, so a failure names the one that failed.
"""

from __future__ import annotations

import os
import pickle
import resource
import select
import signal
import struct
import time
from typing import Callable

# What one template may take: wall time, memory beyond what the process already has, and characters of
# output. A kernel name expression renders in microseconds to a few hundred characters; kiln's largest
# family unit (a primitive) in milliseconds to ~10 KB.
SECONDS = 10.0
MEMORY_BYTES = 1 << 30
EXPRESSION_CHARS = 64 * 1024
UNIT_CHARS = 64 << 20

_RECORD = struct.Struct("<Q")


class Failed(Exception):
    """`index`: the job that failed; the message says why, in a few words (no traceback)."""

    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index = index


def run(jobs: list[Callable[[], str]], max_chars: int, describe: Callable[[BaseException], str],
        seconds: float | None = None) -> list[str]:
    """Each job's text, in order, each job run in one child process within `seconds` (default SECONDS) of
    wall time, MEMORY_BYTES of memory and `max_chars` of output. Raises Failed for the first job that
    fails: an exception (worded by `describe`), too much output, memory or time, or a child that died."""
    if not jobs:
        return []
    seconds = SECONDS if seconds is None else seconds
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        try:
            os.close(read_end)
            _child(jobs, max_chars, describe, write_end)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        return _collect(pid, read_end, len(jobs), seconds)
    finally:
        os.close(read_end)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):  # it ended, and _collect reaped it
            pass


def _child(jobs, max_chars: int, describe, fd: int) -> None:
    _limit_memory()
    for job in jobs:
        try:
            text = job()
            if not isinstance(text, str):
                outcome = (False, f"rendered {type(text).__name__}, not text")
            elif len(text) > max_chars:
                outcome = (False, f"renders to more than {max_chars:,} characters")
            else:
                outcome = (True, text)
        except MemoryError:
            outcome = (False, f"needs more than {MEMORY_BYTES >> 20} MiB of memory")
        except RecursionError:
            outcome = (False, "nests or recurses too deeply")
        except Exception as e:  # noqa: BLE001: whatever the template raised is the table's mistake
            outcome = (False, describe(e))
        data = pickle.dumps(outcome)
        data = _RECORD.pack(len(data)) + data
        while data:
            data = data[os.write(fd, data):]
        if not outcome[0]:
            return


def _limit_memory() -> None:
    """The child's address space: what it has now (the parent's) plus MEMORY_BYTES."""
    try:
        with open("/proc/self/statm") as f:
            current = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = current + MEMORY_BYTES
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft == resource.RLIM_INFINITY or limit < soft:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def _collect(pid: int, fd: int, count: int, seconds: float) -> list[str]:
    texts: list[str] = []
    buffer = b""
    deadline = time.monotonic() + seconds
    while len(texts) < count:
        while len(buffer) >= _RECORD.size and len(buffer) >= _RECORD.size + _RECORD.unpack_from(buffer)[0]:
            size = _RECORD.unpack_from(buffer)[0]
            ok, text = pickle.loads(buffer[_RECORD.size:_RECORD.size + size])
            buffer = buffer[_RECORD.size + size:]
            if not ok:
                raise Failed(len(texts), text)
            texts.append(text)
            deadline = time.monotonic() + seconds  # the next job's time starts
        if len(texts) == count:
            break
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        if not ready:
            raise Failed(len(texts), f"did not finish within {seconds:g} s")
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            _, status = os.waitpid(pid, 0)
            why = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}")
            raise Failed(len(texts), f"its rendering process died ({why})")
        buffer += chunk
    return texts
