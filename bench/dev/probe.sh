#!/usr/bin/env bash
# One device call: a microbenchmark of bench/dev/<name>_probe.cu on the H200.
#   tma  what one SM's TMA loads cost by box shape (bench/dev/tma_probe.cu, ~30 s)
#   mma  whether wgmma's rate from shared memory drops under TMA loads or
#        epilogue staging on the same SM (bench/dev/mma_probe.cu)
#   shrink  the LoRA shrinks' stages (R 16 and R 64), cold and warm, and
#        whether sharing a box by multicast in clusters streams them faster
#        (bench/dev/shrink_probe.cu; ~30 s)
#   tma_store  how fast TMA stores write the LoRA expand's outputs, by box
#        rows and boxes in flight, beside plain 16-byte stores
#        (bench/dev/tma_store_probe.cu; ~10 s)
#   gather  whether cp.async gathers by the producer warpgroup's spare warps
#        feed the token-major mainloop, beside TMA (bench/dev/gather_probe.cu)
# The table goes to stdout and $OUT/<name>_probe.txt.
#
#   bench/dev/run.sh probe tma|mma|shrink|tma_store|gather
set -uo pipefail
cd "$(dirname "$0")/../.."
name=${1:?usage: bench/dev/run.sh probe tma|mma|shrink|tma_store|gather}
src=bench/dev/${name}_probe.cu
[ -f "$src" ] || { echo "no $src"; exit 2; }
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I. "$src" -o "$out/${name}_probe.bin" || { echo "COMPILE FAILED"; exit 1; }
"$out/${name}_probe.bin" | tee "$out/${name}_probe.txt"
rc=${PIPESTATUS[0]}
rm -f "$out/${name}_probe.bin"
exit "$rc"
