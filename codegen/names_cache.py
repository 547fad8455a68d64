"""A directory of the lower step's results, keyed by everything NVRTC's run reads, so that the builds of
one checkout (its build/, a consumer's subproject build of it, a sanitizer build) name a unit's kernels
once (docs/DESIGN.md, "Names cached across builds").

An entry is one JSON file, `<key>.json`: {"key", "names", "kinds"}, as lowering.lower_with_types returns
them. The key is the SHA-256 of the NVRTC library (its real path, size, modification time and
nvrtcVersion), the lower step's code (lowering.py and this file), the unit's text, its name, its name
expressions, the options and each in-memory header's name and SHA-256: a unit's own, also when one NVRTC
run named a group of units (lowering.lower_group), so that a build grouping them otherwise finds them. An entry that is unreadable, too large, of another key or not of the expressions asked is a miss:
NVRTC runs and the entry is written again. Entries are written to a temporary file and renamed, so
builds running at once share the directory; a hit refreshes the entry's time, and a store past
MAX_ENTRIES removes the oldest down to three quarters of it. Failed runs are not stored."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

# Bump when an entry's meaning changes: older entries then become unreachable keys, pruned in time.
FORMAT = 1
MAX_ENTRIES = 4096
MAX_ENTRY_BYTES = 1 << 20
# A temporary file this old was left by a writer that died.
STALE_TEMP_SECONDS = 3600

CODE = [Path(__file__).resolve(), Path(__file__).resolve().with_name("lowering.py")]


class CacheUnusable(Exception):
    pass


def nvrtc_identity(library: str) -> list:
    """The NVRTC library as a key sees it: its real path, size, modification time and the version it
    reports ([major, minor]; [] where it cannot say)."""
    real = Path(library).resolve()
    st = real.stat()
    version: list[int] = []
    try:
        lib = ctypes.CDLL(str(real))
        major, minor = ctypes.c_int(), ctypes.c_int()
        if lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0:
            version = [major.value, minor.value]
    except (OSError, AttributeError):
        pass
    return [str(real), st.st_size, st.st_mtime_ns, version]


class NamesCache:
    """The lower step's results under `directory`, for runs of the NVRTC library `nvrtc`."""

    def __init__(self, directory: Path, nvrtc: str):
        self.directory = Path(directory)
        code = hashlib.sha256()
        for p in CODE:
            code.update(p.read_bytes())
        self.prefix = [FORMAT, nvrtc_identity(nvrtc), code.hexdigest()]

    @staticmethod
    def open(directory: Path, nvrtc: str) -> "NamesCache":
        """The cache in `directory`, made if missing; CacheUnusable saying why when it cannot be written."""
        try:
            directory = Path(directory)
            directory.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=directory, prefix=".probe-"):
                pass
            return NamesCache(directory, nvrtc)
        except OSError as e:
            raise CacheUnusable(f"{directory}: {e.strerror or e}") from None

    def key(self, text: str, source_name: str, expressions: list[str], options: list[str], headers) -> str:
        """The entry of a unit's lower step: its text and name, its name expressions, the options and the
        headers in memory ((name, bytes), in order)."""
        h = hashlib.sha256()
        h.update(json.dumps([*self.prefix, source_name, text, sorted(expressions), list(options)]).encode())
        for name, data in headers:
            h.update(json.dumps([name, hashlib.sha256(data).hexdigest()]).encode())
        return h.hexdigest()

    def path(self, key: str) -> Path:
        return self.directory / f"{key}.json"

    def load(self, key: str, expressions: list[str]) -> tuple[dict, dict] | None:
        """(names, kinds) of the entry `key` when it is whole and answers every expression, else None."""
        path = self.path(key)
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_ENTRY_BYTES + 1)
            entry = json.loads(data) if len(data) <= MAX_ENTRY_BYTES else None
        except (OSError, ValueError):
            return None
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        names, kinds = entry.get("names"), entry.get("kinds")
        wanted = set(expressions)
        if not (isinstance(names, dict) and isinstance(kinds, dict) and set(names) == wanted and set(kinds) == wanted
                and all(isinstance(v, str) and v for v in names.values())
                and all(v is None or isinstance(v, str) for v in kinds.values())):
            return None
        try:
            os.utime(path)
        except OSError:
            pass
        return names, kinds

    def store(self, key: str, names: dict, kinds: dict) -> None:
        """Writes the entry (a failure to write is the cache's loss, not the build's), then prunes."""
        data = json.dumps({"key": key, "names": names, "kinds": kinds}, sort_keys=True).encode()
        try:
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, self.path(key))
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        except OSError:
            return
        self.prune()

    def prune(self, limit: int = MAX_ENTRIES) -> None:
        """Past `limit` entries, the oldest go until three quarters of it are left; temporary files of
        writers that died go too."""
        entries, now = [], time.time()
        try:
            with os.scandir(self.directory) as it:
                for e in it:
                    try:
                        if e.name.startswith(".tmp-") and now - e.stat().st_mtime > STALE_TEMP_SECONDS:
                            os.unlink(e.path)
                        elif e.name.endswith(".json") and not e.name.startswith("."):
                            entries.append((e.stat().st_mtime_ns, e.path))
                    except OSError:
                        pass
        except OSError:
            return
        if len(entries) <= limit:
            return
        entries.sort()
        for _, path in entries[:len(entries) - limit * 3 // 4]:
            try:
                os.unlink(path)
            except OSError:
                pass
