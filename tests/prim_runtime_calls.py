"""libkiln_prim calls no function of the CUDA runtime it links statically (primitives/src/driver_calls.cuh
says why): its objects reference only nvcc's registration and launch stubs (__cuda*) and the runtime's two
error-text lookups, which start nothing. Needs no GPU. Argument: the library's object directory."""

import pathlib
import re
import subprocess
import sys

ALLOWED = {"cudaGetErrorName", "cudaGetErrorString"}
objects = sorted(pathlib.Path(sys.argv[1]).glob("*.o"))
if not objects:
    print(f"FAIL: no objects in {sys.argv[1]}")
    sys.exit(1)
failed = False
for obj in objects:
    undefined = subprocess.run(["nm", "--undefined-only", "--format=posix", str(obj)], check=True,
                               stdout=subprocess.PIPE, text=True).stdout
    names = {line.split()[0] for line in undefined.splitlines() if line.strip()}
    calls = sorted(n for n in names if re.fullmatch(r"cuda[A-Z]\w*", n) and n not in ALLOWED)
    print(f"{obj.name}: {', '.join(calls) if calls else 'no CUDA runtime call'}")
    if calls:
        print(f"FAIL: {obj.name} calls the CUDA runtime ({', '.join(calls)}); send it to the driver "
              "(primitives/src/driver_calls.cuh)")
        failed = True
sys.exit(1 if failed else 0)
