"""libkiln (and libkiln_prim, and the Python module, which links libkiln in) must start where NVRTC, nvJitLink and the CUDA driver are not installed: they
load them with dlopen on first need, so none of them may appear among their DT_NEEDED libraries.
libkiln_prim carries the CUDA runtime statically."""

import subprocess
import sys

failed = False
for library in sys.argv[1:]:
    dynamic = subprocess.run(["readelf", "-d", library], check=True, stdout=subprocess.PIPE, text=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    banned = [n for n in needed if n.startswith(("libnvrtc", "libnvJitLink", "libcuda.", "libcudart"))]
    print(f"{library} needs: {', '.join(needed)}")
    if banned:
        print(f"FAIL: linked against {', '.join(banned)}; these must be dlopen'ed on demand")
        failed = True
sys.exit(1 if failed else 0)
