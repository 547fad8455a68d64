"""Generator outputs: golden snapshots, determinism, binary checks, and the command line.

Set KILN_UPDATE_GOLDEN=1 to rewrite the golden files after an intended change.
"""

import os
import struct
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "codegen"))
sys.path.insert(0, str(HERE))
import catalog  # noqa: E402
import errors  # noqa: E402
import fatbin  # noqa: E402
import render  # noqa: E402
import spec as specmod  # noqa: E402
import unit_source  # noqa: E402
from fake_elf import fake_cubin, fake_ptx  # noqa: E402
from run_kiln_gen import run_kiln_gen  # noqa: E402

FIXTURE = HERE / "fixtures" / "mini.toml"
GOLDEN = HERE / "golden"
ARCHS = "sm_75,sm_90"
LOWERED = {"fill": "fill", "mini::axpy<float>": "_ZN4mini4axpyIfEEvT_PKS1_PS1_i"}
FATBINARY = str(Path(os.environ.get("KILN_TOOLKIT", "/usr/local/cuda")) / "bin" / "fatbinary")
TYPES = {"fill": "void(float*, float, int)", "mini::axpy<float>": "void(float, float const*, float*, int)"}


def load():
    return specmod.load(FIXTURE, (75, 90), embed_ptx=True)


def fill_build_dir(directory: Path, spec, corrupt=None):
    """What the build's source/compile/lower/fatbin steps leave behind, with fake binaries packed by the
    toolkit's fatbinary. `corrupt(unit, target, data)` may alter a binary before it is packed."""
    for unit in spec.units:
        files = unit_source.write_source(spec, unit, directory)
        names = {k.expression: LOWERED[k.expression] for k in unit.kernels}
        render.write_json(files.names, names)
        render.write_json(files.types, {e: TYPES.get(e) for e in names})
        for target in unit.targets:
            arch, kind = specmod.parse_target(target)
            symbols = sorted(names.values())
            data = fake_ptx(arch, symbols) if kind == "compute" else fake_cubin(arch, symbols)
            if corrupt:
                data = corrupt(unit.name, target, data)
            files.binary(target).write_bytes(data)
            render.write_json(files.headers(target), {"digest": f"{unit.name}-digest", "headers": []})
        render.write_json(files.bundle, {"headers": []})
        fatbin.build_unit(render.read_json(files.description), FATBINARY, files)


class Golden(unittest.TestCase):
    def check_golden(self, name: str, text: str):
        path = GOLDEN / name
        if os.environ.get("KILN_UPDATE_GOLDEN"):
            path.write_text(text)
        self.assertEqual(text, path.read_text(), f"{name} changed; rerun with KILN_UPDATE_GOLDEN=1 if intended")

    def test_unit_sources(self):
        spec = load()
        for unit in spec.units:
            self.check_golden(f"mini.{unit.name}.cu", unit_source.render_unit(spec, unit))

    def test_catalog(self):
        spec = load()
        with tempfile.TemporaryDirectory() as d:
            fill_build_dir(Path(d), spec)
            texts = catalog.emit_catalog(spec, catalog.catalog_model(spec, Path(d), "3.0.1"), "mini_catalog.hpp", "mini_blobs.S")
        self.check_golden("mini_catalog.hpp", texts["hpp"])
        self.check_golden("mini_catalog.cpp", texts["cpp"])
        # The .S names binaries by absolute path: compare it with the directory taken out.
        self.check_golden("mini_blobs.S", texts["asm"].replace(str(Path(d).resolve()), "BUILD"))


class Splittable(unittest.TestCase):
    def test_the_compile_steps_flag_reaches_the_catalog(self):
        """A unit whose first target's record says splittable (nvcc_compile.unit_splittable) is marked so in
        the catalog; one without the record (an older build's) is not."""
        spec = load()
        with tempfile.TemporaryDirectory() as d:
            fill_build_dir(Path(d), spec)
            files = unit_source.UnitFiles(Path(d), spec.name, "axpy_f32")
            listed = files.listed(spec.unit("axpy_f32").targets)
            render.write_json(listed, {**render.read_json(listed), "splittable": True})
            text = catalog.emit_catalog(spec, catalog.catalog_model(spec, Path(d), "3.0.1"), "h.hpp", "b.S")["cpp"]
        lines = {name: next(line for line in text.splitlines() if line.endswith(f"// {name}")) for name in ("fill", "axpy_f32")}
        self.assertIn(".splittable = true", lines["axpy_f32"])
        self.assertNotIn("splittable", lines["fill"])


class Determinism(unittest.TestCase):
    def test_same_input_same_bytes(self):
        runs = []
        for _ in range(2):
            spec = load()
            with tempfile.TemporaryDirectory() as d:
                fill_build_dir(Path(d), spec)
                texts = catalog.emit_catalog(spec, catalog.catalog_model(spec, Path(d), "3.0.1"), "h.hpp", "b.S")
                texts["asm"] = texts["asm"].replace(str(Path(d).resolve()), "BUILD")
            runs.append((texts, [unit_source.render_unit(spec, u) for u in spec.units]))
        self.assertEqual(runs[0], runs[1])

    def test_kernels_sorted_and_fatbins_back_to_back(self):
        spec = load()
        with tempfile.TemporaryDirectory() as d:
            fill_build_dir(Path(d), spec)
            model = catalog.catalog_model(spec, Path(d), "3.0.1")
        keys = [k["key"] for k in model["kernels"]]
        self.assertEqual(keys, sorted(keys))
        # Each unit's cubins in one fatbin, its PTX in another; no padding between them (cuobjdump walks on).
        end = 0
        for f in model["fatbins"]:
            self.assertEqual(f["offset"], end)
            self.assertEqual(f["size"] % 8, 0)
            end += f["size"]
        self.assertEqual(model["blobs_size"], end)
        self.assertEqual([f["label"] for f in model["fatbins"]],
                         ["fill: sm_75 sm_90", "fill: compute_90", "axpy_f32: sm_80 sm_90", "axpy_f32: compute_90"])
        # Compressed even where that does not pay: fatbinary's `size` mode does so with the tiny fakes.
        self.assertEqual({b["compression"] for b in model["binaries"]}, {"zstd"})
        # axpy_f32 overrides its archs: sm_80, sm_90 and PTX for compute_90 only.
        axpy = [b["label"] for b in model["binaries"] if b["label"].startswith("axpy_f32")]
        self.assertEqual(axpy, ["axpy_f32 sm_80", "axpy_f32 sm_90", "axpy_f32 compute_90"])

    def test_fatbins_read_back(self):
        """What the catalog indexes is what fatbinary wrote: each image at its offset, decompressing to the
        binary that went in (a cubin byte for byte; PTX as fatbinary keeps it, comments dropped)."""
        spec = load()
        with tempfile.TemporaryDirectory() as d:
            fill_build_dir(Path(d), spec)
            model = catalog.catalog_model(spec, Path(d), "3.0.1")
            blobs = b"".join(Path(f["path"]).read_bytes() for f in model["fatbins"])
            files = unit_source.UnitFiles(Path(d), "mini", "fill")
            images = fatbin.read(blobs)
            self.assertEqual([(i.kind, i.arch) for i in images],
                             [(b["kind"], b["arch"]) for b in model["binaries"]])
            for image, b in zip(images, model["binaries"]):
                self.assertEqual(image.offset, b["offset"])
                self.assertEqual(image.stored_size, b["stored_size"])
            self.assertEqual(images[0].data(), files.binary("sm_75").read_bytes())
            self.assertIn(b".entry fill", images[2].data())

    def test_write_if_different_keeps_timestamp(self):
        with tempfile.TemporaryDirectory() as d:
            p = Path(d) / "out.txt"
            self.assertTrue(render.write_if_different(p, "a"))
            os.utime(p, (1000, 1000))
            self.assertFalse(render.write_if_different(p, "a"))
            self.assertEqual(p.stat().st_mtime, 1000)
            self.assertTrue(render.write_if_different(p, "b"))
            self.assertEqual(p.read_text(), "b")

    def test_string_escapes(self):
        t = catalog.StringTable()
        t.add('a"b\\c\nd?\x01é')
        self.assertEqual("".join(t.chunks()), 'a\\"b\\\\c\\nd\\077\\001\\303\\251')


class CompilerLogs(unittest.TestCase):
    """Compiler logs as kiln-gen shows them: every file a #line names as a path, and the lines hoisted
    above the unit's first #line cited in their source."""

    def test_hoisted_lines_are_cited_in_their_source(self):
        with tempfile.TemporaryDirectory() as d:
            root = Path(d)
            (root / "kernels").mkdir()
            (root / "kernels" / "b.cu").write_text('// b\n#include "x.h"\n\nextern "C" __global__ void b() {}\n')
            (root / "t.toml").write_text('[registry]\nname = "t"\n[[unit]]\nname = "u"\nsource = "kernels/b.cu"\n'
                                         'kernels = ["b"]\n')
            spec = specmod.load(root / "t.toml", (80,), embed_ptx=False)
            files = unit_source.write_source(spec, spec.units[0], root)
            desc = render.read_json(files.description)
            lines = files.source.read_text().split("\n")
            at = lines.index('#include "x.h"') + 1  # its line in the unit
            self.assertGreater(at, 2)
            source = str(root / "kernels" / "b.cu")
            for log, shown in (
                    (f't.u.cu({at}): catastrophic error: cannot open source file "x.h"',  # NVRTC's
                     f'{source}(2): catastrophic error: cannot open source file "x.h"'),
                    (f'{files.source}:{at}:10: fatal error: x.h: No such file\n {at:3} | #include "x.h"\n',  # gcc's
                     f'{source}:2:10: fatal error: x.h: No such file\n   2 | #include "x.h"\n'),
                    ("kernels/b.cu:4:1: error: late\nkernels/b.cu(4): error: late",  # after the #line
                     f"{source}:4:1: error: late\n{source}(4): error: late"),
                    (f"t.u.cu({len(lines)}): error: past the hoisted lines", f"t.u.cu({len(lines)}): error: past the hoisted lines")):
                with self.subTest(log=log):
                    self.assertEqual(unit_source.log_with_paths(desc, log), shown)


class BinaryChecks(unittest.TestCase):
    """The catalog's checks run on the fatbins' contents; fatbinary itself refuses some binaries first."""

    def catalog_error(self, corrupt=None, damage_fatbin=None) -> str:
        spec = load()
        with tempfile.TemporaryDirectory() as d:
            fill_build_dir(Path(d), spec, corrupt)
            if damage_fatbin:
                damage_fatbin(unit_source.UnitFiles(Path(d), "mini", "fill"))
            with self.assertRaises(errors.GenError) as ctx:
                catalog.catalog_model(spec, Path(d), "3.0.1")
        return str(ctx.exception)

    def test_image_header_and_elf_disagree(self):
        def relabel(files):  # the sm_90 image's fatbin entry says 90, its ELF says 80
            data = bytearray(files.fatbin("sm").read_bytes())
            second = fatbin.read(bytes(data))[1]
            struct.pack_into("<I", data, second.offset + 28, 80)
            files.fatbin("sm").write_bytes(bytes(data))
        msg = self.catalog_error(damage_fatbin=relabel)
        self.assertIn("unit #1 'fill'", msg)
        self.assertIn("the sm_80 image is built for sm_90", msg)

    def test_fatbin_lacks_an_architecture(self):
        def replace(files):  # a fatbin of another target list, as a stale or foreign one would be
            fatbin.build_unit(dict(render.read_json(files.description), targets=["sm_75", "compute_90"]),
                              FATBINARY, files)
        msg = self.catalog_error(damage_fatbin=replace)
        self.assertIn("its fatbins hold sm_75, compute_90; expected sm_75, sm_90, compute_90", msg)

    def test_missing_symbol(self):
        msg = self.catalog_error(lambda u, t, data: fake_cubin(90, ["other"]) if (u, t) == ("fill", "sm_90") else data)
        self.assertIn("the sm_90 image lacks kernel symbol(s) fill", msg)

    def test_cubin_changed_after_packing(self):
        msg = self.catalog_error(damage_fatbin=lambda files: files.binary("sm_75").write_bytes(fake_cubin(75, ["fill", "x"])))
        self.assertIn("differs from", msg)

    def test_unreadable_fatbin(self):
        msg = self.catalog_error(damage_fatbin=lambda files: files.fatbin("sm").write_bytes(b"garbage!" * 4))
        self.assertIn("unreadable fatbin: no fatbin at 0", msg)

    def test_fatbinary_refuses_what_is_not_a_cubin_of_its_arch(self):
        for data, why in ((b"garbage", "fatbinary failed"), (fake_cubin(80, ["fill"]), "elf arch does not match")):
            with self.subTest(why=why), tempfile.TemporaryDirectory() as d:
                with self.assertRaises(errors.GenError) as ctx:
                    fill_build_dir(Path(d), load(), lambda u, t, b: data if (u, t) == ("fill", "sm_90") else b)
                self.assertIn("unit #1 'fill'", str(ctx.exception))
                self.assertIn(why, str(ctx.exception))


class CommandLine(unittest.TestCase):
    def test_units(self):
        code, out, _ = run_kiln_gen("units", "--spec", str(FIXTURE), "--archs", ARCHS)
        self.assertEqual(code, 0)
        self.assertEqual(out, "fill sm_75,sm_90,compute_90\naxpy_f32 sm_80,sm_90,compute_90\n")
        code, out, _ = run_kiln_gen("units", "--spec", str(FIXTURE), "--archs", ARCHS, "--no-ptx")
        self.assertEqual(out.splitlines()[0], "fill sm_75,sm_90")

    def test_linked_only_keeps_the_linked_rows_as_they_are(self):
        primitives = Path(__file__).resolve().parents[2] / "kernels" / "primitives.toml"
        _, whole, _ = run_kiln_gen("units", "--spec", primitives, "--archs", "sm_80")
        code, linked, _ = run_kiln_gen("units", "--spec", primitives, "--archs", "sm_80", "--linked-only")
        self.assertEqual(code, 0)
        self.assertEqual(linked.splitlines(), [u for u in whole.splitlines() if u.startswith("linked_")])
        self.assertEqual(len(linked.splitlines()), 63)

    def test_registry_names_the_outputs_and_the_namespace(self):
        code, out, _ = run_kiln_gen("registry", "--spec", str(FIXTURE), "--archs", ARCHS)
        self.assertEqual((code, out), (0, "mini mini::kernels\n"))

    def test_bad_table_exits_1_with_one_message(self):
        with tempfile.TemporaryDirectory() as d:
            bad = Path(d) / "bad.toml"
            bad.write_text('[registry]\nname = "x"\n[[unit]]\nname = "u"\nsource = "nope.cu"\nkernels = ["k"]\n')
            code, out, err = run_kiln_gen("units", "--spec", str(bad), "--archs", ARCHS)
        self.assertEqual(code, 1)
        self.assertEqual(out, "")
        self.assertRegex(err, r"^kiln: error: .*bad.toml:3: unit #1 'u': field 'source': cannot read 'nope.cu'")

    def test_bad_arch_option(self):
        code, _, err = run_kiln_gen("units", "--spec", str(FIXTURE), "--archs", "sm_99")
        self.assertEqual(code, 1)
        self.assertIn("-Darchs: 'sm_99' is not an architecture", err)

    def test_source_writes_only_on_change(self):
        with tempfile.TemporaryDirectory() as d:
            args = ["source", "--spec", str(FIXTURE), "--archs", ARCHS, "--unit", "fill", "--outdir", d,
                    "--depfile", str(Path(d) / "fill.d")]
            self.assertEqual(run_kiln_gen(*args)[0], 0)
            cu = Path(d) / "mini.fill.cu"
            os.utime(cu, (1000, 1000))
            self.assertEqual(run_kiln_gen(*args)[0], 0)
            self.assertEqual(cu.stat().st_mtime, 1000)
            deps = (Path(d) / "fill.d").read_text()
            self.assertIn("fill.cu", deps)
            self.assertIn("mini.toml", deps)


if __name__ == "__main__":
    unittest.main()
