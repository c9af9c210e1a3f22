#!/usr/bin/env bash
# One device call that answers where the time goes inside the kernels: a
# trace build (build-trace/, cmake -DGGEMM_TRACE=ON; ptx/blocks/trace.h), then one
# traced call of each benchmark row below — a timed call, after an L2 flush
# — each summarised by bench/dev/trace_report.py (load round trip per
# stage, consumer starvation, producer issue gaps, mainloop and epilogue per
# tile); the full reports, with CTA 0's timeline, in $OUT/trace_logs.tgz.
#
#   bench/dev/run.sh trace                  # the default rows
#   bench/dev/run.sh trace 'mixtral_gate_up_prefill/ggemm/' ...
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH

if ! { cmake -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGEMM_TRACE=ON -DGGEMM_BUILD_TESTS=OFF \
         > "$out/trace_build.log" 2>&1 && cmake --build build-trace --target ggemm_bench >> "$out/trace_build.log" 2>&1; }; then
  tail -30 "$out/trace_build.log"; echo "TRACE BUILD FAILED"; exit 1
fi

rows=("$@")
if [ ${#rows[@]} -eq 0 ]; then
  rows=(lora_shrink_qkv_llama3_8b_m4096_g8_r16/ggemm/ lora_shrink_qkv_llama3_8b_m4096_g8_r64/ggemm/
        lora_shrink_qkv_llama3_8b_decode_m64_g8_r16/ggemm/ lora_expand_qkv_llama3_8b_decode_m64_g8_r16/ggemm/
        lora_expand_qkv_llama3_8b_m4096_g8_r16/ggemm/ qwen3_30b_a3b_down_prefill/ggemm/
        qwen3_30b_a3b_gate_up_prefill_zipf/ggemm/ mixtral_gate_up_prefill/ggemm/
        deepseek_v3_ep8_gate_up_decode/ggemm/)
fi
i=0
for row in "${rows[@]}"; do
  i=$((i + 1))
  trace="$out/trace_$i.bin"
  rm -f "$trace"
  # Before the 5th launch come three warm-up calls (and, for LoRA rows, a
  # check against the reference): the 5th is a timed call, after an L2 flush.
  GGEMM_TRACE_FILE="$trace" GGEMM_TRACE_SKIP=4 timeout 180 build-trace/bench/ggemm_bench \
    --benchmark_filter="$row" > "$out/trace_run_$i.log" 2>&1
  echo "== $row"
  if [ -s "$trace" ]; then
    python3 bench/dev/trace_report.py "$trace" --cta 0 > "$out/trace_report_$i.txt"
    sed '/timeline/,$d' "$out/trace_report_$i.txt"
  else
    echo "no trace written (see $out/trace_run_$i.log)"; tail -3 "$out/trace_run_$i.log"
  fi
  rm -f "$trace"
done
# Few files back from the device: the logs and full reports in one archive.
tar czf "$out/trace_logs.tgz" -C "$out" trace_build.log $(cd "$out" && ls trace_run_*.log trace_report_*.txt 2>/dev/null) &&
  (cd "$out" && rm -f trace_build.log trace_run_*.log trace_report_*.txt)
