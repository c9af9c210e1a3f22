"""Where the MoE layer's time goes: each kernel of ggemm.moe_ffn (route,
gate_up, down, combine) and of the two-GEMM baseline, inside a CUDA graph of
back-to-back calls, timed by CUPTI (torch.profiler). H200 diagnostic.

Kernels overlap under programmatic dependent launch: a kernel starts early
and waits for the one before it, so a kernel's own duration includes that
wait. What each stage adds to a call is the time from the previous stage's
end to its own end ("adds"); the stages' adds sum to the call's period.
The profiler adds a little to every kernel: compare within one run.
Each graph is replayed for graph_timing.STEADY_S seconds before it is
profiled, so every timeline is taken at the clock the power cap holds under
that load (timed one after the other without it, the second graph ran in
whatever clock state the first left: docs/performance.md, "Steady state at
the power cap"). Compare whole calls with bench/moe_layer.py, not here.

  GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 bench/dev/layer_timeline.py \
      [--rows qwen3_30b_a3b:1,mixtral_8x7b:1]
"""
import argparse
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, "bench")
from graph_timing import STEADY_S, capture, replay_for  # noqa: E402
from moe_layer import Problem  # noqa: E402

CALLS = 20  # calls per graph
REPLAYS = 3  # profiled replays


def timeline(fn, label: str) -> None:
    graph = capture(fn, CALLS)
    replay_for(graph, STEADY_S)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REPLAYS):
            graph.replay()
        torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type.name == "CUDA" and e.time_range.elapsed_us() > 0),
                     key=lambda e: e.time_range.start)
    per_call = len(kernels) // (CALLS * REPLAYS)
    calls = [kernels[i * per_call:(i + 1) * per_call] for i in range(len(kernels) // per_call)]
    period = statistics.median(b[0].time_range.start - a[0].time_range.start for a, b in zip(calls, calls[1:]))
    print(f"== {label}: {per_call} kernels a call, period {period:.2f} us")
    for j in range(per_call):
        # The end of stage j relative to the end of the stage before it (the
        # previous call's last stage for j = 0).
        adds = statistics.median(
            c[j].time_range.end - (c[j - 1].time_range.end if j else prev[-1].time_range.end)
            for prev, c in zip(calls, calls[1:]))
        own = statistics.median(c[j].time_range.elapsed_us() for c in calls)
        print(f"   {calls[0][j].name[:56]:56s} adds {adds:7.2f} us   (own span {own:7.2f})")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="qwen3_30b_a3b:1,qwen3_30b_a3b:4,qwen3_235b_a22b:1,mixtral_8x7b:1",
                    help="model:tokens pairs (bench/moe_layer.py's models)")
    args = ap.parse_args(argv)
    for row in args.rows.split(","):
        model, tokens = row.split(":")
        p = Problem(model, int(tokens), "balanced")
        timeline(p.layer, f"{model} {tokens} tokens, layer")
        timeline(p.gemms, f"{model} {tokens} tokens, the two GEMMs alone")


if __name__ == "__main__":
    main()
