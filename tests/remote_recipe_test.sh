#!/usr/bin/env bash
# The CI recipe of docs/tiers.md through the kiln command, against a real redis-server on a free 127.0.0.1 port
# (skipped with 77 when redis-server is not installed; scripts/setup.sh installs it):
#  1. CI, no GPU: precompile a kernel for sm_90 into a fresh cache, export a pack, push to the remote;
#  2. machine A: import the pack; its precompile then finds the kernel cached, and compiles nothing;
#  3. machine B: an empty cache and the remote: its precompile fetches the kernel, compiles nothing;
#  4. a truncated pack and an altered one are refused whole, with the reason, and import nothing;
#  5. cache stats shows the remote; a machine with a wrong fleet key compiles for itself, quietly, and
#     leaves the fleet's entry in place (a new machine of the fleet still fetches it).
set -u
kiln="$1"
server=${KILN_TEST_REDIS_SERVER:-$(command -v redis-server || true)}
[ -x "$server" ] || { echo "skipped: redis-server is not installed (scripts/setup.sh installs it)"; exit 77; }
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --logfile "$work/redis.log" &
pid=$!
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
export KILN_REMOTE_KEY="the fleet key of the recipe test"
remote="redis://127.0.0.1:$port/0"

echo "== 1. CI"
KILN_CACHE_DIR="$work/ci" "$kiln" precompile --arch sm_90 vector_add | tee "$work/out" || fail "precompile in CI"
grep -q '^compiled and cached  vector_add' "$work/out" || fail "CI did not compile vector_add"
KILN_CACHE_DIR="$work/ci" "$kiln" cache export --arch sm_90 "$work/kernels.kpack" || fail "export"
KILN_CACHE_DIR="$work/ci" KILN_REMOTE_CACHE="$remote" "$kiln" cache push --arch sm_90 | tee "$work/out" || fail "push"
grep -q '^pushed 1 entry' "$work/out" || fail "push did not upload the entry"

echo "== 2. machine A: the pack"
KILN_CACHE_DIR="$work/a" "$kiln" cache import "$work/kernels.kpack" | tee "$work/out" || fail "import"
grep -q '1 entry checked, 1 new' "$work/out" || fail "import did not add the entry"
KILN_CACHE_DIR="$work/a" "$kiln" precompile --arch sm_90 vector_add | tee "$work/out" || fail "precompile on A"
grep -q '^already cached  vector_add' "$work/out" || fail "A compiled what the pack held"

echo "== 3. machine B: the remote"
KILN_CACHE_DIR="$work/b" KILN_REMOTE_CACHE="$remote" "$kiln" precompile --arch sm_90 vector_add | tee "$work/out" ||
  fail "precompile on B"
grep -q '^fetched from the fleet  vector_add' "$work/out" || fail "B compiled what the remote held, or did not say it fetched it"
[ "$(ls "$work/b/v3" | grep -c '\.kiln$')" = 1 ] || fail "B does not have the entry on its disk"

echo "== 4. damaged packs"
head -c 1000 "$work/kernels.kpack" > "$work/truncated.kpack"
if KILN_CACHE_DIR="$work/c" "$kiln" cache import "$work/truncated.kpack" 2> "$work/err"; then fail "a truncated pack was imported"; fi
cat "$work/err"
grep -q 'refused, nothing was imported: it is damaged: truncated or altered' "$work/err" || fail "no clear reason"
python3 -c 'import sys; b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 1; open(sys.argv[2], "wb").write(b)' \
  "$work/kernels.kpack" "$work/altered.kpack"
if KILN_CACHE_DIR="$work/c" "$kiln" cache import "$work/altered.kpack" 2> "$work/err"; then fail "an altered pack was imported"; fi
grep -q 'refused, nothing was imported' "$work/err" || fail "no clear reason"
[ -z "$(ls "$work/c/v3" 2>/dev/null | grep '\.kiln$')" ] || fail "a refused pack left entries behind"

echo "== 5. stats, and another fleet's key"
KILN_CACHE_DIR="$work/b" KILN_REMOTE_CACHE="$remote" "$kiln" cache stats | tee "$work/out" || fail "cache stats"
grep -q "^remote cache: $remote (fleet key [0-9a-f]\{16\}.*answers in" "$work/out" || fail "stats do not show the remote"
KILN_CACHE_DIR="$work/d" KILN_REMOTE_CACHE="$remote" KILN_REMOTE_KEY="another fleet's key, 32 bytes.." \
  "$kiln" precompile --arch sm_90 vector_add > "$work/out" 2> "$work/err" || fail "precompile with another key"
grep -q '^compiled and cached  vector_add' "$work/out" || fail "an entry of another fleet's key was used"
[ ! -s "$work/err" ] || { cat "$work/err"; fail "another key's machine found the fleet's entries (they live under its key's id)"; }
KILN_CACHE_DIR="$work/e" KILN_REMOTE_CACHE="$remote" "$kiln" precompile --arch sm_90 vector_add | tee "$work/out" ||
  fail "precompile on a new machine of the fleet"
grep -q '^fetched from the fleet  vector_add' "$work/out" || fail "the other key's machine replaced the fleet's entry"
echo "ok"
