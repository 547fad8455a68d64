"""Every primitives test case belongs to one of the groups the gpu suite runs (tests/meson.build,
prim_groups), so splitting test_prim into parallel tests skips nothing. Needs no GPU."""

import fnmatch
import subprocess
import sys

binary, groups = sys.argv[1], sys.argv[2:]
listing = subprocess.run([binary, "--list-test-cases"], check=True, stdout=subprocess.PIPE, text=True).stdout
cases = [l for l in listing.splitlines() if l.strip() and not l.startswith(("[doctest]", "=="))]
patterns = [p for g in groups for p in g.split(",")]
missing = [c for c in cases if not any(fnmatch.fnmatchcase(c, p) for p in patterns)]
twice = [c for c in cases if sum(any(fnmatch.fnmatchcase(c, p) for p in g.split(",")) for g in groups) > 1]
print(f"{len(cases)} cases in {len(groups)} groups")
for c in missing:
    print(f"FAIL: no group runs '{c}'")
for c in twice:
    print(f"FAIL: more than one group runs '{c}'")
sys.exit(1 if missing or twice else 0)
