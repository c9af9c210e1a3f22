#!/usr/bin/env bash
# One device call: what one SM's TMA loads cost by box shape (bench/tma_probe.cu),
# the measurement NOTES v0.8 asks for before the shrink's stages change shape.
# ~30 s including the compile; the table goes to stdout and $OUT/tma_probe.txt.
#
#   scripts/h200_tma_probe.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
nvcc -std=c++17 -O3 -arch=sm_90a -I. bench/tma_probe.cu -o "$out/tma_probe.bin" || { echo "COMPILE FAILED"; exit 1; }
"$out/tma_probe.bin" | tee "$out/tma_probe.txt"
rc=${PIPESTATUS[0]}
rm -f "$out/tma_probe.bin"
exit "$rc"
