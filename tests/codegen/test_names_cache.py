"""The lower step's cache (`kiln-gen build --names-cache`): a build that finds a unit's names there runs
no NVRTC and writes what NVRTC would have; any change to what NVRTC reads misses; a damaged entry is a
miss and is written again; the directory stays bounded; without it, or with one that cannot be written,
NVRTC names every unit. Needs the toolkit's nvcc and NVRTC: the build passes KILN_TOOLKIT."""

import dataclasses
import json
import os
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
import cuda_toolkit  # noqa: E402
import lowering  # noqa: E402
import names_cache  # noqa: E402
import render  # noqa: E402
import spec as specmod  # noqa: E402
import unit_source  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402

TOOLKIT = cuda_toolkit.Toolkit.at(Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")))
FIXTURE = HERE / "fixtures" / "mini.toml"


class CountedNvrtc:
    """lowering.lower_names, counted, while in use (the build runs in this process with one job)."""

    def __enter__(self):
        self.runs, self.real = 0, lowering.lower_names

        def counted(*args, **kwargs):
            self.runs += 1
            return self.real(*args, **kwargs)
        lowering.lower_names = counted
        return self

    def __exit__(self, *_):
        lowering.lower_names = self.real


def outputs(directory: Path) -> dict[str, str]:
    """The lower step's files in `directory`: {file name: text}."""
    return {p.name: p.read_text() for p in sorted(directory.rglob("*")) if p.name.endswith((".names.json", ".types.json"))}


class NamesCache(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)
        self.spec = specmod.load(FIXTURE, (80,), False, jit_only=True)
        self.dir = self.root / "names"

    def tearDown(self):
        self.tmp.cleanup()

    def cache(self) -> names_cache.NamesCache:
        return names_cache.NamesCache.open(self.dir, str(TOOLKIT.nvrtc))

    def entries(self) -> list[Path]:
        return sorted(self.dir.glob("*.json"))

    def build(self, outdir: str, *cache) -> tuple[int, str]:
        """`kiln-gen build` of the fixture, every unit stale, in one process: (NVRTC runs, stderr)."""
        with CountedNvrtc() as nvrtc:
            code, _, err = run_kiln_gen("--ptx-strip", "/bin/true", *cache, "build", "--spec", FIXTURE, "--archs", "sm_80",
                                        "--jit-only", "--no-ptx", "--toolkit", TOOLKIT.root, "--jobs", "1",
                                        "--outdir", self.root / outdir)
        self.assertEqual(code, 0, err)
        return nvrtc.runs, err

    def lower(self, outdir: str, cache, headers: list[str] = ()) -> int:
        """The lower step of each unit of the table, as if nvcc had read `headers` for it: NVRTC runs."""
        directory = self.root / outdir
        directory.mkdir()
        with CountedNvrtc() as nvrtc:
            for unit in self.spec.units:
                files = unit_source.write_source(self.spec, unit, directory)
                listed = directory / f"{unit.name}.listed.json"
                render.write_json(listed, {"digest": "", "headers": list(headers)})
                lowering.lower_unit(render.read_json(files.description), files.source, str(TOOLKIT.nvrtc), TOOLKIT.root,
                                    files.names, listed, files.bundle, files.types, cache)
        return nvrtc.runs

    def test_a_second_build_runs_no_nvrtc_and_writes_the_same(self):
        self.assertEqual(self.build("none")[0], 2, "without a cache, NVRTC names each unit")
        self.assertEqual(self.build("cold", "--names-cache", self.dir)[0], 2)
        self.assertEqual(len(self.entries()), 2)
        self.assertEqual(self.build("warm", "--names-cache", self.dir)[0], 0)
        reference = outputs(self.root / "none")
        self.assertEqual(len(reference), 4)
        self.assertEqual(outputs(self.root / "cold"), reference)
        self.assertEqual(outputs(self.root / "warm"), reference)
        self.assertIn('"mini::axpy<float>": "_ZN4mini4axpyIfEEvT_PKS1_PS1_i"', "".join(reference.values()))

    def test_without_a_cache_every_lowering_runs_nvrtc(self):
        self.assertEqual(self.lower("one", None), 2)
        self.assertEqual(self.lower("two", None), 2)
        self.assertFalse(self.dir.exists())

    def test_a_damaged_entry_is_a_miss_and_is_written_again(self):
        self.assertEqual(self.lower("cold", self.cache()), 2)
        reference = outputs(self.root / "cold")
        first, second = self.entries()
        good = json.loads(first.read_text())
        damages = [b"", first.read_bytes()[:-7], b"\xff\xfe not json", b"[1, 2]",
                   json.dumps(dict(good, key="0" * 64)).encode(),                               # another key's
                   json.dumps(dict(good, names={})).encode(),                                   # no names
                   json.dumps(dict(good, names={e: 3 for e in good["names"]})).encode(),        # not strings
                   json.dumps(dict(good, kinds={"other": None})).encode(),                      # other expressions
                   b" " * (names_cache.MAX_ENTRY_BYTES + 1)]                                    # too large
        for i, damage in enumerate(damages):
            with self.subTest(damage=damage[:40]):
                first.write_bytes(damage)
                self.assertEqual(self.lower(f"damaged{i}", self.cache()), 1, "NVRTC names the damaged unit only")
                self.assertEqual(outputs(self.root / f"damaged{i}"), reference)
                self.assertEqual(json.loads(first.read_text()), good, "the entry is written again")
        self.assertTrue(second.is_file())

    def test_what_nvrtc_reads_is_in_the_key(self):
        cache = self.cache()
        base = dict(text="__global__ void k() {}\n", source_name="k.cu", expressions=["k"], options=["-arch=compute_80"],
                    headers=[("h.cuh", b"#define H 1\n")])
        key = cache.key(**base)
        self.assertEqual(cache.key(**base), key)
        self.assertEqual(cache.key(**dict(base, expressions=["k2", "k"])), cache.key(**dict(base, expressions=["k", "k2"])))
        for field, value in (("text", "__global__ void k() { }\n"), ("source_name", "j.cu"), ("expressions", ["k", "k2"]),
                             ("options", ["-arch=compute_90"]), ("headers", [("h.cuh", b"#define H 2\n")]),
                             ("headers", [("g.cuh", b"#define H 1\n")]), ("headers", [])):
            with self.subTest(field=field, value=value):
                self.assertNotEqual(cache.key(**dict(base, **{field: value})), key)
        other = names_cache.NamesCache(self.dir, str(TOOLKIT.nvrtc))
        other.prefix = [*other.prefix[:1], [*other.prefix[1][:3], [99, 0]], *other.prefix[2:]]  # another NVRTC version
        self.assertNotEqual(other.key(**base), key)

    def test_a_changed_header_misses(self):
        header = self.root / "include" / "value.cuh"
        header.parent.mkdir()
        header.write_text("#define VALUE 1\n")
        (self.root / "k.cu").write_text('#include "value.cuh"\ntemplate <int N> __global__ void k(int* x) { *x = N + VALUE; }\n')
        (self.root / "t.toml").write_text('[registry]\nname = "t"\ninclude_dirs = ["include"]\n\n[[unit]]\nname = "k"\n'
                                          'source = "k.cu"\nkernels = { k1 = "k<1>" }\n')
        self.spec = specmod.load(self.root / "t.toml", (80,), False, jit_only=True)
        self.assertEqual(self.lower("one", self.cache(), [str(header)]), 1)
        self.assertEqual(self.lower("two", self.cache(), [str(header)]), 0)
        header.write_text("#define VALUE 2\n")
        self.assertEqual(self.lower("three", self.cache(), [str(header)]), 1)
        self.assertEqual(len(self.entries()), 2)

    def two_units_of_one_source(self):
        """A table of two units, a and b, of one source (one NVRTC run can name both)."""
        (self.root / "k.cu").write_text("template <int N> __global__ void k(int* x) { *x = N; }\n")
        (self.root / "t.toml").write_text('[registry]\nname = "t"\n\n[[unit]]\nname = "a"\nsource = "k.cu"\n'
                                          'kernels = { k1 = "k<1>" }\n\n[[unit]]\nname = "b"\nsource = "k.cu"\n'
                                          'kernels = { k2 = "k<2>" }\n')
        self.spec = specmod.load(self.root / "t.toml", (80,), False, jit_only=True)

    def lower_group_in(self, directory: Path, order: list[int], cache) -> int:
        """lowering.lower_group over the table's units (in `order`) written to `directory` (made here; it
        may be relative to the working directory); checks that each unit was lowered and returns how many
        NVRTC runs it took."""
        directory.mkdir()
        units = []
        for unit in self.spec.units:
            files = unit_source.write_source(self.spec, unit, directory)
            self.assertEqual(files.source.is_absolute(), directory.is_absolute())
            listed = directory / f"{unit.name}.listed.json"
            render.write_json(listed, {"digest": "", "headers": []})
            units.append((render.read_json(files.description), files.source, files.names, listed, files.bundle, files.types))
        with CountedNvrtc() as nvrtc:
            outcome = lowering.lower_group([units[i] for i in order], str(TOOLKIT.nvrtc), TOOLKIT.root, cache)
        self.assertEqual(outcome, {"a": "", "b": ""})
        return nvrtc.runs

    def test_a_group_stores_each_units_own_entry(self):
        # Two units of one source: one NVRTC run names both (lowering.lower_group); a build of one of
        # them alone, or of both in another order, finds its entry.
        self.two_units_of_one_source()
        self.assertEqual(self.lower_group_in(self.root / "one", [0, 1], self.cache()), 1)
        self.assertEqual(len(self.entries()), 2)
        self.assertEqual(self.lower_group_in(self.root / "two", [1, 0], self.cache()), 0)
        self.assertEqual(outputs(self.root / "two"), outputs(self.root / "one"))
        self.spec = dataclasses.replace(self.spec, units=self.spec.units[1:])
        self.assertEqual(self.lower("three", self.cache()), 0)
        self.assertIn('"k<2>": "_Z1kILi2EEvPi"', outputs(self.root / "three")["t.b.names.json"])

    def test_a_group_in_a_relative_directory_is_one_nvrtc_run(self):
        # A build's work directory as Meson names it, relative to the build directory: the group's one
        # NVRTC run must not fall back to a run per unit (it did when the source was read after the
        # lowering moved to its empty working directory: 81 runs for the primitives' 7 groups).
        self.two_units_of_one_source()
        here = os.getcwd()
        os.chdir(self.root)
        try:
            runs = self.lower_group_in(Path("work"), [0, 1], None)
        finally:
            os.chdir(here)
        self.assertEqual(runs, 1)
        self.assertIn('"k<2>": "_Z1kILi2EEvPi"', outputs(self.root / "work")["t.b.names.json"])

    def test_bounded(self):
        cache = self.cache()
        for i in range(40):
            cache.store(f"{i:064x}", {"k": "k"}, {"k": None})
            os.utime(cache.path(f"{i:064x}"), (1000 + i, 1000 + i))
        cache.prune(limit=20)
        self.assertEqual([p.stem for p in self.entries()], [f"{i:064x}" for i in range(25, 40)], "the oldest went")
        stale = self.dir / ".tmp-dead"
        stale.write_text("{")
        os.utime(stale, (1000, 1000))
        cache.prune(limit=20)
        self.assertFalse(stale.exists(), "a dead writer's temporary file is removed")
        self.assertEqual(len(self.entries()), 15)

    def test_a_directory_that_cannot_be_used_is_said_and_the_build_goes_on(self):
        blocked = self.root / "file"
        blocked.write_text("not a directory")
        with self.assertRaises(names_cache.CacheUnusable):
            names_cache.NamesCache.open(blocked / "names", str(TOOLKIT.nvrtc))
        runs, err = self.build("out", "--names-cache", blocked / "names")
        self.assertEqual(runs, 2)
        self.assertIn(f"--names-cache {blocked / 'names'}: ", err)
        self.assertIn("not used; every stale unit's names come from NVRTC", err)
        self.assertEqual(len(outputs(self.root / "out")), 4)

if __name__ == "__main__":
    unittest.main()
