#!/usr/bin/env bash
# One device call: where a launch spends its first cycles. Applies
# bench/experiments/sm90_clock_probe.patch to a copy of the tree (CTA 0 and
# the last CTA printf their clock64 cycles from entry to the last barrier
# init, to the CTA-wide sync and to the end, and %globaltimer at entry and
# end; CTA 0 also when its walker and a consumer thread are done), builds
# the trace configuration (spills allowed; printf serialises the wgmmas, so
# only the prologue and walk cycles mean anything) and prints the means
# over every call of four benchmark rows (NOTES v0.14, ~2 min).
#
#   OUT=/tmp/o scripts/h200_clock_probe.sh [PATCH]
#
# PATCH (default the clock probe above) may be
# bench/experiments/sm90_epilogue_clock_probe.patch, which contains it and
# adds, for the first 8 tiles of CTAs 0, 7 and the last, the cycles from
# entry at which the walker published the tile, the producer issued its
# first stage, and a consumer had it, saw its first stage full, finished the
# mainloop, had a staging buffer, had staged it and had issued its stores,
# and when each warp of that warpgroup reached the staging buffer's barrier
# (EPI lines; their means per CTA and tile are printed).
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/h200_out}; mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH
t=/tmp/clk; rm -rf $t; mkdir -p $t
git ls-files -co --exclude-standard -z | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | xargs -0 cp --parents -t $t
patch_file=${1:-bench/experiments/sm90_clock_probe.patch}
(cd $t && patch -p1 -s < "$patch_file") || exit 1
cmake -S $t -B $t/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGEMM_TRACE=ON > $OUT/clk_cfg.txt 2>&1
cmake --build $t/build --target ggemm_bench > $OUT/clk_build.txt 2>&1 || { tail -20 $OUT/clk_build.txt; exit 1; }
for f in 'decode_m64_g8_r16_probe_no_groups_warm_l2/ggemm_graph' 'lora_expand_qkv_llama3_8b_decode_m64_g8_r16/ggemm_graph' 'decode_m64_g8_r16_probe_inactive/ggemm_graph' ${EXTRA_ROWS:-} 'lora_shrink_qkv_llama3_8b_decode_m64_g8_r16/ggemm_graph' 'lora_expand_qkv_llama3_8b_m4096_g8_r16/ggemm_graph'; do
  $t/build/bench/ggemm_bench --benchmark_filter="$f" > $OUT/clk_run.txt 2>&1
  echo "== $f: $(grep -m1 'manual_time_median' $OUT/clk_run.txt | awk '{print $2, $3}')"
  grep PROBE $OUT/clk_run.txt | awk '{c[$3]++; i[$3]+=$7; s[$3]+=$9; e[$3]+=$11; st=$5} END {for (k in c) printf "cta %s: n %d stages %s mean inits %.0f sync %.0f end %.0f cycles\n", k, c[k], st, i[k]/c[k], s[k]/c[k], e[k]/c[k]}'
  grep '^EPI' $OUT/clk_run.txt | awk '{k=$3" "$5; n[k]++; for (f=7; f<=21; f+=2) s[k,f]+=$f; for (f=23; f<=26; ++f) s[k,f]+=$f} END {for (k in n) {printf "cta/tile %s (n %d): walker %.0f producer %.0f have %.0f full %.0f mainloop %.0f buf %.0f staged %.0f stored %.0f; warps at the first bar_sync %.0f %.0f %.0f %.0f\n", k, n[k], s[k,7]/n[k], s[k,9]/n[k], s[k,11]/n[k], s[k,13]/n[k], s[k,15]/n[k], s[k,17]/n[k], s[k,19]/n[k], s[k,21]/n[k], s[k,23]/n[k], s[k,24]/n[k], s[k,25]/n[k], s[k,26]/n[k]}}' | sort -k2,2n -k3,3n
  grep CLOCK2 $OUT/clk_run.txt | awk '{n[$2]++; t[$2]+=$3} END {for (k in n) printf "cta 0 %s: mean %.0f cycles from entry (n %d)\n", k, t[k]/n[k], n[k]}'
  # launch skew: entry of last CTA minus CTA 0 (pairs in order)
  grep PROBE $OUT/clk_run.txt | awk 'function lo(x) {return substr(x, length(x)-8)+0} $3==0 {g0=lo($15); e0=lo($17)} $3!=0 && g0 {printf "%d %d %d\n", lo($15)-g0, lo($17)-e0, e0-g0; g0=0}' | sort -n | awk '{a[NR]=$0} END {print "entry skew, end skew, cta0 span (ns), median:", a[int(NR/2)+1]}'
done
