"""ggemm for Hugging Face transformers: a sparse MoE block whose experts run as one ggemm.moe_ffn call.

    import ggemm.transformers as gtf
    block = gtf.moe_block(block)      # a Qwen3MoeSparseMoeBlock or MixtralSparseMoeBlock, bf16/fp16 on CUDA

    gtf.register()                    # transformers with an experts interface (5.x): a whole model
    model.set_experts_implementation("ggemm")   # or from_pretrained(..., experts_implementation="ggemm")

The router is the block's own (softmax in fp32, top-k, the block's
normalisation and dtype cast, router logits returned when the block returns
them); only the experts change: one ggemm.moe_ffn call (through
ggemm.torch, so torch.compile(fullgraph=True) keeps it) on weights in ggemm's
layout, w_gate_up [E, 2I, H] (gate rows, then up rows) and w_down [E, H, I].

Two kinds of transformers block, detected, not assumed from a version number:

- experts fused into 3-D parameters `gate_up_proj` [E, 2I, H] and `down_proj`
  [E, H, I] behind transformers' experts-implementation hook
  (`@use_experts_implementation`, transformers 5.x): ggemm registers itself
  as the implementation "ggemm", and `moe_block` points only this block's
  experts at it (they get a config of their own), patching the block in place.
  The fused parameters already are ggemm's layout: nothing is copied.
- experts as a ModuleList of gate/up/down Linear layers (transformers 4.5x:
  Qwen3MoeMLP's gate_proj/up_proj/down_proj, Mixtral's w1/w3/w2): `moe_block`
  returns a GgemmSparseMoeBlock that shares the block's router and holds the
  expert weights packed once into ggemm's layout; the block's forward
  (routing inline on a Linear gate, output `(hidden, router_logits)`) is
  reproduced op for op. Fused experts without the hook get the same module,
  over the fused parameters as they are.

Inference only: moe_ffn has no backward, so a call that autograd would have to
record raises instead of returning an output with no gradient.
"""

from __future__ import annotations

import copy
from typing import Any, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import torch as _gt

__all__ = [
    "EXPERTS_IMPLEMENTATION",
    "GgemmSparseMoeBlock",
    "experts_forward",
    "moe_block",
    "pack_experts",
    "random_block",
    "register",
    "set_experts_implementation",
]

EXPERTS_IMPLEMENTATION = "ggemm"  # the name in transformers' experts interface

_DTYPES = (torch.bfloat16, torch.float16)  # what ggemm's MoE layer runs
# Per-expert MLPs of the ModuleList layout: (gate, up, down) Linear names.
_MLP_NAMES = (("gate_proj", "up_proj", "down_proj"),  # Qwen3MoeMLP (and Qwen2/OLMoE-style MLPs)
              ("w1", "w3", "w2"))                     # MixtralBlockSparseTop2MLP: silu(w1 x) * w3 x, then w2


def _moe_ffn(x: Tensor, w_gate_up: Tensor, w_down: Tensor, ids: Tensor, weights: Tensor) -> Tensor:
    """The experts' kernel, a module-level name so that a CPU test can put a
    reference of the same math in its place (ggemm itself needs a GPU)."""
    return _gt.moe_ffn(x, w_gate_up, w_down, ids, weights)


def _run_experts(x: Tensor, w_gate_up: Tensor, w_down: Tensor, top_k_index: Tensor, top_k_weights: Tensor) -> Tensor:
    """[T, H] = sum_j w[t, j] * down_e(silu(gate_e(x)) * up_e(x)): the stock
    experts' result, in x's dtype, as one moe_ffn call."""
    if torch.is_grad_enabled() and (x.requires_grad or w_gate_up.requires_grad or w_down.requires_grad):
        raise RuntimeError(
            "ggemm's MoE experts have no backward: run the block under torch.no_grad() or torch.inference_mode() "
            "(or set requires_grad=False on its inputs and expert weights)"
        )
    if x.dtype != w_gate_up.dtype:
        # The stock block fails too (F.linear of mixed dtypes); say which.
        raise TypeError(f"hidden_states: dtype {x.dtype} differs from the expert weights' {w_gate_up.dtype}")
    # The router gives int64 ids and weights in the logits' dtype (Qwen3) or
    # fp32 (Mixtral 5.x); ggemm takes int32 and fp32. A bf16 weight is exact in fp32.
    return _moe_ffn(x.contiguous(), w_gate_up, w_down, top_k_index.to(torch.int32).contiguous(),
                    top_k_weights.to(torch.float32).contiguous())


# ---- what a block holds ------------------------------------------------------------------


# What transformers calls silu, and the experts' default gating: looked up
# once (not per call, which torch.compile would have to trace through).
_SILU_TYPES: Tuple[type, ...] = (nn.SiLU,)
_DEFAULT_APPLY_GATE: Any = None
_looked_up = False


def _look_up_transformers() -> None:
    global _SILU_TYPES, _DEFAULT_APPLY_GATE, _looked_up
    if _looked_up:
        return
    try:
        from transformers.activations import SiLUActivation  # ACT2FN["silu"] in 4.5x and 5.x
        _SILU_TYPES = (nn.SiLU, SiLUActivation)
    except ImportError:
        pass
    try:  # 5.x: what silu(gate) * up is; a class with its own (e.g. a clamped SwiGLU) overrides it
        from transformers.integrations.moe import _default_apply_gate
        _DEFAULT_APPLY_GATE = _default_apply_gate
    except ImportError:
        pass
    _looked_up = True


def _is_silu(act: Any) -> bool:
    return isinstance(act, _SILU_TYPES) or act is F.silu


def _need_silu(act: Any, where: str) -> None:
    if not _is_silu(act):
        raise ValueError(f"{where}: activation {act!r}; ggemm's MoE layer computes silu(gate) * up only")


def _fused_problem(experts: nn.Module) -> Optional[str]:
    """Why fused experts [E, 2I, H] / [E, H, I] cannot run as moe_ffn, or None.
    The flags are those transformers' @use_experts_implementation sets; a class
    without them is the plain concatenated, untransposed layout."""
    gate_up, down = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
    if not (isinstance(gate_up, Tensor) and isinstance(down, Tensor) and gate_up.dim() == 3 and down.dim() == 3):
        return "no 3-D gate_up_proj and down_proj parameters"
    for flag, want in (("has_gate", True), ("has_bias", False), ("is_transposed", False),
                       ("is_concatenated", True), ("has_post_expert_norm", False), ("_is_expert_parallel", False)):
        if getattr(experts, flag, want) != want:
            return f"{flag}={getattr(experts, flag)} (ggemm runs {flag}={want})"
    apply_gate = getattr(type(experts), "_apply_gate", None)
    if _DEFAULT_APPLY_GATE is not None and apply_gate is not None and apply_gate is not _DEFAULT_APPLY_GATE:
        return f"{type(experts).__name__} overrides _apply_gate"
    if not _is_silu(getattr(experts, "act_fn", None)):
        return f"activation {getattr(experts, 'act_fn', None)!r}, not silu"
    if gate_up.dtype not in _DTYPES:
        return f"weights in {gate_up.dtype}; ggemm runs bf16 or fp16 (convert the block with .to(torch.bfloat16))"
    return None


def pack_experts(experts: nn.Module) -> Tuple[Tensor, Tensor]:
    """The experts' weights in ggemm's layout: (w_gate_up [E, 2I, H], gate rows
    then up rows; w_down [E, H, I]), detached.

    Fused 3-D parameters are that layout already and come back as they are
    (a copy only if not contiguous); a ModuleList of gate/up/down Linear layers
    is copied once into two new tensors on the weights' device."""
    _look_up_transformers()
    if isinstance(experts, nn.ModuleList):
        return _pack_module_list(experts)
    problem = _fused_problem(experts)
    if problem:
        raise ValueError(f"{type(experts).__name__}: {problem}")
    return experts.gate_up_proj.detach().contiguous(), experts.down_proj.detach().contiguous()


def _mlp_linears(mlp: nn.Module, e: int) -> Tuple[nn.Linear, nn.Linear, nn.Linear]:
    for names in _MLP_NAMES:
        layers = [getattr(mlp, name, None) for name in names]
        if all(isinstance(layer, nn.Linear) for layer in layers):
            if any(layer.bias is not None for layer in layers):
                raise ValueError(f"experts[{e}]: Linear layers with a bias; ggemm's MoE layer has none")
            _need_silu(getattr(mlp, "act_fn", None), f"experts[{e}]")
            return layers[0], layers[1], layers[2]
    raise ValueError(f"experts[{e}]: {type(mlp).__name__} has none of the Linear triples "
                     f"{', '.join('/'.join(names) for names in _MLP_NAMES)}")


@torch.no_grad()
def _pack_module_list(experts: nn.ModuleList) -> Tuple[Tensor, Tensor]:
    mlps = [_mlp_linears(mlp, e) for e, mlp in enumerate(experts)]
    if not mlps:
        raise ValueError("experts: an empty ModuleList")
    gate0, _, down0 = mlps[0]
    i, h = gate0.weight.shape
    ref = gate0.weight
    if ref.dtype not in _DTYPES:
        raise TypeError(f"experts: weights in {ref.dtype}; ggemm runs bf16 or fp16 (convert the block with "
                        ".to(torch.bfloat16))")
    # Filled expert by expert: stacking per-expert concatenations would hold a
    # second copy of every weight at once.
    w_gate_up = torch.empty((len(mlps), 2 * i, h), dtype=ref.dtype, device=ref.device)
    w_down = torch.empty((len(mlps), h, i), dtype=ref.dtype, device=ref.device)
    for e, (gate, up, down) in enumerate(mlps):
        for name, layer, want in (("gate", gate, (i, h)), ("up", up, (i, h)), ("down", down, (h, i))):
            if tuple(layer.weight.shape) != want or layer.weight.dtype != ref.dtype or layer.weight.device != ref.device:
                raise ValueError(f"experts[{e}].{name}: weight {tuple(layer.weight.shape)} {layer.weight.dtype} on "
                                 f"{layer.weight.device}; expert 0's give {want} {ref.dtype} on {ref.device}")
        w_gate_up[e, :i].copy_(gate.weight)
        w_gate_up[e, i:].copy_(up.weight)
        w_down[e].copy_(down.weight)
    return w_gate_up, w_down


# ---- transformers' experts-implementation hook ------------------------------------------------


def _experts_interface() -> Any:
    """transformers' ExpertsInterface class, or None where this transformers has none."""
    try:
        from transformers.integrations.moe import ExpertsInterface
    except ImportError:
        return None
    return ExpertsInterface


def experts_forward(self: nn.Module, hidden_states: Tensor, top_k_index: Tensor, top_k_weights: Tensor) -> Tensor:
    """The experts implementation "ggemm": the signature transformers' experts
    interface calls (self: the fused experts module)."""
    problem = _fused_problem(self)  # attribute reads: constants under torch.compile
    if problem:
        raise ValueError(f"experts_implementation='{EXPERTS_IMPLEMENTATION}': {type(self).__name__}: {problem}")
    return _run_experts(hidden_states, self.gate_up_proj, self.down_proj, top_k_index, top_k_weights)


def register() -> bool:
    """Registers "ggemm" in transformers' experts interface, so that
    `model.set_experts_implementation("ggemm")` or
    `from_pretrained(..., experts_implementation="ggemm")` runs every MoE layer of
    a model on ggemm. False (nothing registered) where transformers has no such
    interface (4.5x): use moe_block on each block there."""
    interface = _experts_interface()
    if interface is None:
        return False
    _look_up_transformers()
    interface.register(EXPERTS_IMPLEMENTATION, experts_forward)
    return True


def _has_hook(experts: nn.Module) -> bool:
    """Whether the experts dispatch through transformers' interface: the
    decorator gives them a config, read on every call, and layout flags."""
    return _experts_interface() is not None and hasattr(experts, "config") and hasattr(experts, "is_concatenated")


# ---- the module swap ---------------------------------------------------------------------------


class GgemmSparseMoeBlock(nn.Module):
    """A transformers sparse MoE block with its experts on ggemm: the block's
    own router, the experts' weights in ggemm's layout (parameters without
    gradient), the block's outputs. Built by moe_block."""

    def __init__(self, block: nn.Module) -> None:
        super().__init__()
        extra = sorted(set(name for name, _ in block.named_children()) - {"gate", "experts"})
        if extra:  # e.g. Qwen2-MoE's shared expert: its output would be missing
            raise ValueError(f"{type(block).__name__}: submodules {extra} besides gate and experts; ggemm's block "
                             "computes the routed experts only")
        self.gate = block.gate  # shared, not copied: the router is the block's own
        # 4.5x blocks route inline on a Linear gate and return (hidden, router_logits);
        # 5.x routers are modules returning (logits, weights, ids), the block only hidden.
        self.inline_router = isinstance(block.gate, nn.Linear)
        if self.inline_router:
            self.top_k = int(block.top_k)
            # Mixtral's block has no flag: it always renormalises the top-k.
            self.norm_topk_prob = bool(getattr(block, "norm_topk_prob", True))
        self.jitter_noise = float(getattr(block, "jitter_noise", 0.0) or 0.0)  # Mixtral, training mode only
        w_gate_up, w_down = pack_experts(block.experts)
        self.w_gate_up = nn.Parameter(w_gate_up, requires_grad=False)
        self.w_down = nn.Parameter(w_down, requires_grad=False)
        self.num_experts = w_gate_up.shape[0]

    def route(self, x: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """(router logits, top-k weights, top-k ids) as the stock block computes them."""
        if not self.inline_router:
            return self.gate(x)
        # transformers 4.5x Qwen3MoeSparseMoeBlock / MixtralSparseMoeBlock, op for op.
        logits = self.gate(x)
        probs = F.softmax(logits, dim=1, dtype=torch.float)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)
        if self.norm_topk_prob:
            weights /= weights.sum(dim=-1, keepdim=True)
        return logits, weights.to(x.dtype), ids

    def forward(self, hidden_states: Tensor) -> Any:
        batch, seq, hidden = hidden_states.shape
        if self.training and self.jitter_noise > 0:  # as the stock block: in place
            hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - self.jitter_noise, 1.0 + self.jitter_noise)
        x = hidden_states.view(-1, hidden)
        logits, weights, ids = self.route(x)
        out = _run_experts(x, self.w_gate_up, self.w_down, ids, weights).reshape(batch, seq, hidden)
        return (out, logits) if self.inline_router else out

    def extra_repr(self) -> str:
        e, two_i, h = self.w_gate_up.shape
        return f"experts={e}, hidden={h}, intermediate={two_i // 2}, on ggemm.moe_ffn"


def moe_block(block: nn.Module, *, use_hook: Optional[bool] = None) -> nn.Module:
    """`block` (a transformers sparse MoE block: Qwen3MoeSparseMoeBlock,
    MixtralSparseMoeBlock) with its experts on ggemm; same inputs, same outputs.

    use_hook None (default): through transformers' experts-implementation hook
    where the block's experts have it (the block itself comes back, its experts
    given a private config naming "ggemm"; other layers sharing the model's
    config are untouched), else a GgemmSparseMoeBlock (a new module; `block` is
    left as it was). True / False force one or the other (True raises where
    there is no hook). Weights must be bf16 or fp16; raises ValueError or
    TypeError naming what does not fit.
    """
    for name in ("gate", "experts"):
        if not isinstance(getattr(block, name, None), nn.Module):
            raise TypeError(f"{type(block).__name__}: no `{name}` submodule; expected a transformers sparse MoE block "
                            "(Qwen3MoeSparseMoeBlock, MixtralSparseMoeBlock)")
    _look_up_transformers()
    experts = block.experts
    hook = _has_hook(experts)
    if use_hook is None:
        use_hook = hook
    if not use_hook:
        return GgemmSparseMoeBlock(block)
    if not hook:
        raise ValueError(f"use_hook=True: {type(experts).__name__} does not dispatch through transformers' experts "
                         "interface (transformers 5.x's @use_experts_implementation)")
    problem = _fused_problem(experts)
    if problem:
        raise ValueError(f"{type(experts).__name__}: {problem}")
    register()
    set_experts_implementation(block, EXPERTS_IMPLEMENTATION)
    return block


def set_experts_implementation(block: nn.Module, name: str) -> None:
    """Points this block's experts, and only them, at implementation `name` of
    transformers' experts interface ("eager", "grouped_mm", "ggemm" once
    registered, ...). The experts' config is the model's, shared by every
    layer: the block's experts get a copy of their own (small, no tensors)."""
    experts = getattr(block, "experts", None)
    if experts is None or not _has_hook(experts):
        raise ValueError(f"{type(block).__name__}: its experts do not dispatch through transformers' experts interface")
    interface = _experts_interface()
    if name != "eager" and name not in interface():
        raise ValueError(f"experts implementation {name!r} is not registered (known: {sorted(interface())})")
    config = copy.deepcopy(experts.config)
    config._experts_implementation = name
    experts.config = config


# ---- blocks to try it on ---------------------------------------------------------------------

# model: (modeling module, block class, config class, config kwargs from (hidden, intermediate, experts, top_k, norm))
_MODELS = {
    "qwen3": ("transformers.models.qwen3_moe.modeling_qwen3_moe", "Qwen3MoeSparseMoeBlock", "Qwen3MoeConfig",
              lambda h, i, e, k, norm: dict(hidden_size=h, moe_intermediate_size=i, num_experts=e,
                                            num_experts_per_tok=k, norm_topk_prob=norm)),
    # Mixtral always renormalises its top-k: norm is not one of its options.
    "mixtral": ("transformers.models.mixtral.modeling_mixtral", "MixtralSparseMoeBlock", "MixtralConfig",
                lambda h, i, e, k, norm: dict(hidden_size=h, intermediate_size=i, num_local_experts=e,
                                              num_experts_per_tok=k)),
}


@torch.no_grad()
def random_block(model: str, *, hidden: int, intermediate: int, experts: int, top_k: int,
                 norm_topk_prob: bool = True, dtype: torch.dtype = torch.bfloat16, device: Any = "cuda",
                 seed: int = 0) -> nn.Module:
    """A stock transformers sparse MoE block ("qwen3": Qwen3MoeSparseMoeBlock,
    "mixtral": MixtralSparseMoeBlock) from a config built here (nothing
    downloaded), random weights of a trained model's scale (normal, std
    fan_in^-1/2: router logits and layer outputs of order 1), in eval mode;
    for tests, examples and benchmarks. E.g. Qwen3-30B-A3B's layer:
    random_block("qwen3", hidden=2048, intermediate=768, experts=128, top_k=8)."""
    import importlib

    import transformers

    if model not in _MODELS:
        raise ValueError(f"model: {model!r}; one of {sorted(_MODELS)}")
    module, block_name, config_name, kwargs = _MODELS[model]
    config = getattr(transformers, config_name)(**kwargs(hidden, intermediate, experts, top_k, norm_topk_prob))
    if _experts_interface() is not None:
        # A block outside a model has no implementation chosen: say "eager" (the
        # stock loop), which is what transformers falls back to with a warning.
        config._experts_implementation = "eager"
    with torch.device(device):  # made where it runs: Mixtral-sized weights are GBs
        block = getattr(importlib.import_module(module), block_name)(config)
    block.to(dtype)
    gen = torch.Generator(device=block.gate.weight.device).manual_seed(seed)
    for param in block.parameters():
        param.copy_(torch.randn(param.shape, generator=gen, device=param.device) * param.shape[-1] ** -0.5)
    return block.eval()
