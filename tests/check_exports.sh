#!/usr/bin/env bash
# libggemm.so must export only ggemm_* symbols and depend on nothing but the C
# and C++ runtimes: no CUDA runtime, no driver (it dlopens libcuda.so.1).
set -euo pipefail
lib="$1"
bad_syms=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^ggemm_' || true)
if [[ -n "$bad_syms" ]]; then
  echo "FAIL: exported symbols outside ggemm_*:"; echo "$bad_syms"; exit 1
fi
echo "exports: $(nm -D --defined-only "$lib" | awk '{print $3}' | tr '\n' ' ')"
deps=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
echo "needed: $(echo $deps)"
for d in $deps; do
  case "$d" in
    libc.so.*|libm.so.*|libstdc++.so.*|libgcc_s.so.*|libdl.so.*|libpthread.so.*|ld-linux*) ;;
    *) echo "FAIL: unexpected dependency $d"; exit 1 ;;
  esac
done
echo PASS
