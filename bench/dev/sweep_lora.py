"""Sweeps the config override (tile_m) of the LoRA Q/K/V shrink and expand
on Llama-3-8B shapes, to see which tile the heuristic should pick. Each call
is captured in a CUDA graph and the replay is timed between CUDA events after
writing a buffer twice the L2's size (cold L2, as bench/timing.h does), so
no Python time falls inside the measurement; prints the median of 30 replays
in us and the fraction of copy bandwidth (bytes moved once / time /
copy_gbps). For relative comparisons: bench/ggemm_bench is the reference.

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 bench/dev/sweep_lora.py [copy_gbps]
"""

from __future__ import annotations

import statistics
import sys

import torch

import ggemm

DEV = "cuda"
K, Q, KV, G = 4096, 4096, 1024, 8


def routing(m: int):
    rows = [m // G] * G
    offsets = [0]
    for r in rows:
        offsets.append(offsets[-1] + r)
    return (
        torch.tensor(offsets, dtype=torch.int32, device=DEV),
        torch.arange(G, dtype=torch.int32, device=DEV),
        torch.tensor([max(rows), G], dtype=torch.int32, device=DEV),
        max(rows),
    )


def time_us(fn, flush: torch.Tensor) -> float:
    fn()  # errors surface here, outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        graph.replay()
    times = []
    for _ in range(30):
        flush.add_(1)
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(times)


def main() -> None:
    copy_gbps = float(sys.argv[1]) if len(sys.argv) > 1 else 4220.0
    flush = torch.zeros(2 * torch.cuda.get_device_properties(0).L2_cache_size // 4, device=DEV)
    h = ggemm.Handle(0)
    for m in (4096, 64):
        offsets, ids, stats, max_rows = routing(m)
        for r in (16, 64):
            x = torch.randn(m, K, device=DEV).to(torch.bfloat16)
            a = torch.randn(G, 3 * r, K, device=DEV).to(torch.bfloat16)
            p = torch.empty(3, m, r, device=DEV, dtype=torch.bfloat16)
            b = torch.randn(G, Q + 2 * KV, r, device=DEV).to(torch.bfloat16)
            q = torch.empty(m, Q, device=DEV, dtype=torch.bfloat16)
            kv = torch.empty(2 * m, KV, device=DEV, dtype=torch.bfloat16)
            shrink_bytes = 2 * (x.numel() + a.numel() + p.numel())
            expand_bytes = 2 * (p.numel() + b.numel() + q.numel() + kv.numel())
            for tile_m in (0, 16, 32, 64, 128, 256):
                cfg = {"tile_m": tile_m} if tile_m else None
                row = f"m{m} r{r} tile_m {tile_m or 'auto':>4}"
                try:
                    t = time_us(
                        lambda: h.lora_shrink_qkv(x, a, p, offsets, ids, stats, max_rows_per_group=max_rows,
                                                  config=cfg),
                        flush,
                    )
                    print(f"shrink {row}: {t:7.1f} us  {shrink_bytes / t / 1e3 / copy_gbps:.2f} of copy")
                except ggemm.GgemmError as e:
                    print(f"shrink {row}: refused ({e})")
                try:
                    t = time_us(
                        lambda: h.lora_expand_qkv(p, b, q, kv, offsets, ids, stats, max_rows_per_group=max_rows,
                                                  config=cfg),
                        flush,
                    )
                    print(f"expand {row}: {t:7.1f} us  {expand_bytes / t / 1e3 / copy_gbps:.2f} of copy")
                except ggemm.GgemmError as e:
                    print(f"expand {row}: refused ({e})")
    torch.cuda.synchronize()
    h.close()


if __name__ == "__main__":
    main()
