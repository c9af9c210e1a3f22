#!/usr/bin/env bash
# Same-run A/B of the whole MoE layer on the H200 (bench/moe_layer.py): builds
# libggemm of the tree as it is (A) and of one copy per patch or source tree
# (B, C, ...; bench/dev/lib/ab_trees.sh), in parallel, then times the layer
# through each library in turn, A, B, ..., A, B, ... (one process per
# library and round: the library is loaded once per process). A's first
# round also times the torch layer and ggemm's two GEMMs alone, for the
# ratios the issues ask for. Prints, per row, each variant's median in each
# mode moe_layer.py timed (sustained, steady, cold) and its ratio to A.
#
#   bench/dev/run.sh ab_layer /tmp/b.patch                      # every model, 1..4096 tokens
#   bench/dev/run.sh ab_layer .baseline/variant 2 --tokens 4096,1 --models qwen3
#
# Env: OUT (logs and JSON; default ./h200_out). --dry-run: prepare and
# configure every tree, build and run nothing.
set -euo pipefail
lib=$(cd "$(dirname "$0")" && pwd)/lib
cd "$(dirname "$0")/../.."
dry=0
[ "${1:-}" = --dry-run ] && { dry=1; shift; }
patches=${1:?usage: bench/dev/run.sh ab_layer [--dry-run] PATCH[,PATCH...] [ROUNDS] [moe_layer.py options]}
shift
rounds=1
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH

source "$lib/ab_trees.sh"
ab_prepare_trees "$patches" || exit 1
ab_configure_trees "$out" -DGGEMM_BUILD_TESTS=OFF -DGGEMM_BUILD_BENCH=OFF || exit 1
[ $dry -eq 1 ] && { echo "dry run: every tree configured"; exit 0; }
ab_build_trees "$out" ggemm || exit 1

jsons=()
for r in $(seq "$rounds"); do
  for i in "${!labels[@]}"; do
    impls=layer
    [ "$i" -eq 0 ] && [ "$r" -eq 1 ] && impls=layer,torch,gemms
    json="$out/ab_layer_${labels[$i]}_$r.json"
    GGEMM_LIBRARY="${builds[$i]}/libggemm.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" \
      python3 bench/moe_layer.py --impls "$impls" --json "$json" "$@" > "$out/ab_layer_${labels[$i]}_$r.log" 2>&1 ||
      { echo "${labels[$i]} round $r: moe_layer.py exited with $? (see $out/ab_layer_${labels[$i]}_$r.log)"; exit 1; }
    jsons+=("${labels[$i]}=$json")
  done
done
python3 "$lib/ab_layer_table.py" "${jsons[@]}"
