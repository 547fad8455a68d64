#!/usr/bin/env bash
# scripts/local-gpu-arch.sh, which scripts/setup.sh asks which archs to embed the primitives for: sm_XX
# from nvidia-smi (each kind of GPU once), and `none` (exit 0) without nvidia-smi, as on CI, where setup
# once stopped with exit 127, or when it fails or prints something else.
set -uo pipefail
script="$(cd "$(dirname "$0")/.." && pwd)/scripts/local-gpu-arch.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# A PATH with the tools the script uses and, per case, a fake nvidia-smi or none at all.
mkdir "$dir/bin"
for tool in bash head tr; do ln -s "$(command -v $tool)" "$dir/bin/$tool"; done
failed=0
check() {  # check NAME EXPECTED [FAKE_BODY]
  rm -f "$dir/bin/nvidia-smi"
  if [ $# -ge 3 ]; then printf '#!%s\n%s\n' "$(command -v bash)" "$3" > "$dir/bin/nvidia-smi"; chmod +x "$dir/bin/nvidia-smi"; fi
  got=$(PATH="$dir/bin" "$(command -v bash)" "$script"); rc=$?
  if [ "$rc" != 0 ] || [ "$got" != "$2" ]; then
    echo "FAIL: $1: got '$got' (exit $rc), expected '$2' (exit 0)"; failed=1
  else
    echo "ok: $1: $got"
  fi
}
check "no nvidia-smi (CI)" none
check "an H100" sm_90 'echo "9.0"'
check "two GPUs of two kinds, each once" sm_120,sm_90 'printf "12.0\n9.0\n12.0\n"'
check "four GPUs of one kind" sm_90 'printf "9.0\n9.0\n9.0\n9.0\n"'
check "nvidia-smi fails (no driver)" none 'echo "NVIDIA-SMI has failed" >&2; exit 9'
check "nvidia-smi prints something else" none 'echo "[N/A]"'
exit $failed
