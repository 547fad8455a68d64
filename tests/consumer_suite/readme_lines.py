"""Suite consumer: README's "Use kiln in your project" lines are tests/consumer's own, character for
character, and docs/cmake.md's CMakeLists.txt is tests/installed's, so the lines a reader copies are the
lines the `consumer` and `installed` tests build."""

import sys
import unittest
from pathlib import Path

import readme

SOURCE = Path(sys.argv.pop(1) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2])
README = SOURCE / "README.md"
CONSUMER = SOURCE / "tests" / "consumer"


class ReadmeLines(unittest.TestCase):
    def test_meson_build(self):
        self.assertIn(readme.block(README, "consumer meson.build"), (CONSUMER / "meson.build").read_text())

    def test_meson_options(self):
        self.assertEqual(readme.block(README, "consumer meson_options.txt"), (CONSUMER / "meson_options.txt").read_text())

    def test_cmake_lists(self):
        self.assertEqual(readme.block(SOURCE / "docs" / "cmake.md", "cmake CMakeLists.txt"),
                         (SOURCE / "tests" / "installed" / "CMakeLists.txt").read_text())

    def test_installed_block_names_the_example_files(self):
        text = readme.block(README, "installed")
        for name in ("tiny.toml", "main.cpp", "kiln-gen build", "pkg-config --cflags --libs kiln"):
            self.assertIn(name, text)
        for f in ("tiny.toml", "main.cpp"):
            self.assertTrue((SOURCE / "tests" / "installed" / f).is_file(), f)


if __name__ == "__main__":
    unittest.main()
