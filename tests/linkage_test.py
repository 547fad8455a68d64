"""libkiln must start where NVRTC, nvJitLink and the CUDA driver are not installed: it loads them with
dlopen on first need, so none of them may appear among its DT_NEEDED libraries."""

import subprocess
import sys

library = sys.argv[1]
dynamic = subprocess.run(["readelf", "-d", library], check=True, stdout=subprocess.PIPE, text=True).stdout
needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
banned = [n for n in needed if n.startswith(("libnvrtc", "libnvJitLink", "libcuda.", "libcudart"))]
print(f"{library} needs: {', '.join(needed)}")
if banned:
    print(f"FAIL: linked against {', '.join(banned)}; these must be dlopen'ed on demand")
    sys.exit(1)
