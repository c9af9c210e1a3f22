"""GPU tests of ggemm.transformers: a transformers sparse MoE block (Qwen3-MoE,
Mixtral; small random configs) with its experts on ggemm.moe_ffn against the
stock block, eager and under torch.compile(fullgraph=True). The CPU checks of
the packing and the router are in test_hf_moe.py. Skipped, with the reason,
without PyTorch, a CUDA device, transformers, or a GPU ggemm can use."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the GPU tests compare against PyTorch")
transformers = pytest.importorskip("transformers", reason="transformers is not installed: nothing to compare with")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="torch.cuda is not available (no GPU or no NVIDIA driver)"
)

import ggemm.transformers as gtf  # noqa: E402
from gpu_routing import DEV  # noqa: E402
from moe_reference import assert_layer  # noqa: E402

HOOK = gtf._experts_interface() is not None
PATHS = [pytest.param(True, id="hook", marks=pytest.mark.skipif(
            not HOOK, reason=f"transformers {transformers.__version__} has no experts interface")),
         pytest.param(False, id="swap")]
# model: random_block's sizes (multiples of 8, as ggemm's H and I must be)
CONFIGS = {
    "qwen3": dict(hidden=256, intermediate=128, experts=16, top_k=4),
    "mixtral": dict(hidden=256, intermediate=512, experts=8, top_k=2),
}
TOKENS = [1, 64, 300]

_blocks = {}


def stock_block(model):
    if model not in _blocks:
        _blocks[model] = gtf.random_block(model, **CONFIGS[model], device=DEV, seed=len(model))
    return _blocks[model]


def hidden_of(result):
    return result[0] if isinstance(result, tuple) else result


def check_against_stock(got, want, what):
    """Same structure; router logits identical (the same router on the same
    tokens); the hidden states within bf16 tolerance of the stock block's."""
    assert type(got) is type(want), what
    if isinstance(want, tuple):
        assert len(got) == len(want) and torch.equal(got[1], want[1]), f"{what}: router logits differ"
    assert_layer(hidden_of(got), hidden_of(want), what)


@pytest.mark.parametrize("use_hook", PATHS)
@pytest.mark.parametrize("model", list(CONFIGS))
def test_eager_and_compiled_match_the_stock_block(handle, monkeypatch, model, use_hook):
    stock = stock_block(model)
    ours = gtf.moe_block(copy.deepcopy(stock), use_hook=use_hook)
    h = CONFIGS[model]["hidden"]
    xs = {tokens: torch.randn(1, tokens, h, device=DEV).to(torch.bfloat16) for tokens in TOKENS}
    with torch.inference_mode():
        wants = {tokens: stock(x.clone()) for tokens, x in xs.items()}
    name = f"{model} {'hook' if use_hook else 'swap'}"

    calls, kernel = [], gtf._moe_ffn
    # Counts the eager calls: the stock loop would match the stock block too.
    monkeypatch.setattr(gtf, "_moe_ffn", lambda *a: calls.append(1) or kernel(*a))
    for tokens, x in xs.items():
        with torch.inference_mode():
            got = ours(x.clone())
        torch.cuda.synchronize()
        check_against_stock(got, wants[tokens], f"{name} T={tokens} eager")
    assert len(calls) == len(TOKENS), "the experts did not run on ggemm"
    monkeypatch.undo()  # the compiled block traces the kernel itself

    compiled = torch.compile(ours, fullgraph=True)  # ggemm's operator keeps the graph whole
    for tokens, x in xs.items():
        with torch.inference_mode():
            got = compiled(x.clone())
        torch.cuda.synchronize()
        # The compiled router (inductor's softmax, aten's top-k) picks the same
        # experts; the logits may differ in the last bit, the hidden states by rounding.
        assert type(got) is type(wants[tokens])
        assert_layer(hidden_of(got), hidden_of(wants[tokens]), f"{name} T={tokens} compiled")


def test_batch_and_sequence_dims_are_kept(handle):
    stock = stock_block("qwen3")
    ours = gtf.moe_block(copy.deepcopy(stock), use_hook=False)
    x = torch.randn(3, 5, CONFIGS["qwen3"]["hidden"], device=DEV).to(torch.bfloat16)
    with torch.inference_mode():
        check_against_stock(ours(x.clone()), stock(x.clone()), "[3, 5, H]")

