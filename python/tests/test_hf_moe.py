"""ggemm.transformers without a GPU: the packing of the experts' weights, the
router and the outputs of the ggemm block against the stock transformers block
on the CPU, with moe_ffn replaced by its fp32 reference (moe_reference.py,
the math the GPU tests hold the kernel to). Skipped without PyTorch; the block
tests also without transformers. Runs against whichever transformers is
installed: 4.5x (experts as a ModuleList of Linear layers, the module swap) or
5.x (fused experts, through the experts-implementation hook, and the swap)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed: ggemm.transformers needs it")

import ggemm.transformers as gtf  # noqa: E402
from moe_reference import assert_layer, reference  # noqa: E402

TINY = dict(hidden=64, intermediate=32, experts=8, top_k=2)


class Kernel:
    """Stands in for ggemm.moe_ffn: the fp32 reference, counting its calls and
    checking what the kernel would be given."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x, w_gate_up, w_down, ids, weights):
        self.calls += 1
        assert ids.dtype == torch.int32 and weights.dtype == torch.float32, (ids.dtype, weights.dtype)
        assert x.is_contiguous() and w_gate_up.is_contiguous() and w_down.is_contiguous()
        return reference(x, w_gate_up, w_down, ids, weights)


@pytest.fixture
def kernel(monkeypatch):
    k = Kernel()
    monkeypatch.setattr(gtf, "_moe_ffn", k)
    return k


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(314)


# ---- packing, without transformers ------------------------------------------------------------


class Mlp(torch.nn.Module):
    """A per-expert MLP as transformers 4.5x writes it, under either naming."""

    def __init__(self, names, h, i, act=None, bias=False):
        super().__init__()
        gate, up, down = names
        setattr(self, gate, torch.nn.Linear(h, i, bias=bias))
        setattr(self, up, torch.nn.Linear(h, i, bias=bias))
        setattr(self, down, torch.nn.Linear(i, h, bias=bias))
        self.act_fn = act or torch.nn.SiLU()


@pytest.mark.parametrize("names", gtf._MLP_NAMES, ids=lambda n: "/".join(n))
def test_module_list_packs_gate_then_up_rows(names):
    h, i, e = 24, 16, 3
    experts = torch.nn.ModuleList([Mlp(names, h, i) for _ in range(e)]).to(torch.bfloat16)
    w_gate_up, w_down = gtf.pack_experts(experts)
    assert w_gate_up.shape == (e, 2 * i, h) and w_down.shape == (e, h, i)
    for k, mlp in enumerate(experts):
        gate, up, down = (getattr(mlp, n).weight for n in names)
        assert torch.equal(w_gate_up[k, :i], gate) and torch.equal(w_gate_up[k, i:], up)
        assert torch.equal(w_down[k], down)
    assert not w_gate_up.requires_grad and w_gate_up.data_ptr() != experts[0].__getattr__(names[0]).weight.data_ptr()


def test_module_list_refusals():
    names = gtf._MLP_NAMES[0]
    with pytest.raises(ValueError, match="bias"):
        gtf.pack_experts(torch.nn.ModuleList([Mlp(names, 8, 8, bias=True)]).to(torch.bfloat16))
    with pytest.raises(ValueError, match="silu"):
        gtf.pack_experts(torch.nn.ModuleList([Mlp(names, 8, 8, act=torch.nn.GELU())]).to(torch.bfloat16))
    with pytest.raises(TypeError, match="bf16 or fp16"):
        gtf.pack_experts(torch.nn.ModuleList([Mlp(names, 8, 8)]))  # float32
    ragged = torch.nn.ModuleList([Mlp(names, 8, 8), Mlp(names, 8, 16)]).to(torch.bfloat16)
    with pytest.raises(ValueError, match=r"experts\[1\]\.gate"):
        gtf.pack_experts(ragged)
    with pytest.raises(ValueError, match="none of the Linear triples"):
        gtf.pack_experts(torch.nn.ModuleList([torch.nn.Linear(8, 8)]))


# ---- the blocks, against transformers' own -------------------------------------------------------

transformers = pytest.importorskip("transformers", reason="transformers is not installed")
HOOK = gtf._experts_interface() is not None
PATHS = [pytest.param(True, id="hook", marks=pytest.mark.skipif(
            not HOOK, reason=f"transformers {transformers.__version__} has no experts interface")),
         pytest.param(False, id="swap")]
# (model, norm_topk_prob): Qwen3 both ways (Qwen3-30B-A3B renormalises; the config's default does not)
MODELS = [("qwen3", True), ("qwen3", False), ("mixtral", True)]


def outputs(result):
    """(hidden, router logits or None) of a block's result: 4.5x blocks return both."""
    return result if isinstance(result, tuple) else (result, None)


@pytest.mark.parametrize("use_hook", PATHS)
@pytest.mark.parametrize("model,norm", MODELS, ids=lambda v: str(v))
def test_block_matches_the_stock_block(kernel, model, norm, use_hook):
    stock = gtf.random_block(model, **TINY, norm_topk_prob=norm, device="cpu")
    ours = gtf.moe_block(copy.deepcopy(stock), use_hook=use_hook)
    assert isinstance(ours, gtf.GgemmSparseMoeBlock) != use_hook
    x = torch.randn(3, 7, TINY["hidden"]).to(torch.bfloat16)
    with torch.no_grad():
        want, got = stock(x.clone()), ours(x.clone())
    assert kernel.calls == 1  # the experts ran as one moe_ffn call, not the stock loop
    assert type(got) is type(want)
    (want_h, want_logits), (got_h, got_logits) = outputs(want), outputs(got)
    assert (got_logits is None) == (want_logits is None)
    if want_logits is not None:
        assert torch.equal(got_logits, want_logits)
    assert_layer(got_h, want_h, f"{model} norm={norm}")


@pytest.mark.parametrize("model,norm", MODELS, ids=lambda v: str(v))
def test_router_is_the_stock_one(model, norm):
    """The swap module's routing against the stock block's own, bit for bit:
    the 5.x router module it shares, or the 4.5x inline routing it rewrites
    (the stock experts see the same ids and weights through a spy)."""
    stock = gtf.random_block(model, **TINY, norm_topk_prob=norm, device="cpu")
    ours = gtf.GgemmSparseMoeBlock(stock)
    x = torch.randn(50, TINY["hidden"]).to(torch.bfloat16)
    logits, weights, ids = ours.route(x)
    if isinstance(stock.gate, torch.nn.Linear):
        seen = []
        for e, mlp in enumerate(stock.experts):  # 4.5x: expert e's output times the routing weight
            mlp.register_forward_hook(lambda m, inp, out, e=e: seen.append((e, inp[0].shape[0])))
        with torch.no_grad():
            stock(x[None])
        counts = torch.bincount(ids.flatten(), minlength=TINY["experts"])
        assert sorted(seen) == [(e, int(c)) for e, c in enumerate(counts) if c > 0]
        assert torch.equal(logits, stock.gate(x))
        probs = torch.softmax(logits.float(), dim=-1)
        top = torch.topk(probs, TINY["top_k"], dim=-1).values
        want = top / top.sum(-1, keepdim=True) if norm else top
        assert weights.dtype == x.dtype and torch.equal(weights, want.to(x.dtype))
    else:
        for got, want in zip((logits, weights, ids), stock.gate(x)):
            assert got.dtype == want.dtype and torch.equal(got, want)
    if not norm:
        assert (weights.float().sum(-1) < 1).all()  # the flag is read, not assumed


@pytest.mark.skipif(not HOOK, reason=f"transformers {transformers.__version__} has no experts interface")
def test_hook_switches_only_this_block(kernel):
    stock = gtf.random_block("qwen3", **TINY, device="cpu")
    other = copy.copy(stock)  # shares the experts module's config object
    shared = stock.experts.config
    ours = gtf.moe_block(copy.deepcopy(stock))
    assert ours.experts.config._experts_implementation == "ggemm"
    assert shared._experts_implementation == "eager" and other.experts.config is shared
    gtf.set_experts_implementation(ours, "eager")  # back to the stock loop: no moe_ffn call
    with torch.no_grad():
        ours(torch.randn(1, 4, TINY["hidden"]).to(torch.bfloat16))
    assert kernel.calls == 0
    with pytest.raises(ValueError, match="not registered"):
        gtf.set_experts_implementation(ours, "no_such_kernel")


@pytest.mark.skipif(not HOOK, reason=f"transformers {transformers.__version__} has no experts interface")
def test_whole_model_through_set_experts_implementation(kernel):
    """register() makes "ggemm" an implementation transformers accepts for a
    whole model: every layer's experts one moe_ffn call, logits as eager's."""
    layers = 2
    config = transformers.Qwen3MoeConfig(
        vocab_size=128, hidden_size=64, intermediate_size=64, moe_intermediate_size=32, num_experts=8,
        num_experts_per_tok=2, norm_topk_prob=True, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64)
    model = transformers.Qwen3MoeForCausalLM(config).to(torch.bfloat16).eval()
    ids = torch.randint(0, 128, (2, 9))
    model.set_experts_implementation("eager")
    with torch.no_grad():
        want = model(ids).logits
    assert gtf.register()
    model.set_experts_implementation("ggemm")
    with torch.no_grad():
        got = model(ids).logits
    assert kernel.calls == layers
    assert_layer(got, want, "Qwen3-MoE logits")


def test_block_refusals(kernel):
    stock = gtf.random_block("qwen3", **TINY, device="cpu")
    ours = gtf.moe_block(copy.deepcopy(stock), use_hook=False)
    x = torch.randn(1, 3, TINY["hidden"]).to(torch.bfloat16)
    with pytest.raises(RuntimeError, match="no backward"):
        ours(x.requires_grad_())
    ours.w_gate_up.data = ours.w_gate_up.data.half()  # experts in another dtype than the tokens
    with torch.no_grad(), pytest.raises(TypeError, match="bfloat16 differs from the expert weights' torch.float16"):
        ours(x.detach())
    assert kernel.calls == 0
    with pytest.raises(TypeError, match="no `gate` submodule"):
        gtf.moe_block(torch.nn.Linear(4, 4))
    wider = copy.deepcopy(stock)
    wider.shared_expert = torch.nn.Linear(4, 4)  # Qwen2-MoE's: ggemm's block would drop it
    with pytest.raises(ValueError, match="shared_expert"):
        gtf.moe_block(wider, use_hook=False)
    if HOOK:
        with pytest.raises(ValueError, match="bf16 or fp16"):
            gtf.moe_block(copy.deepcopy(stock).float())
    else:
        with pytest.raises(ValueError, match="use_hook=True"):
            gtf.moe_block(stock, use_hook=True)


def test_cpu_tokens_reach_ggemm_and_are_refused():
    """Without the reference in its place, the experts call ggemm's operator,
    which names the problem (no library or GPU needed to say so)."""
    ours = gtf.moe_block(gtf.random_block("qwen3", **TINY, device="cpu"), use_hook=False)
    with torch.no_grad(), pytest.raises(ValueError, match="ggemm needs CUDA tensors"):
        ours(torch.randn(1, 2, TINY["hidden"]).to(torch.bfloat16))
