#!/usr/bin/env bash
# Same-run A/B of libraries built elsewhere (say on the machine without a
# GPU, carried to the H200 with the tree) through the Python benchmarks:
# each round runs one process a benchmark and library, the libraries in
# turn (A, B, ..., A, B, ...: clock and power drift hit all alike), then
# prints per row each library's median, its ratio to the first's, and the
# anchor's (torch's) time over it. Nothing is built.
#
#   bench/dev/run.sh ab_libs [--rounds N] [--ncu] A=/tmp/a/libggemm.so B=build/libggemm.so
#
# The benchmarks (BENCHES, default all three):
#   layer_rows  bench/dev/layer_rows.py: the MoE layer's GEMMs at 4096 tokens
#   prefill     bench/compare_torch.py --data model --rows prefill
#   layer       bench/moe_layer.py --impls layer,torch --tokens 4096
# --ncu: first, the DRAM bytes of one call of each layer_rows row under
# each library (ncu, clocks left alone), to $OUT/ncu_LABEL.txt, their
# dram__bytes lines also printed.
# Env: OUT (default ./h200_out), BENCHES, LAYER_ROWS (regex for layer_rows).
set -uo pipefail
lib=$(cd "$(dirname "$0")" && pwd)/lib
cd "$(dirname "$0")/../.."
rounds=2 ncu=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --ncu) ncu=1; shift ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { echo "usage: bench/dev/run.sh ab_libs [--rounds N] [--ncu] LABEL=LIB LABEL=LIB [...]" >&2; exit 2; }
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
benches=${BENCHES:-layer_rows prefill layer}
labels=() libs=()
for arg in "$@"; do
  labels+=("${arg%%=*}") libs+=("${arg#*=}")
  [ -f "${arg#*=}" ] || { echo "no library at ${arg#*=}" >&2; exit 2; }
done

if [ $ncu -eq 1 ]; then
  for i in "${!labels[@]}"; do
    GGEMM_LIBRARY=${libs[$i]} timeout 300 ncu --clock-control none -k regex:ggemm \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
      python3 bench/dev/layer_rows.py --once --rows "${LAYER_ROWS:-.}" > "$out/ncu_${labels[$i]}.txt" 2>&1 ||
      echo "${labels[$i]}: ncu exited with $? (see $out/ncu_${labels[$i]}.txt)"
    echo "== ${labels[$i]}"
    grep -E "one call|^  ggemm|dram__bytes|gpu__time" "$out/ncu_${labels[$i]}.txt"
  done
fi

jsons=()
for r in $(seq "$rounds"); do
  for i in "${!labels[@]}"; do
    export GGEMM_LIBRARY=${libs[$i]}
    for b in $benches; do
      json="$out/ab_libs_${b}_${labels[$i]}_$r.json" log="$out/ab_libs_${b}_${labels[$i]}_$r.log"
      case "$b" in
        layer_rows) cmd=(python3 bench/dev/layer_rows.py --rows "${LAYER_ROWS:-.}") ;;
        prefill) cmd=(python3 bench/compare_torch.py --data model --rows prefill) ;;
        layer) cmd=(python3 bench/moe_layer.py --impls layer,torch --tokens 4096) ;;
        *) echo "unknown benchmark $b" >&2; exit 2 ;;
      esac
      if timeout 300 "${cmd[@]}" --json "$json" > "$log" 2>&1; then
        jsons+=("${labels[$i]}=$json")
      else
        echo "${labels[$i]} round $r: $b exited with $? (see $log)"
      fi
    done
  done
done
python3 "$lib/ab_libs_table.py" "${jsons[@]}" | tee "$out/ab_libs_table.md"
