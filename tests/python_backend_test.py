"""The Python package's build options, from pyproject.toml and the frontend's config settings to Meson's
command line, without building: python/backend/kiln_backend.py splits each `*-args` value into options
(Debian 12's pip passes only the last of repeated settings), and meson-python puts them after
pyproject.toml's defaults, so that they win. Where meson-python is importable, its own Project runs with
Meson's invocation recorded instead of run; the tracked files stay as they were.

    python_backend_test.py SOURCE_ROOT"""

import contextlib
import importlib
import os
import subprocess
import sys
import tomllib
import types
import unittest
from pathlib import Path

SOURCE = Path(sys.argv.pop(1)) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]
BACKEND = SOURCE / "python" / "backend"


@contextlib.contextmanager
def backend_over(mesonpy):
    """kiln_backend imported over the given mesonpy module."""
    saved = sys.modules.get("mesonpy")
    sys.modules["mesonpy"] = mesonpy
    sys.path.insert(0, str(BACKEND))
    try:
        sys.modules.pop("kiln_backend", None)
        yield importlib.import_module("kiln_backend")
    finally:
        sys.path.remove(str(BACKEND))
        sys.modules.pop("kiln_backend", None)
        if saved is None:
            sys.modules.pop("mesonpy", None)
        else:
            sys.modules["mesonpy"] = saved


def recording_mesonpy():
    """A mesonpy whose hooks record what they were given, with 0.12's signatures (no editable hooks)."""
    fake, calls = types.ModuleType("mesonpy"), []

    def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
        calls.append(("build_wheel", wheel_directory, config_settings, metadata_directory))
        return "kiln.whl"

    def get_requires_for_build_wheel(config_settings=None):
        calls.append(("get_requires_for_build_wheel", config_settings))
        return []

    fake.build_wheel, fake.get_requires_for_build_wheel = build_wheel, get_requires_for_build_wheel
    return fake, calls


class SplitArgs(unittest.TestCase):
    def test_one_value_holds_several_options(self):
        fake, calls = recording_mesonpy()
        with backend_over(fake) as backend:
            # as pip's in-process hook calls it: by position
            self.assertEqual(backend.build_wheel("out", {"setup-args": "-Darchs=sm_80,sm_90 -Dprimitives=true"}, None),
                             "kiln.whl")
        self.assertEqual(calls, [("build_wheel", "out", {"setup-args": ["-Darchs=sm_80,sm_90", "-Dprimitives=true"]}, None)])

    def test_a_list_of_values_is_split_item_by_item(self):
        fake, calls = recording_mesonpy()
        with backend_over(fake) as backend:
            backend.get_requires_for_build_wheel(config_settings={
                "setup-args": ["-Darchs=sm_90", "-Dprimitives=true '-Dcpp_args=-DA -DB'"],
                "compile-args": "-j2", "builddir": "some dir"})
        self.assertEqual(calls[0][1], {"setup-args": ["-Darchs=sm_90", "-Dprimitives=true", "-Dcpp_args=-DA -DB"],
                                       "compile-args": ["-j2"], "builddir": "some dir"})

    def test_no_settings_pass_through(self):
        fake, calls = recording_mesonpy()
        with backend_over(fake) as backend:
            backend.get_requires_for_build_wheel()
            backend.build_wheel("out")
        self.assertEqual([c[1 if c[0] == "get_requires_for_build_wheel" else 2] for c in calls], [None, None])

    def test_a_value_that_is_not_a_string_is_refused_by_name(self):
        fake, calls = recording_mesonpy()
        with backend_over(fake) as backend:
            with self.assertRaisesRegex(TypeError, "'setup-args': expected strings"):
                backend.build_wheel("out", {"setup-args": ["-Darchs=sm_90", 3]})
        self.assertEqual(calls, [])

    def test_only_the_hooks_mesonpy_has(self):
        fake, _ = recording_mesonpy()
        with backend_over(fake) as backend:
            self.assertFalse(hasattr(backend, "build_editable"))
            self.assertTrue(hasattr(backend, "get_requires_for_build_wheel"))


class PyprojectDefaults(unittest.TestCase):
    def test_the_backend_and_the_package_defaults(self):
        project = tomllib.loads((SOURCE / "pyproject.toml").read_text())
        self.assertEqual(project["build-system"]["build-backend"], "kiln_backend")
        self.assertTrue((SOURCE / project["build-system"]["backend-path"][0] / "kiln_backend.py").is_file())
        self.assertEqual(project["tool"]["meson-python"]["args"]["setup"], ["-Dpython=only", "-Darchs=local"])


try:
    import mesonpy
except ImportError:
    mesonpy = None


@unittest.skipIf(mesonpy is None, "meson-python is not importable by " + sys.executable)
class MesonCommandLine(unittest.TestCase):
    def setup_args(self, config_settings, executable, then=None):
        """meson setup's arguments for these settings, as meson-python gives them (Meson not run), with
        sys.executable as a venv's interpreter would be; then() runs before the source tree is restored."""
        recorded = []
        native = SOURCE / ".mesonpy-native-file.ini"
        kept = native.read_bytes() if native.exists() else None
        saved = mesonpy.Project._meson, sys.executable, os.getcwd()
        mesonpy.Project._meson = lambda self, *args: recorded.append(list(args))
        sys.executable = executable
        os.chdir(SOURCE)  # meson-python's source tree is the working directory, as pip runs it
        try:
            with backend_over(mesonpy) as backend:
                with mesonpy._project(backend.split_args(config_settings)):
                    pass
            if then is not None:
                then()
        finally:
            mesonpy.Project._meson, sys.executable, cwd = saved
            os.chdir(cwd)
            if kept is None:
                native.unlink(missing_ok=True)
            else:
                native.write_bytes(kept)
        setup = [args for args in recorded if args[0] == "setup"]
        self.assertEqual(len(setup), 1, recorded)
        return [a for a in setup[0] if a.startswith("-D")]

    def test_defaults_then_the_settings_options(self):
        options = self.setup_args({"setup-args": "-Darchs=sm_80,sm_90 -Dprimitives=true"}, sys.executable)
        self.assertEqual(options[-4:], ["-Dpython=only", "-Darchs=local", "-Darchs=sm_80,sm_90", "-Dprimitives=true"])

    def test_defaults_alone(self):
        self.assertEqual(self.setup_args({}, sys.executable)[-2:], ["-Dpython=only", "-Darchs=local"])

    def test_tracked_files_unchanged_by_a_venv_build(self):
        def status():
            run = subprocess.run(["git", "-C", str(SOURCE), "status", "--porcelain", "--untracked-files=no"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=60)
            return run.stdout if run.returncode == 0 else None
        before = status()
        if before is None:
            self.skipTest("not a git checkout")
        # meson-python writes its native file, naming the venv's interpreter, into the source tree
        self.setup_args({}, "/home/user/venv/bin/python3", then=lambda: self.assertEqual(status(), before))


if __name__ == "__main__":
    unittest.main()
