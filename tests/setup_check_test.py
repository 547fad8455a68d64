"""scripts/setup.sh asks for Jinja2 of each interpreter Meson may run kiln's generator with: Debian's python3
(what runs pip in docs/python.md's install; its modules are Debian's packages) and the python3 on PATH.
Run as `setup.sh --check` (installs nothing) with a stub python3 and a stub dpkg in front of PATH.

    setup_check_test.py SOURCE_ROOT"""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SOURCE = Path(sys.argv.pop(1)) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]

# python3: every import succeeds but Jinja2's when STUB_NO_JINJA2 is set. dpkg -s: every package is
# installed but those named in STUB_NOT_INSTALLED.
PYTHON3 = """#!/bin/sh
case "$*" in *jinja2*) [ -n "$STUB_NO_JINJA2" ] && exit 1 ;; esac
exit 0
"""
DPKG = """#!/bin/sh
for p in $STUB_NOT_INSTALLED; do [ "$2" = "$p" ] && exit 1; done
exit 0
"""


class SetupCheck(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.bin = Path(self.dir.name)
        for name, text in (("python3", PYTHON3), ("dpkg", DPKG)):
            (self.bin / name).write_text(text)
            (self.bin / name).chmod(0o755)

    def tearDown(self):
        self.dir.cleanup()

    def check(self, not_installed="", no_jinja2=False):
        env = dict(os.environ, PATH=f"{self.bin}:{os.environ['PATH']}", STUB_NOT_INSTALLED=not_installed,
                   STUB_NO_JINJA2="1" if no_jinja2 else "")
        run = subprocess.run([str(SOURCE / "scripts" / "setup.sh"), "--check"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=60)
        return run.returncode, run.stdout

    def missing(self, output):
        lines = [line for line in output.splitlines() if line.startswith("kiln setup: missing ")]
        return lines[0].removeprefix("kiln setup: missing ").split() if lines else []

    def test_debian_python_without_jinja2_is_missing_it_whatever_path_python_has(self):
        rc, out = self.check(not_installed="python3-jinja2")
        self.assertEqual(rc, 1, out)
        self.assertIn("python3-jinja2", self.missing(out), out)

    def test_debian_python_with_jinja2_needs_nothing_more(self):
        rc, out = self.check()
        self.assertNotIn("python3-jinja2", self.missing(out), out)
        self.assertNotIn("has no Jinja2", out)

    def test_pip_route_packages_are_asked_of_dpkg(self):
        rc, out = self.check(not_installed="python3-mesonpy python3-venv")
        self.assertEqual(rc, 1, out)
        self.assertIn("python3-mesonpy", self.missing(out), out)
        self.assertIn("python3-venv", self.missing(out), out)

    def test_path_python_without_jinja2_is_named(self):
        rc, out = self.check(no_jinja2=True)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"{self.bin / 'python3'}, the python3 on PATH, has no Jinja2", out)


if __name__ == "__main__":
    unittest.main()
