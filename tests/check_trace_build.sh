#!/usr/bin/env bash
# Trace builds (cmake -DGGEMM_TRACE=ON, ptx/blocks/trace.h) must keep compiling, and
# their report must read what they write, without CI building everything
# twice: the sm_90a bf16 kernels with events on (the general ones and the
# store and accumulate twins, which run the plain and LoRA calls), the runtime's trace code
# with GGEMM_TRACE=1 (syntax only), and bench/dev/trace_report.py's self-test.
#
#   check_trace_build.sh NVCC CXX SOURCE_DIR CUDA_INCLUDE_DIR PYTHON
set -euo pipefail
nvcc=$1 cxx=$2 src=$3 cuda_include=$4 python=$5
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for name in kernels_bf16 kernels_store_bf16 kernels_accumulate_bf16; do
  "$nvcc" -std=c++17 -O3 -fatbin -gencode=arch=compute_90a,code=sm_90a -DGGEMM_TRACE=1 \
    -o "$out/$name.fatbin" "$src/ptx/sm90/$name.cu" 2>> "$out/nvcc.log" || { cat "$out/nvcc.log"; exit 1; }
done
# Events between wgmmas must not make ptxas serialise them (C7515): the
# traced mainloop would then not be the one being studied.
if grep -i "serializ" "$out/nvcc.log"; then echo "trace build: ptxas serialises wgmma"; exit 1; fi
"$cxx" -std=c++17 -Wall -Wextra -Werror -DGGEMM_TRACE=1 -fsyntax-only -I"$src" -I"$src/api/include" \
  -I"$cuda_include" "$src/runtime/trace.cpp" "$src/runtime/launch_grouped.cpp" "$src/runtime/driver.cpp"
"$python" "$src/bench/dev/trace_report.py" --self-test
echo "trace build: kernels compile, runtime compiles, report self-test passes"
