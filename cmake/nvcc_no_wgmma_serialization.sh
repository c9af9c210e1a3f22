#!/bin/sh
# Runs the nvcc command given as arguments and fails the build when ptxas
# says it serialised wgmma.mma_async (C7511: too few registers for the wgmma
# pipeline; C7515: a non-wgmma definition of accumulator registers). ptxas
# prints these as info, not warnings, so -Werror does not stop them, yet a
# kernel with serialised wgmmas runs its mainloop at a fraction of the
# tensor cores' rate (a change that did so once compiled clean).
log=$(mktemp) || exit 1
"$@" 2> "$log"
rc=$?
cat "$log" >&2
if [ "$rc" -eq 0 ] && grep -qi "wgmma.mma_async instructions are serialized" "$log"; then
  echo "error: ptxas serialised wgmma in the kernels above (see its info lines)" >&2
  rc=1
fi
rm -f "$log"
exit "$rc"
