"""Suite consumer: the lines the README and the guide (docs/) show are the lines the tests build, character
for character. Each `<!-- tested: NAME -->` block is checked against the file a test builds or runs: the
quickstart against tests/installed (built as a Meson subproject by `consumer`, with pkg-config and CMake
by `installed`), the Meson lines against tests/consumer; and every marked block has a check here."""

import re
import sys
import unittest
from pathlib import Path

import readme

SOURCE = Path(sys.argv.pop(1) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
CONSUMER = SOURCE / "tests" / "consumer"
QUICKSTART = SOURCE / "tests" / "installed"

# name -> (file, whole): the block is that whole file (True) or a run of its lines (False).
FILES = {
    "quickstart meson_options.txt": (QUICKSTART / "meson_options.txt", True),
    "quickstart meson.build": (QUICKSTART / "meson.build", True),
    "quickstart tiny.toml": (QUICKSTART / "tiny.toml", False),
    "quickstart scale.cu": (QUICKSTART / "scale.cu", False),
    "quickstart main.cpp": (QUICKSTART / "main.cpp", False),
    "quickstart tiny_kiln.cpp": (QUICKSTART / "tiny_kiln.cpp", False),
    "quickstart fill.cu.j2": (QUICKSTART / "families" / "fill.cu.j2", True),
    "cmake CMakeLists.txt": (QUICKSTART / "CMakeLists.txt", True),
    "program": (SOURCE / "tests" / "gpu" / "test_program.cpp", False),
    "python quickstart": (SOURCE / "tests" / "python" / "quickstart.py", False),
    "python structs": (SOURCE / "tests" / "python" / "structs_example.py", False),
    "python install": (SOURCE / "scripts" / "python-install-check.sh", False),
    "consumer meson_options.txt": (CONSUMER / "meson_options.txt", True),
    "consumer meson.build": (CONSUMER / "meson.build", False),
    "consumer meson.build plans": (CONSUMER / "meson.build", False),
}
OTHERS = {"quickstart run", "installed", "record loop", "record format", "python options"}  # checked below


class ReadmeLines(unittest.TestCase):
    def test_every_marked_block_is_checked(self):
        self.assertEqual(set(readme.marked(SOURCE)), set(FILES) | OTHERS)

    def test_blocks_are_the_files(self):
        for name, (path, whole) in FILES.items():
            with self.subTest(name):
                text, shown = path.read_text(), readme.block(SOURCE, name)
                if whole:
                    self.assertEqual(shown, text)
                else:
                    self.assertIn("\n" + shown, "\n" + text)  # whole lines

    def test_record_format_is_what_the_readers_read(self):
        """The record shown in docs/programs.md, read by kiln-gen's reader (the runtime's reads the same
        format: tests/codegen/test_demand_record.py writes records as the runtime writes them)."""
        sys.path.insert(0, str(SOURCE / "codegen"))
        try:
            import demand_record
        finally:
            sys.path.pop(0)
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "shown.record"
            path.write_bytes(readme.block(SOURCE, "record format").encode())
            record = demand_record.read(path)
        [program] = record.programs
        self.assertEqual((program.label, program.source), ("filters", "__global__ void fill() {}"))
        self.assertEqual(program.headers, [("filters/ops.cuh", "#pragma once")])
        self.assertEqual((program.options, program.kernels), (["-std=c++17"], ["fill"]))
        self.assertEqual(record.kernels, [("tiny", "iota", 120)])

    def test_record_loop_names_what_exists(self):
        block = readme.block(SOURCE, "record loop")
        self.assertIn("KILN_RECORD=", block)
        self.assertIn("--record FILE", (SOURCE / "runtime" / "src" / "cli" / "cli.cpp").read_text())
        self.assertIn('"from-record"', (SOURCE / "codegen" / "kiln_gen.py").read_text())
        self.assertIn('"KILN_RECORD"', (SOURCE / "runtime" / "src" / "base" / "settings.hpp").read_text())
        for line in block.splitlines():
            tool = line.split("#")[0].split()
            tool = [w for w in tool if "=" not in w][:1]
            if tool and tool[0].startswith("build/"):
                self.assertIn(tool[0][len("build/"):], (QUICKSTART / "meson.build").read_text())

    def test_quickstart_run_names_its_programs(self):
        build = (QUICKSTART / "meson.build").read_text()
        programs = set(re.findall(r"executable\('([^']+)'", build))
        for line in readme.block(SOURCE, "quickstart run").splitlines():
            command = line.split("#")[0].split()
            if command and command[0].startswith("build/"):
                self.assertIn(command[0].removeprefix("build/"), programs, line)
        self.assertEqual(readme.quickstart_precompile(SOURCE)[:2], ["precompile", "--arch"])

    def test_installed_block_names_the_example_files(self):
        text = readme.block(SOURCE, "installed")
        for name in ("tiny.toml", "main.cpp", "kiln-gen build", "pkg-config --cflags --libs kiln"):
            self.assertIn(name, text)
        for f in ("tiny.toml", "main.cpp"):
            self.assertTrue((QUICKSTART / f).is_file(), f)

    def test_python_options_are_the_install_checks_commands(self):
        script = (SOURCE / "scripts" / "python-install-check.sh").read_text().splitlines()
        for line in readme.block(SOURCE, "python options").splitlines():
            self.assertIn(line, script)


if __name__ == "__main__":
    unittest.main()
