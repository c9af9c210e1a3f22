#!/usr/bin/env bash
# Every PTX kernel of the benchmark harness (bench/harness_ptx.h; the
# streaming kernel with 1 load in flight is the L2 flush's read sweep)
# assembles with ptxas for sm_90, and the streaming kernels hold as many 16-byte global
# loads and stores as they say they keep in flight (cuobjdump, when found).
# On a GPU the driver JIT-compiles the same text; a slip would otherwise show
# only there. Skips (77) without ptxas.
#
#   check_harness_ptx.sh PRINT_HARNESS_PTX PTXAS [CUOBJDUMP]
set -uo pipefail
printer=$1 ptxas=$2 cuobjdump=${3:-}
[ -x "$ptxas" ] || { echo "SKIP: no ptxas"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
status=0
for kernel in null params load_chain stream1 stream4 stream16; do
  "$printer" "$kernel" > "$dir/$kernel.ptx" || { echo "FAIL: $kernel: the printer failed"; status=1; continue; }
  if ! "$ptxas" -arch=sm_90 -o "$dir/$kernel.cubin" "$dir/$kernel.ptx" 2> "$dir/$kernel.err"; then
    echo "FAIL: $kernel does not assemble:"; cat "$dir/$kernel.err"; status=1; continue
  fi
  echo "ok: $kernel assembles"
  case $kernel in stream*) ;; *) continue ;; esac
  [ -n "$cuobjdump" ] && [ -x "$cuobjdump" ] || { echo "  (no cuobjdump: SASS not read)"; continue; }
  want=${kernel#stream}
  sass=$("$cuobjdump" -sass "$dir/$kernel.cubin")
  loads=$(grep -c 'LDG\.E\.128' <<<"$sass")
  stores=$(grep -c 'STG\.E\.128' <<<"$sass")
  if [ "$loads" != "$want" ] || [ "$stores" != "$want" ]; then
    echo "FAIL: $kernel has $loads 16-byte loads and $stores 16-byte stores, not $want of each"; status=1
  else
    echo "ok: $kernel has $want 16-byte loads and $want stores"
  fi
done
exit $status
