#!/usr/bin/env bash
# Developer tools for measuring the kernels on an H200 (or another sm_90a
# GPU). Not part of the library or its tests; nothing here is needed to
# build or use ggemm. Every tool writes its logs under $OUT (default
# ./h200_out) and expects a build in build/ unless it makes its own.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat <<'USAGE'
usage: bench/dev/run.sh TOOL [ARGS...]

  probe tma|mma|shrink|tma_store|gather
        compile and run one microbenchmark (bench/dev/*_probe.cu): one SM's
        TMA load cost by box shape; wgmma's rate beside TMA and staging
        traffic; the LoRA shrink's stages box by box; TMA stores by box
        rows and depth against plain stores
  trace [ROW...]
        build build-trace/ (-DGGEMM_TRACE=ON), trace one timed call of each
        benchmark row and summarise it with trace_report.py
  trace_report FILE [--cta N] | --self-test
        summarise a trace file written with GGEMM_TRACE_FILE
  ab [--dry-run] [--tests] PATCH[,PATCH...] FILTER [ROUNDS]
        same-run A/B: build the tree and one copy per patch, run the
        benchmarks matching FILTER alternately, print medians side by side
  ab_layer [--dry-run] PATCH[,PATCH...] [ROUNDS] [moe_layer.py options]
        same-run A/B of the whole MoE layer (bench/moe_layer.py): builds
        libggemm of the tree and of each patch or source tree, times the
        layer through each in turn, prints medians and ratios to A
  ab_libs [--rounds N] [--ncu] LABEL=LIB LABEL=LIB [...]
        same-run A/B of libraries built elsewhere through the Python
        benchmarks (the layer's GEMMs at 4096 tokens, compare_torch's
        prefill rows, the layer at 4096 tokens), processes alternated;
        --ncu adds each library's DRAM bytes of the layer's GEMMs
  power [ROW] [REPETITIONS]
        one MoE row per implementation for seconds, with the SM clock and
        power sampled by nvidia-smi (time, TFLOP/s, per GHz, per kW)
  ncu FILTER [FILTER...]
        Nsight Compute report of one ggemm kernel launch per filter
  ncu_time FILTER BUILD [BUILD...]
        each build's ggemm_sm90 kernel durations by Nsight Compute (25
        cold launches, no PDL overlap): min, median, max
  ncu_source FILTER BUILD OUT.csv
        one launch's per-instruction counters (SASS source page) for
        sass_counts
  sass_counts A.csv [B.csv] [--hot N] | --self-test
        where two builds' kernels spend instructions: by execution count
        (the role that ran them) and the hot loop's opcodes, B - A
  sweep_lora [COPY_GBPS]
        time the LoRA shrink and expand at every tile_m the config
        override allows, through the Python package (needs PyTorch)
USAGE
}

tool=${1:-}
[ -n "$tool" ] || { usage; exit 2; }
shift
case "$tool" in
  probe) exec "$here/probe.sh" "$@" ;;
  trace) exec "$here/trace.sh" "$@" ;;
  trace_report) exec python3 "$here/trace_report.py" "$@" ;;
  ab) exec "$here/ab_bench.sh" "$@" ;;
  ab_layer) exec "$here/ab_layer.sh" "$@" ;;
  ab_libs) exec "$here/ab_libs.sh" "$@" ;;
  power) exec "$here/power.sh" "$@" ;;
  ncu) exec "$here/ncu.sh" "$@" ;;
  ncu_time) exec "$here/ncu_time.sh" time "$@" ;;
  ncu_source) exec "$here/ncu_time.sh" source "$@" ;;
  sass_counts) exec python3 "$here/sass_counts.py" "$@" ;;
  sweep_lora)
    cd "$here/../.."
    GGEMM_LIBRARY=${GGEMM_LIBRARY:-build/libggemm.so} PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} \
      exec python3 bench/dev/sweep_lora.py "$@" ;;
  -h|--help|help) usage ;;
  *) echo "unknown tool: $tool" >&2; usage >&2; exit 2 ;;
esac
