"""Renders the corpus's CuPy units: runs CuPy operations over a range of dtypes and records every source
CuPy hands NVRTC, exactly as CuPy renders it (source, options, name expressions), one JSON object per line.

Run where CuPy and a GPU are (the sources are CuPy's own: nothing here writes CUDA code):

    python3 render_cupy.py OUT.jsonl [elementwise|reduction|special|ndimage|signal|random|all]

CuPy is made to compile every unit (an empty CUPY_CACHE_DIR, its in-memory cache off) and NVRTC's
arguments are taken where CuPy calls NVRTC (cupy.cuda.compiler's _compile_using_nvrtc_no_warning, which
its cache calls, and compile_using_nvrtc), each written out as it is compiled.
CuPy's include directory in the options is written as {CUPY_INCLUDE}, the CUDA toolkit's as
{CUDA_INCLUDE}, the architecture option left out (kiln and each compiler add their own)."""

import inspect
import json
import os
import sys
import tempfile
import traceback

os.environ["CUPY_CACHE_DIR"] = tempfile.mkdtemp(prefix="corpus-cupy-")
os.environ["CUPY_CACHE_IN_MEMORY"] = "0"

import cupy  # noqa: E402
import numpy  # noqa: E402
from cupy.cuda import compiler  # noqa: E402

_OUT = None  # the output file, written as units are compiled
_cupy_include = os.path.join(os.path.dirname(cupy.__file__), "_core", "include")
_category = "?"
_operation = "?"


def _recorder(original):
    signature = inspect.signature(original)

    def record(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        options = []
        for o in a.get("options") or ():
            if o.startswith(("-arch", "--gpu-architecture")):
                continue
            o = o.replace(_cupy_include, "{CUPY_INCLUDE}")
            for cuda in ("/usr/local/cuda/include", os.environ.get("CUDA_PATH", "/usr/local/cuda") + "/include"):
                o = o.replace(cuda, "{CUDA_INCLUDE}")
            options.append(o)
        _OUT.write(json.dumps({"category": _category, "operation": _operation, "source": a["source"],
                               "options": options, "name_expressions": list(a.get("name_expressions") or []),
                               "jitify": bool(a.get("jitify") or False)}) + "\n")
        _OUT.flush()
        return original(*args, **kwargs)

    return record


compiler._compile_using_nvrtc_no_warning = _recorder(compiler._compile_using_nvrtc_no_warning)
compiler.compile_using_nvrtc = _recorder(compiler.compile_using_nvrtc)

DTYPES = ["bool", "int8", "int32", "int64", "uint16", "float16", "float32", "float64", "complex64", "complex128"]


def attempt(category, operation, fn):
    global _category, _operation
    _category, _operation = category, operation
    try:
        fn()
        cupy.cuda.Device().synchronize()
    except Exception:  # an op that does not take this dtype: CuPy refuses before compiling
        pass


def elementwise():
    ufuncs = sorted(n for n in dir(cupy) if isinstance(getattr(cupy, n), cupy.ufunc))
    for name in ufuncs:
        f = getattr(cupy, name)
        for dt in DTYPES:
            args = [cupy.ones(64, dtype=dt) for _ in range(f.nin)]
            attempt("elementwise", f"{name}[{dt}]", lambda: f(*args))


def reduction():
    ops = ["sum", "prod", "max", "min", "argmax", "argmin", "mean", "var", "std", "all", "any", "nansum",
           "count_nonzero", "cumsum", "ptp", "nanmax"]
    for name in ops:
        f = getattr(cupy, name)
        for dt in DTYPES:
            x = cupy.ones((8, 16), dtype=dt)
            attempt("reduction", f"{name}[{dt}]", lambda: f(x))
            attempt("reduction", f"{name}[{dt},axis=1]", lambda: f(x, axis=1))


def special():
    import cupyx.scipy.special as sp
    names = sorted(n for n in dir(sp) if not n.startswith("_") and isinstance(getattr(sp, n), cupy.ufunc))
    for name in names:
        f = getattr(sp, name)
        for dt in ["float32", "float64", "complex128"]:
            args = [cupy.full(64, 0.5, dtype=dt) for _ in range(f.nin)]
            attempt("special", f"{name}[{dt}]", lambda: f(*args))


def ndimage():
    import cupyx.scipy.ndimage as nd
    for dt in ["uint8", "int32", "float32", "float64"]:
        x = cupy.ones((32, 32), dtype=dt)
        w = cupy.ones((3, 3), dtype=dt)
        for name, call in [
            ("convolve", lambda: nd.convolve(x, w)), ("correlate", lambda: nd.correlate(x, w)),
            ("gaussian_filter", lambda: nd.gaussian_filter(x, 1.5)), ("uniform_filter", lambda: nd.uniform_filter(x, 3)),
            ("median_filter", lambda: nd.median_filter(x, 3)), ("maximum_filter", lambda: nd.maximum_filter(x, 3)),
            ("minimum_filter", lambda: nd.minimum_filter(x, 5)), ("sobel", lambda: nd.sobel(x)),
            ("laplace", lambda: nd.laplace(x)), ("prewitt", lambda: nd.prewitt(x)),
            ("zoom", lambda: nd.zoom(x, 1.5, order=1)), ("zoom3", lambda: nd.zoom(x, 1.5, order=3)),
            ("rotate", lambda: nd.rotate(x, 30, order=1)), ("shift", lambda: nd.shift(x, 0.5, order=1)),
            ("affine", lambda: nd.affine_transform(x, cupy.eye(2), order=1)),
            ("map_coordinates", lambda: nd.map_coordinates(x, cupy.ones((2, 8)), order=1)),
            ("spline_filter", lambda: nd.spline_filter(x, order=3)), ("label", lambda: nd.label(x > 0)),
            ("binary_erosion", lambda: nd.binary_erosion(x > 0)), ("grey_dilation", lambda: nd.grey_dilation(x, size=3)),
            ("distance_transform_edt", lambda: nd.distance_transform_edt(x > 0)),
            ("rank_filter", lambda: nd.rank_filter(x, 2, size=3)), ("generic_laplace", lambda: nd.gaussian_laplace(x, 1.0)),
        ]:
            attempt("ndimage", f"{name}[{dt}]", call)


def signal():
    import cupyx.scipy.signal as sg
    for dt in ["float32", "float64", "complex64"]:
        x = cupy.ones(256, dtype=dt)
        h = cupy.ones(8, dtype=dt)
        for name, call in [
            ("upfirdn", lambda: sg.upfirdn(h, x, 2, 3)), ("lfilter", lambda: sg.lfilter(h, cupy.ones(2, dtype=dt), x)),
            ("convolve", lambda: sg.convolve(x, h)), ("fftconvolve", lambda: sg.fftconvolve(x, h)),
            ("medfilt", lambda: sg.medfilt(x.real, 3)), ("resample_poly", lambda: sg.resample_poly(x, 3, 2)),
            ("sosfilt", lambda: sg.sosfilt(cupy.ones((2, 6), dtype=dt), x)), ("hilbert", lambda: sg.hilbert(x.real)),
            ("savgol", lambda: sg.savgol_filter(x.real, 5, 2)), ("wiener", lambda: sg.wiener(x.real)),
            ("find_peaks", lambda: sg.find_peaks(x.real)), ("correlate2d", lambda: sg.correlate2d(cupy.ones((8, 8), dtype=dt), cupy.ones((3, 3), dtype=dt))),
            ("lombscargle", lambda: sg.lombscargle(x.real, x.real, cupy.ones(4, dtype=x.real.dtype))),
        ]:
            attempt("signal", f"{name}[{dt}]", call)


def random():
    for dt in ["float32", "float64"]:
        g = cupy.random.default_rng(1)
        for name, call in [
            ("normal", lambda: g.normal(size=64, dtype=dt) if dt else None), ("standard_gamma", lambda: g.standard_gamma(2.0, size=64)),
            ("beta", lambda: g.beta(2.0, 3.0, size=64)), ("poisson", lambda: g.poisson(3.0, size=64)),
            ("binomial", lambda: cupy.random.binomial(10, 0.5, size=64)), ("dirichlet", lambda: g.dirichlet(cupy.ones(3), size=4)),
            ("exponential", lambda: g.exponential(size=64)), ("chisquare", lambda: g.chisquare(3, size=64)),
            ("legacy_normal", lambda: cupy.random.normal(size=64, dtype=dt)), ("gumbel", lambda: cupy.random.gumbel(size=64)),
        ]:
            attempt("random", f"{name}[{dt}]", call)


PARTS = {"elementwise": elementwise, "reduction": reduction, "special": special, "ndimage": ndimage,
         "signal": signal, "random": random}


def main() -> int:
    global _OUT
    parts = sys.argv[2:] or ["all"]
    if parts == ["all"]:
        parts = list(PARTS)
    with open(sys.argv[1], "w") as _OUT:
        for p in parts:
            try:
                PARTS[p]()
            except Exception:
                traceback.print_exc()
    print(f"{', '.join(parts)} rendered; cupy {cupy.__version__}, include {_cupy_include}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
