#!/usr/bin/env bash
# A microbenchmark under bench/dev/ (tma_, tma_store_, mma_, shrink_, gather_probe.cu) keeps compiling,
# warning-free, and runs where there is an sm_90 GPU (exit 77, skipped,
# elsewhere).
#
#   check_probe.sh NVCC SOURCE_DIR bench/dev/NAME_probe.cu
set -uo pipefail
nvcc=$1 src=$2 probe=$3
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$nvcc" -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -Werror all-warnings -I"$src" "$src/$probe" -o "$out/probe" || exit 1
"$out/probe"
