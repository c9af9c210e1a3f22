#!/usr/bin/env bash
# One device call: where the sm_90a short-K kernel's time goes, step by step,
# for one or more variants side by side. Each VARIANT is "-" (the tree as it
# is) or a comma-separated list of patches; every variant also gets
# bench/experiments/sm90_short_k_clock_probe.patch (thread 0 of CTAs 0, 200
# and the last printf their clock64 cycles from entry to: the routing staged,
# the tile found, the operands copied, multiplied, staged, stores issued,
# and the end; and %globaltimer at entry and end). The variants build in
# parallel, in Release like the library (not the trace build, whose step
# times misled in NOTES v0.17), then run the decode rows one after another;
# per row and variant the benchmark's median, the mean cycles per step and
# the launch's entry and end skew are printed.
#
#   OUT=/tmp/o scripts/h200_short_k_probe.sh - bench/experiments/sm90_short_k_tlb_touch.patch
#
# printf itself adds work after the stores, so read the steps before "end";
# a probe's claim is a prediction to time with scripts/ab_bench.sh, not a
# measurement of the default build (NOTES v0.17: a walk the probe put at
# ~1.25 us was level when removed).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/h200_out}; mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
[ $# -ge 1 ] || set -- -
probe=$PWD/bench/experiments/sm90_short_k_clock_probe.patch
rows=('decode_m64_g8_r16/ggemm_graph' 'decode_m64_g8_r16_accumulate/ggemm_graph'
      'decode_m64_g8_r16_probe_inactive/ggemm_graph' 'decode_m64_g8_r16_probe_no_groups/ggemm_graph')

trees=()
for i in $(seq $#); do
  variant=${!i}
  tree=/tmp/ggemm_skprobe_$i; rm -rf "$tree"; mkdir -p "$tree"
  git ls-files -co --exclude-standard -z |
    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | xargs -0 cp --parents -t "$tree"
  patches=("$probe")
  [ "$variant" = - ] || IFS=',' read -r -a extra <<< "$variant"
  [ "$variant" = - ] || for p in "${extra[@]}"; do patches+=("$(realpath "$p")"); done
  for p in "${patches[@]}"; do
    (cd "$tree" && patch -p1 -s < "$p") || { echo "variant $i ($variant): $p does not apply"; exit 1; }
  done
  trees+=("$tree")
  echo "variant $i: ${patches[*]}"
done

pids=()
for i in "${!trees[@]}"; do
  (cmake -S "${trees[$i]}" -B "${trees[$i]}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$OUT/skprobe_cfg_$((i + 1)).txt" 2>&1 &&
   cmake --build "${trees[$i]}/build" --target ggemm_bench > "$OUT/skprobe_build_$((i + 1)).txt" 2>&1) &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { echo "variant $((i + 1)): build failed"; tail -20 "$OUT/skprobe_build_$((i + 1)).txt"; exit 1; }
done

for row in "${rows[@]}"; do
  for i in "${!trees[@]}"; do
    log=$OUT/skprobe_run_$((i + 1)).txt
    "${trees[$i]}/build/bench/ggemm_bench" --benchmark_filter="$row" > "$log" 2>&1
    echo "== $row, variant $((i + 1)): median $(grep -m1 'manual_time_median' "$log" | awk '{print $2, $3}')"
    # Fields: SKPROBE cta N routed A walked B copied C multiplied D staged E stored F end G g0 H g1 I
    grep SKPROBE "$log" | awk '{k = ($3 == 0) ? "first" : ($3 == 200 ? "mid" : "last"); n[k]++
        for (f = 5; f <= 17; f += 2) s[k, f] += $f}
      END {for (k in n) printf "  %-5s (n %d): routed %.0f walked %.0f copied %.0f multiplied %.0f staged %.0f stored %.0f end %.0f cycles\n",
             k, n[k], s[k,5]/n[k], s[k,7]/n[k], s[k,9]/n[k], s[k,11]/n[k], s[k,13]/n[k], s[k,15]/n[k], s[k,17]/n[k]}' | sort
    # Launch skew: the last CTA's entry and end against CTA 0's, in the same call.
    grep SKPROBE "$log" | awk 'function lo(x) {return substr(x, length(x) - 8) + 0}
        $3 == 0 {g0 = lo($19); e0 = lo($21)}
        $3 != 0 && $3 != 200 && g0 {printf "%d %d %d\n", lo($19) - g0, lo($21) - e0, e0 - g0; g0 = 0}' |
      sort -n | awk '{a[NR] = $0} END {if (NR) print "  entry skew, end skew, CTA 0 span (ns), median:", a[int(NR / 2) + 1]}'
  done
done
