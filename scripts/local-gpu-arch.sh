#!/usr/bin/env bash
# Prints the architectures of this machine's GPUs as -Dprimitive_archs takes them (sm_90, or sm_80,sm_90 on
# a machine of mixed GPUs: each distinct one once, in nvidia-smi's order), or `none` where there is no GPU
# or no nvidia-smi (CI): scripts/setup.sh embeds the primitives for them.
# Always exits 0: a machine without a GPU is not a failed setup.
set -euo pipefail
archs=""
while IFS= read -r line; do
  arch=${line//[ .$'\r']/}
  case "$arch" in
    [0-9][0-9] | [0-9][0-9][0-9]) ;;
    *) archs=""; break ;;  # anything else: nvidia-smi did not answer as asked
  esac
  case ",$archs," in
    *",sm_$arch,"*) ;;
    *) archs="${archs:+$archs,}sm_$arch" ;;
  esac
done < <({ nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null || true; } | head -64)
echo "${archs:-none}"
