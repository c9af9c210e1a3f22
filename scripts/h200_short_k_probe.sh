#!/usr/bin/env bash
# One device call: where the sm_90a short-K kernel's time goes, step by step,
# for one or more variants side by side. Each VARIANT is "-" (the tree as it
# is) or a comma-separated list of patches; every variant also gets
# bench/experiments/sm90_short_k_clock_probe.patch (thread 0 of CTAs 0, 1,
# 7, 56, 63, 200 and the last printf their clock64 cycles from entry to: the
# routing staged, the tile found, the operands copied, multiplied, the split
# kernel's partials reduced, staged, stores issued, and the end, -1 for a
# step the CTA did not take; and %globaltimer at entry and end). The variants build in
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
rows=('^lora_expand_qkv_llama3_8b_decode_m64_g8_r16/ggemm_graph'
      '^lora_shrink_qkv_llama3_8b_decode_m64_g8_r16/ggemm_graph'
      '^lora_expand_qkv_llama3_8b_decode_m64_g8_r16_accumulate/ggemm_graph'
      '^lora_expand_qkv_llama3_8b_decode_m64_g8_r16_probe_inactive/ggemm_graph'
      '^lora_expand_qkv_llama3_8b_decode_m64_g8_r16_probe_no_groups/ggemm_graph')

trees=()
for i in $(seq $#); do
  variant=${!i}
  tree=/tmp/ggemm_skprobe_$i; rm -rf "$tree"; mkdir -p "$tree"
  git ls-files -co --exclude-standard -z |
    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | xargs -0 cp --parents -t "$tree"
  # The variant's patches, then the probe on top (fuzz 3: its hunks' context
  # may be what a variant changed, as the tile-count patch's loop line).
  patches=()
  [ "$variant" = - ] || IFS=',' read -r -a extra <<< "$variant"
  [ "$variant" = - ] || for p in "${extra[@]}"; do patches+=("$(realpath "$p")"); done
  patches+=("$probe")
  for p in "${patches[@]}"; do
    (cd "$tree" && patch -p1 -s -F3 < "$p") || { echo "variant $i ($variant): $p does not apply"; exit 1; }
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
    # The kernel and launch geometry the row gets (GGEMM_DEBUG's line; a
    # graph row launches once per capture, so the first line is enough).
    GGEMM_DEBUG=1 "${trees[$i]}/build/bench/ggemm_bench" --benchmark_filter="$row" --benchmark_min_time=0.01s 2>&1 |
      grep -m1 'kernel ggemm_sm90' | sed 's/^/  /'
    # Fields: SKPROBE cta N split S routed A walked B copied C multiplied D
    # reduced E staged F stored G end H g0 I g1 J. Per CTA, the mean of each
    # step over the launches that took it (-1: not taken).
    grep SKPROBE "$log" | awk '{c = $3; n[c]++
        for (f = 7; f <= 21; f += 2) if ($f >= 0) {s[c, f] += $f; k[c, f]++}}
      function m(c, f) {return k[c, f] ? sprintf("%.0f", s[c, f] / k[c, f]) : "-"}
      END {for (c in n) printf "  cta %4d (n %d): routed %s walked %s copied %s multiplied %s reduced %s staged %s stored %s end %s cycles\n",
             c, n[c], m(c,7), m(c,9), m(c,11), m(c,13), m(c,15), m(c,17), m(c,19), m(c,21)}' | sort -k2n
    # Per CTA, entry and end (%globaltimer, ns) after the launch's earliest
    # printed entry: the median over the launches (ordered by entry).
    grep SKPROBE "$log" | awk 'function lo(x) {return substr(x, length(x) - 9) + 0}
        function flush(  i) {for (i = 1; i <= k; i++) print cta[i], e[i] - base, x[i] - base; k = 0}
        {g0 = lo($23); g1 = lo($25)
         if (!have || g0 - base > 100000 || base - g0 > 100000) {flush(); base = g0; have = 1}
         k++; cta[k] = $3; e[k] = g0; x[k] = g1; if (g0 < base) base = g0}
        END {flush()}' | sort -k1n -k2n |
      awk '{a[$1] = a[$1] " " $2 "/" $3; n[$1]++}
        END {for (c in a) {split(a[c], v, " "); print "  cta", c, "entry/end ns:", v[int(n[c] / 2) + 1]}}' | sort -k2n
  done
done
