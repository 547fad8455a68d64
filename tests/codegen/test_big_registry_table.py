"""The big-registry benchmark's generated spec table (bench/big_registry/make_table.py): a valid table of
200 units of the sizes the benchmark promises, the same on every run, whose family renders to that many
lines."""

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "codegen"))
import render  # noqa: E402
import spec  # noqa: E402

MAKE_TABLE = ROOT / "bench" / "big_registry" / "make_table.py"


def make(out: Path) -> None:
    subprocess.run([sys.executable, str(MAKE_TABLE), str(out),
                    "--families", str(ROOT / "bench" / "big_registry" / "families"),
                    "--cub-families", str(ROOT / "bench" / "kernels" / "families"),
                    "--cub-include", str(ROOT / "bench" / "kernels" / "include")], check=True)


class BigRegistryTable(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "big.toml"
        make(self.path)
        self.spec = spec.load(self.path, (90,), False)

    def tearDown(self):
        self.dir.cleanup()

    def test_two_hundred_units_of_the_promised_sizes(self):
        units = self.spec.units
        self.assertEqual(len(units), 200)
        lines = [int(u.params["LINES"]) for u in units if u.family == "synthetic"]
        self.assertEqual(len(lines), 198)
        self.assertEqual(sum(1 for n in lines if 50 <= n <= 300), 194)
        self.assertEqual(sorted(n for n in lines if n > 1000), [1100, 1300, 1600, 2000])
        self.assertEqual(sum(1 for u in units if u.family == "sort_scan"), 2)
        self.assertEqual(len({u.name for u in units}), 200)

    def test_the_same_table_every_run(self):
        again = Path(self.dir.name) / "again.toml"
        make(again)
        self.assertEqual(again.read_text(), self.path.read_text())

    def test_the_largest_unit_renders_to_about_2000_lines(self):
        env = render.environment(ROOT / "bench" / "big_registry" / "families")
        text = env.get_template("synthetic.cu.j2").render(ID=199, LINES=2000)
        self.assertTrue(1990 <= len(text.splitlines()) <= 2010, len(text.splitlines()))


if __name__ == "__main__":
    unittest.main()
