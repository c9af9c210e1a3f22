"""Where the MoE layer's time goes: ggemm.moe_ffn's kernels one by one
(torch.profiler's CUDA times, back to back, warm), for a few models and
token counts. The kernels are programmatic dependent launches: each starts
while the one before it drains and waits for it, so a kernel's time here
includes that wait (the layer's time is bench/moe_layer.py's). H200-only diagnostic (bench/dev/run.sh is not needed: run it
with GGEMM_LIBRARY and PYTHONPATH set, as scripts/h200_check.sh runs the
Python benchmarks)."""
import argparse

import torch

import ggemm

MODELS = {  # hidden, moe ffn, local experts, top-k
    "qwen3_30b_a3b": (2048, 768, 128, 8),
    "qwen3_235b_a22b": (4096, 1536, 128, 8),
    "mixtral_8x7b": (4096, 14336, 8, 2),
    "deepseek_v3_ep8": (7168, 2048, 32, 8),
}


def split(model: str, tokens: int, reps: int) -> None:
    h, i, e, k = MODELS[model]
    dev = torch.device("cuda")
    x = torch.randn(tokens, h, device=dev, dtype=torch.bfloat16)
    w1 = (torch.randn(e, 2 * i, h, device=dev) / h**0.5).to(torch.bfloat16)
    w2 = (torch.randn(e, h, i, device=dev) / i**0.5).to(torch.bfloat16)
    probs = torch.softmax(torch.randn(tokens, e, device=dev), -1)
    wts, ids = torch.topk(probs, k, -1)
    ids = ids.to(torch.int32).contiguous()
    wts = (wts / wts.sum(-1, keepdim=True)).contiguous()
    out = torch.empty_like(x)
    for _ in range(3):
        ggemm.moe_ffn(x, w1, w2, ids, wts, out=out)
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            ggemm.moe_ffn(x, w1, w2, ids, wts, out=out)
        torch.cuda.synchronize()
    # A name launched more than once a layer (the two GEMMs) shows once per
    # launch, in launch order.
    per = {}
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per.setdefault(ev.name, []).append(ev.device_time)
    total = sum(sum(v) for v in per.values()) / reps
    print(f"{model} tokens {tokens}: kernels {total:.1f} us per layer")
    for name, times in per.items():
        launches = max(1, len(times) // reps)
        for i in range(launches):
            print(f"    {sum(times[i::launches]) / reps:8.1f} us  #{i + 1}  {name[:90]}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="qwen3_30b_a3b:1,qwen3_30b_a3b:64,qwen3_30b_a3b:4096,mixtral_8x7b:4096,"
                    "deepseek_v3_ep8:1,qwen3_235b_a22b:4096")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    for case in a.cases.split(","):
        model, tokens = case.split(":")
        split(model, int(tokens), a.reps)


if __name__ == "__main__":
    main()
