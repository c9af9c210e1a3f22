#!/usr/bin/env bash
# bench/tma_probe.cu (the TMA box-cost measurement) keeps compiling, and runs
# where there is an sm_90 GPU (exit 77, skipped, elsewhere).
#
#   check_tma_probe.sh NVCC SOURCE_DIR
set -uo pipefail
nvcc=$1 src=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$nvcc" -std=c++17 -O3 -arch=sm_90a -Werror all-warnings -I"$src" "$src/bench/tma_probe.cu" -o "$out/tma_probe" ||
  exit 1
"$out/tma_probe"
