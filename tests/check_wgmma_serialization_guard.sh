#!/usr/bin/env bash
# The kernel build's guard against serialised wgmma
# (cmake/nvcc_no_wgmma_serialization.sh) must let a clean wgmma chain
# through and stop the same chain once a plain instruction writes an
# accumulator inside it (tests/wgmma_serialization_probe.cu), so that a
# kernel change which makes ptxas serialise (an info line, which -Werror
# does not stop) cannot build.
#
#   check_wgmma_serialization_guard.sh NVCC SOURCE_DIR
set -uo pipefail
nvcc=$1 src=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
guard() {  # $1 = GGEMM_SERIALISE
  sh "$src/cmake/nvcc_no_wgmma_serialization.sh" "$nvcc" -std=c++17 -O3 -cubin -arch=sm_90a -I"$src" \
    -DGGEMM_SERIALISE="$1" -o "$out/probe_$1.cubin" "$src/tests/wgmma_serialization_probe.cu" > "$out/log_$1" 2>&1
}
if ! guard 0; then
  cat "$out/log_0"; echo "the guard failed a clean wgmma chain"; exit 1
fi
if guard 1; then
  cat "$out/log_1"; echo "the guard let a serialised wgmma chain through"; exit 1
fi
if ! grep -qi "wgmma.mma_async instructions are serialized" "$out/log_1"; then
  cat "$out/log_1"; echo "the serialised chain failed for another reason than serialisation"; exit 1
fi
echo "wgmma serialisation guard: passes the clean chain, stops the serialised one"
