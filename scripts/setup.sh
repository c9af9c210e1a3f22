#!/usr/bin/env bash
# Sets up everything ggemm needs on a fresh Debian/Ubuntu machine, builds it,
# and runs the main job (bench/demo.cpp: a DeepSeek-V3 MoE grouped GEMM on the
# GPU, checked against the CPU reference and timed beside cuBLAS; without a
# GPU it says so and exits 0).
#
#   scripts/setup.sh            # install, configure, build, run the demo
#   scripts/setup.sh --no-demo  # install, configure, build
set -euo pipefail
cd "$(dirname "$0")/.."

run_demo=1
[[ "${1:-}" == "--no-demo" ]] && run_demo=0

sudo_if_needed() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

# 1. System packages: compiler, build tools (pkg-config for the C example),
#    GoogleTest, Google Benchmark, Abseil (linked statically into libggemm);
#    clang with its libFuzzer/ASan/UBSan
#    runtimes (libclang-rt-dev) for the fuzz test (tests/fuzz).
pkgs=(g++ cmake ninja-build pkg-config libgtest-dev libbenchmark-dev libabsl-dev python3 python3-pip clang libclang-rt-dev)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  sudo_if_needed apt-get update -q
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

# 2. The CUDA toolkit (nvcc >= 12.8 for sm_90a/sm_100a), from the machine.
nvcc_bin=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [[ ! -x "$nvcc_bin" ]]; then
  echo "error: nvcc not found. ggemm needs the CUDA toolkit 12.8 or newer (13.0 tested):" >&2
  echo "  https://developer.nvidia.com/cuda-downloads, then put its bin/ on PATH." >&2
  exit 1
fi
echo "== nvcc: $($nvcc_bin --version | tail -1)"

# 3. Disassembly tools for the SASS checks (cuobjdump, nvdisasm), from PyPI,
#    into .tools/ (ignored by git); the toolkit's own are used when present.
if [[ ! -x .tools/nvidia/cu13/bin/cuobjdump || ! -x .tools/nvidia/cu13/bin/nvdisasm ]]; then
  echo "== installing cuobjdump and nvdisasm into .tools/"
  python3 -m pip install -q --disable-pip-version-check --target .tools \
    nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm
fi

# 3b. pytest for the Python package's tests (python/tests), from PyPI into
#     .tools/py (found there by tests/run_python_tests.sh) unless python3
#     already has it. --target needs no virtual environment and works where
#     the system Python is externally managed (Debian 12, Ubuntu 24.04).
if ! python3 -c 'import pytest' >/dev/null 2>&1 && [[ ! -d .tools/py/pytest ]]; then
  echo "== installing pytest into .tools/py"
  python3 -m pip install -q --disable-pip-version-check --target .tools/py pytest
fi

# 4. Configure and build (build/ via CMakePresets.json).
export PATH="$(dirname "$nvcc_bin"):$PATH"
cmake --preset default
cmake --build --preset default

# 5. The main job.
if ((run_demo)); then
  echo "== running the demo (build/ggemm_demo)"
  ./build/ggemm_demo
fi
