"""A test case over one spec table written into a temporary project folder: load it, or expect the one
error naming the file (and whatever else a test asks for)."""

import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "codegen"))
import spec  # noqa: E402


class TableCase(unittest.TestCase):
    ARCHS = (80,)
    EMBED_PTX = False

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name) / "project"
        self.root.mkdir()

    def tearDown(self):
        self.dir.cleanup()

    def load(self, text: str):
        path = self.root / "table.toml"
        path.write_text(textwrap.dedent(text))
        return spec.load(path, self.ARCHS, embed_ptx=self.EMBED_PTX)

    def refused(self, text: str, *fragments: str) -> str:
        with self.assertRaises(spec.SpecError) as ctx:
            self.load(text)
        message = str(ctx.exception)
        for f in ("table.toml", *fragments):
            self.assertIn(f, message)
        return message
