"""The `--json` output of the kiln command (list, info, status, cache stats) is JSON that scripts can read:
it parses, and holds what the text output says (registries, units, kernels, binaries; the device or why
there is none; the caches). Runs the real command; no GPU needed (info and status then say so)."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

KILN = sys.argv.pop(1)


def kiln_json(*args, cache: str, exits=(0,)) -> dict:
    env = dict(os.environ, KILN_CACHE_DIR=cache)
    env.pop("KILN_REMOTE_CACHE", None)
    out = subprocess.run([KILN, *args, "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=600)
    if out.returncode not in exits:
        raise AssertionError(f"{args} exited {out.returncode}: {out.stderr}")
    doc = json.loads(out.stdout)
    doc["_exit"] = out.returncode
    return doc


class Json(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.cache = os.path.join(self.tmp.name, "cache")

    def tearDown(self):
        self.tmp.cleanup()

    def test_list(self):
        doc = kiln_json("list", cache=self.cache)
        examples = next(r for r in doc["registries"] if r["name"] == "examples")
        units = {u["name"]: u for u in examples["units"]}
        self.assertIn("scale", units)
        kernels = {k["name"]: k for k in units["scale"]["kernels"]}
        self.assertEqual(kernels["scale_f32"]["expression"], "kiln_examples::scale<float>")
        self.assertTrue(kernels["scale_f32"]["lowered"].startswith("_Z"))
        for b in units["scale"]["binaries"]:
            self.assertIn(b["kind"], ("cubin", "ptx"))
            self.assertGreater(b["bytes"], 0)
            self.assertEqual(b["target"], ("compute_" if b["kind"] == "ptx" else "sm_") + str(b["arch"]))
            # As embedded in the unit's fatbins: zstd-compressed, so fewer bytes than unpacked.
            self.assertEqual(b["compression"], "zstd")
            self.assertGreater(b["embedded_bytes"], 0)
            self.assertLess(b["embedded_bytes"], b["bytes"])
        # A linked unit's kernels, where the primitives embed them: LTO-IR in fatbinary's own encoding.
        primitives = next((r for r in doc["registries"] if r["name"] == "primitives"), {"units": []})
        for unit in (u for u in primitives["units"] if u["linked"]):
            for b in unit["binaries"]:
                self.assertEqual((b["kind"], b["compression"], b["target"]), ("ltoir", "lto", f"lto_{b['arch']}"))
        scale = units["scale"]
        self.assertEqual(scale["bytes"], sum(b["bytes"] for b in scale["binaries"]))
        # The fatbins hold the images and their headers.
        self.assertGreaterEqual(scale["fatbin_bytes"], sum(b["embedded_bytes"] for b in scale["binaries"]))

    def test_info(self):
        doc = kiln_json("info", cache=self.cache)
        self.assertIn("device", doc)
        if doc["device"] is None:
            self.assertIn("no_device", doc)
            self.assertEqual(doc["devices"], [])
        else:
            # Every visible device, device 0 first; each kernel says what each device would load.
            self.assertEqual(doc["devices"][0], doc["device"])
            self.assertEqual([d["ordinal"] for d in doc["devices"]], list(range(len(doc["devices"]))))
            for kernel in (k for r in doc["registries"] for k in r["kernels"]):
                self.assertEqual(len(kernel["devices"]), len(doc["devices"]))
        self.assertTrue(doc["disk_cache"]["usable"])
        self.assertEqual(doc["disk_cache"]["dir"], self.cache)
        self.assertFalse(doc["remote_cache"]["usable"])
        kernels = {k["name"]: k for r in doc["registries"] for k in r["kernels"]}
        self.assertIn("block_sum_f32", kernels)
        # Lists are JSON arrays, one binary's label each, not a space-separated string.
        for k in kernels.values():
            self.assertIsInstance(k["embedded"], list)
            for label in k["embedded"]:
                self.assertRegex(label, r"^(sm|compute|lto)_\d+$")
        self.assertTrue(kernels["block_sum_f32"]["embedded"])

    def test_status(self):
        # Without a GPU nothing is warmed: the JSON says why, and the exit status is 1.
        doc = kiln_json("status", cache=self.cache, exits=(0, 1))
        self.assertIn("device", doc)
        self.assertIsInstance(doc["devices"], list)
        self.assertIsInstance(doc["registries"], list)
        self.assertEqual(doc["_exit"], 1 if doc["device"] is None else 0)

    def test_device_arch_override(self):
        env_before = os.environ.get("KILN_DEVICE_ARCH")
        os.environ["KILN_DEVICE_ARCH"] = "1:80"
        try:
            doc = kiln_json("info", cache=self.cache)
        finally:
            if env_before is None:
                del os.environ["KILN_DEVICE_ARCH"]
            else:
                os.environ["KILN_DEVICE_ARCH"] = env_before
        self.assertEqual(doc["device_arch_override"], "KILN_DEVICE_ARCH=1:80: device 1 takes sm_80's binaries")

    def test_cache_stats(self):
        doc = kiln_json("cache", "stats", cache=self.cache)
        self.assertEqual(doc["disk_cache"]["entries"], 0)
        self.assertEqual(doc["disk_cache"]["dir"], self.cache)
        self.assertFalse(doc["remote_cache"]["usable"])
        self.assertIn("KILN_REMOTE_CACHE", doc["remote_cache"]["reason"])

    def test_cache_breakdown(self):
        # One unit compiled for sm_86 (real NVRTC, no GPU needed): stats and info break it down by registry
        # and architecture, info says which architecture each kernel's unit is on disk for, cache list names it.
        env = dict(os.environ, KILN_CACHE_DIR=self.cache)
        env.pop("KILN_REMOTE_CACHE", None)
        subprocess.run([KILN, "precompile", "--arch", "sm_86", "vector_add"], env=env, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        stats = kiln_json("cache", "stats", cache=self.cache)["disk_cache"]
        self.assertEqual(stats["by_registry_arch"], [{"registry": "examples", "arch": 86, "entries": 1,
                                                      "bytes": stats["bytes"] - stats["pch"]["bytes"]}])
        self.assertIsInstance(stats["unreadable"], list)
        info = kiln_json("info", cache=self.cache)
        self.assertEqual(info["disk_cache"]["by_registry_arch"], stats["by_registry_arch"])
        kernels = {k["name"]: k for r in info["registries"] for k in r["kernels"]}
        self.assertEqual(kernels["vector_add"]["on_disk"], ["sm_86"])
        self.assertEqual(kernels["scale_f32"]["on_disk"], [])
        listed = kiln_json("cache", "list", cache=self.cache)
        self.assertEqual([(e["registry"], e["unit"], e["arch"], e["made_by"]) for e in listed["entries"]],
                         [("examples", "vector_add", 86, "jit")])
        entry = listed["entries"][0]
        self.assertEqual(len(entry["key"]), 64)
        self.assertGreater(entry["bytes"], 0)
        self.assertFalse(entry["linked"])
        self.assertIn("nvrtc", entry["compiler"])
        # How long its compile took, as the entry records it; the text list has it in its "compile" column.
        self.assertGreater(entry["compile_ms"], 0)
        text = subprocess.run([KILN, "cache", "list"], env=env, check=True, stdout=subprocess.PIPE, text=True,
                              timeout=60).stdout
        self.assertIn("compile", text)
        self.assertRegex(text, r"vector_add .* %d ms " % entry["compile_ms"])
        # A pack of it, shown: the same entry.
        pack = os.path.join(self.tmp.name, "x.kpack")
        subprocess.run([KILN, "cache", "export", pack], env=env, check=True, stdout=subprocess.PIPE, timeout=60)
        shown = kiln_json("cache", "show", pack, cache=self.cache)
        self.assertEqual([(e["registry"], e["unit"], e["arch"], e["key"]) for e in shown["entries"]],
                         [("examples", "vector_add", 86, entry["key"])])
        self.assertEqual(shown["bytes"], os.path.getsize(pack))
        # kiln why for sm_110, which no binary of the examples serves: the compile the JIT pool expects, timed by
        # the sm_86 compile (the history leaves the architecture out); a unit never compiled, a guess.
        def why(*names):
            return subprocess.run([KILN, "why", *names, "--arch", "sm_110"], env=env, check=True, stdout=subprocess.PIPE,
                                  text=True, timeout=60).stdout
        expected = re.search(r"expected to take (\d+) ms on one thread, as its last compile took", why("vector_add"))
        self.assertIsNotNone(expected)
        self.assertLessEqual(abs(int(expected.group(1)) - entry["compile_ms"]), 1)
        self.assertIn("a guess from its size", why("scale_f32"))
        # Compiled for sm_110: on disk, with the time its compile took.
        subprocess.run([KILN, "precompile", "--arch", "sm_110", "vector_add"], env=env, check=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        self.assertRegex(why("vector_add"), r"the disk cache serves it \(entry [0-9a-f]+, its compile took \d+ ms\)")

    def test_cache_show_of_a_bad_pack(self):
        # Still JSON: what was refused and why, with a non-zero exit.
        for name, content in (("bad.kpack", b"not a pack"), ("missing.kpack", None)):
            pack = os.path.join(self.tmp.name, name)
            if content is not None:
                with open(pack, "wb") as f:
                    f.write(content)
            doc = kiln_json("cache", "show", pack, cache=self.cache, exits=(1,))
            self.assertEqual(doc["pack"], pack)
            self.assertEqual(doc["code"], "cache")
            self.assertIn(pack, doc["error"])


if __name__ == "__main__":
    unittest.main()
