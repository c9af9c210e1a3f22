#!/usr/bin/env bash
# Builds the Python wheel with libggemm.so inside, after the library:
#   scripts/build_wheel.sh            # -> dist/ggemm-<version>-py3-none-manylinux_2_<N>_x86_64.whl
#   pip install dist/ggemm-*.whl
# (scripts/setup.sh first, for build/libggemm.so.)
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset default --target ggemm
python3 scripts/build_wheel.py --library build/libggemm.so --out "${1:-dist}"
