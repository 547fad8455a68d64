"""Recorded demand from Python: read a record, compile it for another architecture, record a run."""

import os
import stat
import subprocess
import sys

import numpy as np
import pytest

import kiln


def value(kind, text):
    data = text.encode()
    return f"{kind} {len(data)}\n".encode() + data + b"\n"


def write_record(path):
    program = (b"program\n" + value("label", "tests/recorded") +
               value("source", '#include "k.cuh"\nextern "C" __global__ void recorded(float* x) { x[0] = K; }\n') +
               value("header", "k.cuh") + value("bytes", "#define K 2.0f\n") + value("option", "-DUNUSED=1") +
               value("kernel", "recorded") + b"end\n")
    table = b"table\n" + value("registry", "examples") + value("kernel", "vector_add") + b"arch 80\nend\n"
    path.write_bytes(b"kiln record 1\n" + program + table)


def test_read_record(tmp_path):
    path = tmp_path / "demand.record"
    write_record(path)
    record = kiln.read_record(str(path))
    assert len(record.programs) == 1 and len(record.kernels) == 1
    program = record.programs[0]
    assert program.label == "tests/recorded" and program.headers == {"k.cuh": "#define K 2.0f\n"}
    assert program.options == ["-DUNUSED=1"] and program.name_expressions == ["recorded"]
    kernel = record.kernels[0]
    assert (kernel.registry, kernel.kernel, kernel.arch) == ("examples", "vector_add", 80)


def test_precompile_record_for_an_arch_without_a_gpu(tmp_path):
    path = tmp_path / "demand.record"
    write_record(path)
    by_path = kiln.precompile_record(path, 80)  # a path (str or os.PathLike) or a DemandRecord
    assert len(by_path) == 2 and all(r.ok for r in by_path), [r.error for r in by_path]
    by_record = kiln.precompile_record(kiln.read_record(str(path)), 80)
    assert all(r.ok and r.cached for r in by_record)


def test_a_damaged_record_names_its_line(tmp_path):
    path = tmp_path / "bad.record"
    path.write_bytes(b"kiln record 1\nprogram\nlabel 99\nshort\n")
    with pytest.raises(kiln.Error) as caught:
        kiln.read_record(str(path))
    assert caught.value.code == "invalid_argument" and f"{path}:3" in str(caught.value)
    with pytest.raises(TypeError):
        kiln.precompile_record(80, 80)


def test_a_record_that_is_no_regular_file_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.record"
    os.mkfifo(fifo)
    # In a process of its own, bounded: an open that blocks on the FIFO fails the test instead of hanging it.
    script = ("import sys, kiln\n"
              "try:\n"
              "    kiln.read_record(sys.argv[1])\n"
              "except kiln.Error as e:\n"
              "    print(e.code, str(e))\n")
    for path, kind in ((str(fifo), "a FIFO"), ("/dev/zero", "a device"), (str(tmp_path), "a directory")):
        try:
            done = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"kiln.read_record({path!r}) did not return in 60 s")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("invalid_argument ") and f"{path} is {kind}, not a regular file" in done.stdout


# --- GPU


def test_record_a_run(cupy, tmp_path):
    path = tmp_path / "run.record"
    kiln.record_demand(str(path))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    source = 'extern "C" __global__ void recorded_run(float* x) { x[threadIdx.x] += 1; }'
    x = cupy.zeros(32, dtype=cupy.float32)
    kiln.Program(source, name_expressions=["recorded_run"], label="tests/recorded_run").get("recorded_run")(1, 32, [x])
    cupy.cuda.Device().synchronize()
    assert (cupy.asnumpy(x) == 1).all()
    record = kiln.read_record(str(path))
    assert [p.label for p in record.programs] == ["tests/recorded_run"]
