#!/usr/bin/env python3
"""scripts/doc_citations.py: passes on the tree, and fails, naming file, line and title, on a citation of a
heading a page of docs/ (docs/DESIGN.md, docs/facts.md, a guide page) does not have.

Each planted case is a small tree of its own: three pages and one file citing them.

    doc_citations_test.py SOURCE_ROOT
"""

import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(sys.argv.pop(1)) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
SCRIPT = SOURCE / "scripts" / "doc_citations.py"

DESIGN = """# Design

## Contracts

### Tiers
text

#### A unit that includes nothing
text

```sh
# Not a heading
```
"""
# The pages' names, spelt apart so that this file cites nothing itself.
DESIGN_MD = "DESIGN" ".md"
FACTS_MD = "facts" ".md"
FACTS = """# Facts

## Precompiled headers
"""
GUIDE_MD = "python" ".md"
GUIDE = """# kiln from Python

## Install
"""


def run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, timeout=120)


class DocCitations(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        (self.root / "docs").mkdir()
        (self.root / "docs" / "DESIGN.md").write_text(DESIGN, encoding="utf-8")
        (self.root / "docs" / "facts.md").write_text(FACTS, encoding="utf-8")
        (self.root / "docs" / "python.md").write_text(GUIDE, encoding="utf-8")

    def tearDown(self):
        self.dir.cleanup()

    def plant(self, name: str, text: str) -> subprocess.CompletedProcess:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return run(self.root)

    def test_the_tree_passes(self):
        r = run(SOURCE)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_headings_of_any_level_pass(self):
        r = self.plant("src/a.cpp", f'// (docs/{DESIGN_MD}, "Tiers"; docs/{FACTS_MD}, "Precompiled headers")\n'
                                    f'// docs/{DESIGN_MD}, "A unit that includes nothing".\n')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_guide_page_heading_passes(self):
        r = self.plant("a.sh", f'# docs/{GUIDE_MD}, "Install"; [{GUIDE_MD}](docs/{GUIDE_MD}), "Install"\n')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_a_title_over_two_comment_lines(self):
        r = self.plant("a.hpp", f'// see docs/{DESIGN_MD}, "A unit that includes\n//   nothing"\n')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_each_title_a_page_lacks_fails(self):
        # (what is planted, the file, its text, the file:line named, the page, the title named)
        cases = [
            ("a title", "src/a.cpp", f'int x;\n// Bounded (docs/{DESIGN_MD}, "Memory and disk").\n', "src/a.cpp:2",
             "docs/DESIGN.md", "Memory and disk"),
            ("one title of a list", "a.py",
             f'# docs/{DESIGN_MD}, "Tiers", "Lean cubins" and "A unit that includes nothing"\n', "a.py:1",
             "docs/DESIGN.md", "Lean cubins"),
            ("a title over two comment lines", "a.hpp",
             f'// see docs/{DESIGN_MD}, "A unit that includes\n//   everything"\n', "a.hpp:1", "docs/DESIGN.md",
             "A unit that includes everything"),
            ("a page's Markdown link", "docs/guide.md", f'As [{DESIGN_MD}]({DESIGN_MD}), "Scheduling a table".\n',
             "docs/guide.md:1", "docs/DESIGN.md", "Scheduling a table"),
            ("an escaped string literal", "a.cpp", f'warn("(docs/{DESIGN_MD}, \\"PCH across processes\\")");\n',
             "a.cpp:1", "docs/DESIGN.md", "PCH across processes"),
            ("no comma", "a.py", f'"""The layout (docs/{DESIGN_MD} "Embedded fatbins")."""\n', "a.py:1",
             "docs/DESIGN.md", "Embedded fatbins"),
            ("a title of the other page", "a.sh", f'# 1.12-2.18x (docs/{FACTS_MD}, "Tiers")\n', "a.sh:1",
             "docs/facts.md", "Tiers"),
            ("a title of a guide page", "a.toml", f'# As docs/{GUIDE_MD}, "Operators from Python" says\n',
             "a.toml:1", "docs/python.md", "Operators from Python"),
            ("a guide page's Markdown link", "README.md", f'See [{GUIDE_MD}](docs/{GUIDE_MD}), "Tiers".\n',
             "README.md:1", "docs/python.md", "Tiers"),
            ("a line of a fenced block", "a.cpp", f'// docs/{DESIGN_MD}, "Not a heading"\n', "a.cpp:1",
             "docs/DESIGN.md", "Not a heading"),
        ]
        for what, name, text, where, page, title in cases:
            with self.subTest(what):
                r = self.plant(name, text)
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertEqual(r.stdout.count("has no heading"), 1, r.stdout)
                self.assertIn(f'{where}: {page} has no heading "{title}"', r.stdout)
                (self.root / name).unlink()

    def test_a_build_directory_is_left_out(self):
        (self.root / "build" / "meson-info").mkdir(parents=True)
        r = self.plant("build/gen.cpp", f'// docs/{DESIGN_MD}, "Gone"\n')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)


    def test_in_a_checkout_what_git_ignores_is_left_out(self):
        # A scratch copy of an older tree, ignored, cites what the pages no longer have; a file that is
        # untracked but not ignored is read.
        git = ["git", "-C", str(self.root), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run([*git, "init", "-q"], check=True, timeout=60)
        (self.root / ".gitignore").write_text("/scratch/\n", encoding="utf-8")
        r = self.plant("scratch/old.cpp", f'// docs/{DESIGN_MD}, "Gone"\n')
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        r = self.plant("new.cpp", f'// docs/{DESIGN_MD}, "Gone"\n')
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("new.cpp", r.stdout)
        self.assertNotIn("old.cpp", r.stdout)


if __name__ == "__main__":
    unittest.main()
