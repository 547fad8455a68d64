#!/usr/bin/env bash
# Prints the architecture of this machine's first GPU as -Dprimitive_archs takes it (sm_90), or `none`
# where there is no GPU or no nvidia-smi (CI): scripts/setup.sh embeds the primitives for it.
# Always exits 0: a machine without a GPU is not a failed setup.
set -euo pipefail
arch=$({ nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null || true; } | head -1 | tr -d ' .\r')
case "$arch" in
  [0-9][0-9] | [0-9][0-9][0-9]) echo "sm_$arch" ;;
  *) echo none ;;
esac
