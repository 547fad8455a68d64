"""test_cpu's cases all run: each in exactly one of the cpu suite's tests over test_cpu (tests/meson.build,
cpu_groups, each a set of doctest filters), and every case of the suite "concurrency" in
test_cpu_concurrency too, the executable scripts/sanitize.sh runs under ThreadSanitizer. Needs no GPU.

usage: cpu_groups.py TEST_CPU TEST_CPU_CONCURRENCY FILTERS... (one argument per group, its filters
separated by spaces)"""

import collections
import subprocess
import sys


def cases(binary: str, filters: list[str]) -> collections.Counter:
    """The names of the cases `binary` runs with `filters`, counted (a name may be given twice)."""
    listing = subprocess.run([binary, "--list-test-cases", *filters], check=True, stdout=subprocess.PIPE,
                             text=True).stdout
    return collections.Counter(l for l in listing.splitlines() if l.strip() and not l.startswith(("[doctest]", "==")))


def main() -> int:
    test_cpu, concurrency_binary, groups = sys.argv[1], sys.argv[2], sys.argv[3:]
    every = cases(test_cpu, [])
    grouped = collections.Counter()
    for group in groups:
        grouped.update(cases(test_cpu, group.split()))
    failures = [f"no group runs '{c}'" for c in every if grouped[c] < every[c]]
    failures += [f"more than one group runs '{c}'" for c in every if grouped[c] > every[c]]
    wanted = cases(test_cpu, ["-ts=concurrency"])
    held = cases(concurrency_binary, ["-ts=concurrency"])
    failures += [f"test_cpu_concurrency lacks the concurrency case '{c}': add its file there (tests/meson.build)"
                 for c in wanted if held[c] < wanted[c]]
    print(f"{sum(every.values())} cases in {len(groups)} groups; {sum(wanted.values())} in the suite concurrency")
    for f in failures:
        print(f"FAIL: {f}")
    return 1 if failures or not wanted else 0


if __name__ == "__main__":
    sys.exit(main())
