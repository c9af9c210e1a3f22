#!/usr/bin/env python3
"""A Hugging Face transformers MoE block with its experts on ggemm (ggemm.transformers.moe_block).

    GGEMM_LIBRARY=build/libggemm.so PYTHONPATH=python python3 examples/python/hf_moe_block.py

Builds transformers' own sparse MoE block from a config made here (nothing is
downloaded), random weights, bf16 on the GPU: Qwen3MoeSparseMoeBlock at
Qwen3-30B-A3B's sizes (hidden 2048, moe ffn 768, 128 experts, top-8) and
MixtralSparseMoeBlock at Mixtral 8x7B's (4096, 14336, 8, top-2). Then the
same block with its experts on ggemm: through transformers' experts
implementation hook where this transformers has one (5.x), else a module swap
over the weights packed once. Checks that its outputs match the stock
block's (bf16 tolerance relative to the output's RMS, the tests' convention)
and times, at a few token counts, eager and under torch.compile:

  stock        the block as transformers runs it (its per-expert loop)
  grouped_mm   transformers' own fast experts (experts_implementation="grouped_mm"), where it has them
  ggemm        the router as the block's, the experts one ggemm.moe_ffn call

The ggemm block compiles with fullgraph=True (the table says so, or why not);
the others with the default (their expert loops break the graph).
Exit status: 0 when every check passes, and when there is no GPU, PyTorch or
transformers (SKIPPED); 1 when an output does not match.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys

from example_common import REPO, cuda_ms, open_gpu, torch_with_cuda

# The tests' bf16 tolerance, kept in one place (python/tests/moe_reference.py).
sys.path.insert(0, os.path.join(REPO, "python", "tests"))

MODELS = {  # random_block's sizes
    "qwen3": dict(hidden=2048, intermediate=768, experts=128, top_k=8),  # Qwen3-30B-A3B
    "mixtral": dict(hidden=4096, intermediate=14336, experts=8, top_k=2),  # Mixtral 8x7B
}


def hidden_of(result):
    """The hidden states of a block's result (4.5x blocks also return the router logits)."""
    return result[0] if isinstance(result, tuple) else result


def matches(torch, got, want):
    """(ok, max error / RMS of want): the tests' bf16 bound, |got - want| <= atol * RMS + rtol * |want|."""
    from moe_reference import TOL

    rtol, atol = TOL[want.dtype]
    got, want = hidden_of(got).float(), hidden_of(want).float()
    rms = want.pow(2).mean().sqrt().clamp_min(1e-30)
    ok = bool(torch.isfinite(got).all()) and bool(((got - want).abs() <= atol * rms + rtol * want.abs()).all())
    return ok, ((got - want).abs().max() / rms).item()


def compile_block(torch, block, fullgraph, x):
    """(compiled block, note): torch.compile(block, fullgraph=...) run once on x;
    when that fails, the error's first line and the block compiled without fullgraph."""
    compiled = torch.compile(block, fullgraph=fullgraph, dynamic=False)
    try:
        compiled(x)
        return compiled, "fullgraph" if fullgraph else "graph breaks allowed"
    except Exception as err:  # say what happened, then take what compiles
        if not fullgraph:
            raise
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        print(f"    torch.compile(fullgraph=True) failed: {type(err).__name__}: {first[:200]}")
        return compile_block(torch, block, False, x)[0], "fullgraph failed, compiled with graph breaks"


def run_model(torch, gtf, name, tokens_list, iters, do_compile, dev) -> bool:
    sizes = MODELS[name]
    stock = gtf.random_block(name, **sizes, device=dev)
    blocks = {"stock": stock}
    try:  # transformers' own grouped GEMM experts, where it has them (5.x)
        grouped = copy.deepcopy(stock)
        gtf.set_experts_implementation(grouped, "grouped_mm")
        blocks["grouped_mm"] = grouped
    except ValueError as err:
        print(f"  (no grouped_mm row: {err})")
    blocks["ggemm"] = gtf.moe_block(copy.deepcopy(stock))  # a deep copy: the hook patches the block in place
    hook = not isinstance(blocks["ggemm"], gtf.GgemmSparseMoeBlock)
    print(f"{type(stock).__name__}: hidden {sizes['hidden']}, moe ffn {sizes['intermediate']}, "
          f"{sizes['experts']} experts, top-{sizes['top_k']}, bf16; ggemm "
          f"{'through the experts-implementation hook' if hook else 'as a module swap (weights packed once)'}")

    ok = True
    times = {}  # (block, eager|compiled, T) -> ms
    notes = {}  # block -> how torch.compile went
    for tokens in tokens_list:
        x = torch.randn(1, tokens, sizes["hidden"], device=dev, dtype=torch.bfloat16)
        with torch.inference_mode():
            want = stock(x)
            for label, block in blocks.items():
                runs = [("eager", block)]
                if do_compile:  # static shapes: one graph per token count
                    fn, note = compile_block(torch, block, label == "ggemm", x)
                    notes.setdefault(label, set()).add(note)
                    runs.append(("compiled", fn))
                for mode, fn in runs:
                    got = fn(x)
                    if label != "stock" or mode != "eager":
                        good, err = matches(torch, got, want)
                        ok &= good
                        if not good:
                            print(f"    MISMATCH: {label} {mode} at T={tokens}: max error {err:.2e} x RMS")
                    if iters:
                        times[label, mode, tokens] = cuda_ms(torch, lambda: fn(x), iters)
    for label in notes:
        print(f"  torch.compile of {label}: {'; '.join(sorted(notes[label]))}")
    if iters:
        modes = ["eager"] + (["compiled"] if do_compile else [])
        cols = [(label, mode) for label in blocks for mode in modes]
        print(f"  ms per call, mean of {iters} (CUDA events):")
        print("  " + f"{'tokens':>7}" + "".join(f"{label + ' ' + mode:>22}" for label, mode in cols)
              + f"{'stock / ggemm':>16}")
        for tokens in tokens_list:
            best = min(times["ggemm", mode, tokens] for mode in modes)
            row = "".join(f"{times[label, mode, tokens]:>22.3f}" for label, mode in cols)
            print(f"  {tokens:>7}{row}{times['stock', 'eager', tokens] / best:>15.1f}x")
    print(f"  outputs: {'OK' if ok else 'MISMATCH'} (every block and mode against the stock block, eager)")
    return ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", choices=sorted(MODELS), default=["qwen3", "mixtral"])
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 64, 4096])
    p.add_argument("--iters", type=int, default=20, help="timed iterations (0: check only)")
    p.add_argument("--no-compile", action="store_true", help="eager only")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if torch_with_cuda("runs transformers' MoE blocks on a GPU") is None:
        return 0
    try:
        import transformers
    except ImportError:
        print("SKIPPED: transformers is not installed")
        return 0
    opened = open_gpu(args.device, args.seed)
    if isinstance(opened, int):
        return opened
    torch, handle, dev = opened
    import ggemm.transformers as gtf

    print(f"on {torch.cuda.get_device_name(dev)}: PyTorch {torch.__version__}, transformers {transformers.__version__}")
    ok = all([run_model(torch, gtf, name, args.tokens, args.iters, not args.no_compile, dev) for name in args.models])
    handle.close()
    if not ok:
        print("FAILED: a block's output does not match the stock block's", file=sys.stderr)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
