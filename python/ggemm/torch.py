"""ggemm for PyTorch: operators that torch.compile keeps and CUDA graphs capture.

    import ggemm.torch                      # registers torch.ops.ggemm.*
    out = ggemm.torch.grouped_mm(x, w.transpose(-2, -1), offs)   # as torch._grouped_mm(x, w.mT, offs)
    y = ggemm.torch.moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights)   # the whole MoE layer

Importing this module (it needs torch; the rest of the package does not)
registers operators with fake (meta) implementations, so
`torch.compile(fullgraph=True)` traces through them:

    torch.ops.ggemm.grouped_mm(a, b, offs, out_dtype)    -> Tensor   (torch._grouped_mm's semantics, autograd)
    torch.ops.ggemm.grouped_matmul(a, b, out, a_offsets, expert_ids, usage_stats,
                                   transpose_b, epilogue, row_scale, max_rows_per_group,
                                   a_row_index)                                              (writes out)
    torch.ops.ggemm.lora_shrink_qkv(x, lora_a, p, a_offsets, adapter_ids, usage_stats,
                                    scale, accumulate, max_rows_per_group)                   (writes p)
    torch.ops.ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats,
                                    scale, accumulate, max_rows_per_group)                   (writes q_out, kv_out)
    torch.ops.ggemm.moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights,
                            first_expert, num_experts)                               -> Tensor [T, H]
    torch.ops.ggemm.moe_route(topk_ids, topk_weights, num_experts, first_expert,
                              local_experts)                                         -> 7 Tensors (MoeRouting)
    torch.ops.ggemm.moe_combine(y, slot_row, out_dtype)                              -> Tensor [T, H]

The operators take torch tensors only and fill the C argument structs
straight from them (pointers, shapes, the current stream), which keeps the
host time of a call low; the checks the C library makes (ranges, alignment,
multiples of 8) are left to it, so its message is the one raised. They are
registered with torch.library.Library (schema, CUDA kernel, fake), not
torch.library.custom_op, whose Python wrappers around each call (autograd,
version counters, an aliasing check) cost several times the call itself
(docs/performance.md): the CUDA kernels bump the version counters of what
they write themselves, and the ops with no gradient raise on backward as
custom_op's would.
"""

from __future__ import annotations

import ctypes
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from . import _capi, _core, _moe, _torch_args
from ._capi import Dtype, LoraExpandQkvArgs, LoraShrinkQkvArgs
from ._workspace import TorchBackend

__all__ = ["grouped_mm", "moe_combine", "moe_ffn", "moe_route"]

_TORCH_MEMORY = TorchBackend()

_OPERAND = {torch.bfloat16: Dtype.BF16, torch.float16: Dtype.FP16}
_OUTPUT = {torch.bfloat16: Dtype.BF16, torch.float16: Dtype.FP16, torch.float32: Dtype.FP32}
_INDEX = (torch.int32, torch.uint32)


# ---- torch tensors straight into the C structs (grouped_matmul's: _torch_args) ----


def _need(t: Tensor, name: str, ndim: int, dtypes, device: int) -> None:
    """What the library cannot check from a bare pointer: rank, dtype, packing,
    device (a CUDA ordinal). Cheap attribute reads only: this runs on every call."""
    if t.dim() != ndim:
        raise ValueError(f"{name}: expected {ndim}-D, got shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        raise TypeError(f"{name}: dtype {t.dtype} is not allowed here ({', '.join(str(d) for d in dtypes)})")
    if not t.is_contiguous():
        raise ValueError(f"{name}: ggemm needs a contiguous (row-major) tensor; got strides {t.stride()}")
    if t.get_device() != device:
        raise ValueError(f"{name} is on {t.device}, the output on cuda:{device}")


def _cuda_ordinal(t: Tensor, name: str) -> int:
    device = t.get_device()
    if device < 0:
        raise ValueError(f"{name}: ggemm needs CUDA tensors; this one is on {t.device}")
    return device


def _routing(args, offsets: Tensor, ids: Tensor, ids_field: str, usage: Tensor, max_rows: int, device) -> None:
    _need(offsets, "a_offsets", 1, _INDEX, device)
    _need(ids, ids_field, 1, (torch.int32,), device)
    _need(usage, "usage_stats", 1, _INDEX, device)
    groups = offsets.shape[0] - 1
    if groups < 1 or ids.shape[0] < groups or usage.shape[0] < 2:
        raise ValueError(
            f"routing arrays: a_offsets has {offsets.shape[0]} entries (num_groups + 1 >= 2), "
            f"{ids_field} {ids.shape[0]} (>= num_groups), usage_stats {usage.shape[0]} (>= 2)"
        )
    args.a_offsets = offsets.data_ptr()
    setattr(args, ids_field, ids.data_ptr())
    args.expert_usage_stats = usage.data_ptr()
    args.num_groups = groups
    args.max_rows_per_group = int(max_rows)


# Per device: the default handle's raw pointer (the handle lives as long as
# the process: _core.default_handle).
_handle_ptrs: Dict[int, int] = {}


def _call(function: str, args, device: int, workspace: bool = False) -> None:
    """The library call on the device's default handle and PyTorch's current
    stream; with `workspace`, the MoE calls' scratch from the package's cache
    (or, under graph capture, from the graph's pool: _workspace)."""
    handle = _handle_ptrs.get(device)
    if handle is None:
        handle = _handle_ptrs.setdefault(device, _core.default_handle(device).ptr)
    stream = torch._C._cuda_getCurrentRawStream(device)  # what inductor's generated code reads
    keep = _moe.attach_workspace(args, _TORCH_MEMORY, device, stream) if workspace else None
    status = _capi.require_function(_capi.load_library(), function)(handle, ctypes.byref(args), stream or None)
    del keep  # enqueued: the buffer may go (see _workspace)
    if status:
        _core.check(status)


def _grouped_matmul_impl(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b=True, epilogue="store",
                         row_scale=None, max_rows_per_group=0, a_row_index=None, group_ends=None) -> None:
    """ggemm.grouped_matmul's call on the current stream and the default
    handle: the fast path (_torch_args) when its quick checks pass, else the
    general one, which runs the call or says what is wrong with it."""
    if not _torch_args.grouped_matmul(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b, epilogue,
                                      row_scale, None, max_rows_per_group, a_row_index=a_row_index,
                                      group_ends=group_ends):
        _core._grouped_matmul_general(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b=transpose_b,
                                      epilogue=epilogue, row_scale=row_scale, max_rows_per_group=max_rows_per_group,
                                      a_row_index=a_row_index, group_ends=group_ends)


def _lora_common(args, scale: float, accumulate: bool, a_offsets, adapter_ids, usage_stats, max_rows, dev) -> None:
    args.scale = float(scale)
    args.accumulate = 1 if accumulate else 0
    _routing(args, a_offsets, adapter_ids, "adapter_ids", usage_stats, max_rows, dev)


def _lora_shrink_impl(x, lora_a, p, a_offsets, adapter_ids, usage_stats, scale, accumulate, max_rows) -> None:
    dev = _cuda_ordinal(p, "p")
    _need(x, "x", 2, _OPERAND, dev)
    _need(lora_a, "lora_a", 3, _OPERAND, dev)
    _need(p, "p", 3, _OUTPUT, dev)
    planes, m, rank = p.shape
    if planes != 3 or x.shape[0] != m or tuple(lora_a.shape[1:]) != (3 * rank, x.shape[1]) or lora_a.dtype != x.dtype:
        raise ValueError(f"shapes: x {tuple(x.shape)}, lora_a {tuple(lora_a.shape)}, p {tuple(p.shape)} do not fit "
                         "x [M, K], lora_a [G, 3R, K] (x's dtype), p [3, M, R]")
    args = LoraShrinkQkvArgs()
    args.x_dtype, args.p_dtype = _OPERAND[x.dtype], _OUTPUT[p.dtype]
    args.m, args.k, args.rank, args.num_adapters = m, x.shape[1], rank, lora_a.shape[0]
    args.x, args.lora_a, args.p = x.data_ptr(), lora_a.data_ptr(), p.data_ptr()
    _lora_common(args, scale, accumulate, a_offsets, adapter_ids, usage_stats, max_rows, dev)
    _call("ggemm_lora_shrink_qkv", args, dev)


def _lora_expand_impl(p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats, scale, accumulate,
                      max_rows) -> None:
    dev = _cuda_ordinal(q_out, "q_out")
    _need(p, "p", 3, _OPERAND, dev)
    _need(lora_b, "lora_b", 3, _OPERAND, dev)
    _need(q_out, "q_out", 2, _OUTPUT, dev)
    _need(kv_out, "kv_out", 2, _OUTPUT, dev)
    planes, m, rank = p.shape
    q_dim, kv_dim = q_out.shape[1], kv_out.shape[1]
    if (planes != 3 or q_out.shape[0] != m or kv_out.shape[0] != 2 * m or kv_out.dtype != q_out.dtype
            or tuple(lora_b.shape[1:]) != (q_dim + 2 * kv_dim, rank) or lora_b.dtype != p.dtype):
        raise ValueError(f"shapes: p {tuple(p.shape)}, lora_b {tuple(lora_b.shape)}, q_out {tuple(q_out.shape)}, "
                         f"kv_out {tuple(kv_out.shape)} do not fit p [3, M, R], lora_b [G, q + 2 kv, R], "
                         "q_out [M, q], kv_out [2M, kv] (one output dtype)")
    args = LoraExpandQkvArgs()
    args.p_dtype, args.out_dtype = _OPERAND[p.dtype], _OUTPUT[q_out.dtype]
    args.m, args.rank, args.q_dim, args.kv_dim, args.num_adapters = m, rank, q_dim, kv_dim, lora_b.shape[0]
    args.p, args.lora_b, args.q_out, args.kv_out = p.data_ptr(), lora_b.data_ptr(), q_out.data_ptr(), kv_out.data_ptr()
    _lora_common(args, scale, accumulate, a_offsets, adapter_ids, usage_stats, max_rows, dev)
    _call("ggemm_lora_expand_qkv", args, dev)


# ---- the operators --------------------------------------------------------------

# One library fragment holds every registration of the namespace; the
# registrations last as long as it does (the module's lifetime).
_LIB = torch.library.Library("ggemm", "FRAGMENT")
_bump_version = torch.autograd.graph.increment_version  # what in-place torch ops do to what they write


def _define(name: str, schema: str, kernel, fake) -> None:
    """ggemm::name with `schema` (arguments written marked (a!), for
    torch.compile's functionalization), `kernel` as its CUDA kernel (called by
    the dispatcher as it is) and `fake` for tracing (FakeTensor and meta)."""
    _LIB.define(name + schema, tags=(torch.Tag.pt2_compliant_tag,))
    _LIB.impl(name, kernel, "CUDA")
    torch.library.register_fake(f"ggemm::{name}", fake, lib=_LIB)


def _no_gradient(name: str) -> None:
    """An op with tensor outputs and no gradient formula: backward through it
    raises (torch's fallback would only warn and give no gradient)."""

    def backward(ctx, *grads):
        raise RuntimeError(f"ggemm::{name} has no gradient: it is not differentiable (no autograd formula)")

    torch.library.register_autograd(f"ggemm::{name}", backward, lib=_LIB)


def _grouped_matmul_kernel(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b=True, epilogue="store",
                           row_scale=None, max_rows_per_group=0, a_row_index=None) -> None:
    _bump_version(out)
    _grouped_matmul_impl(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b, epilogue, row_scale,
                         max_rows_per_group, a_row_index)


def _lora_shrink_kernel(x, lora_a, p, a_offsets, adapter_ids, usage_stats, scale=1.0, accumulate=False,
                        max_rows_per_group=0) -> None:
    _bump_version(p)
    _lora_shrink_impl(x, lora_a, p, a_offsets, adapter_ids, usage_stats, scale, accumulate, max_rows_per_group)


def _lora_expand_kernel(p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats, scale=1.0, accumulate=False,
                        max_rows_per_group=0) -> None:
    _bump_version(q_out)
    _bump_version(kv_out)
    _lora_expand_impl(p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats, scale, accumulate,
                      max_rows_per_group)


def _writes_only(*args, **kwargs) -> None:
    return None


_define("grouped_matmul",
        "(Tensor a, Tensor b, Tensor(a!) out, Tensor a_offsets, Tensor expert_ids, Tensor usage_stats, "
        "bool transpose_b=True, str epilogue=\"store\", Tensor? row_scale=None, SymInt max_rows_per_group=0, "
        "Tensor? a_row_index=None) -> ()",
        _grouped_matmul_kernel, _writes_only)
_define("lora_shrink_qkv",
        "(Tensor x, Tensor lora_a, Tensor(a!) p, Tensor a_offsets, Tensor adapter_ids, Tensor usage_stats, "
        "float scale=1., bool accumulate=False, SymInt max_rows_per_group=0) -> ()",
        _lora_shrink_kernel, _writes_only)
_define("lora_expand_qkv",
        "(Tensor p, Tensor lora_b, Tensor(a!) q_out, Tensor(b!) kv_out, Tensor a_offsets, Tensor adapter_ids, "
        "Tensor usage_stats, float scale=1., bool accumulate=False, SymInt max_rows_per_group=0) -> ()",
        _lora_expand_kernel, _writes_only)


# ---- the MoE layer --------------------------------------------------------------

_FLOAT32, _INT32 = (torch.float32,), (torch.int32,)


def _routing_inputs(topk_ids: Tensor, topk_weights: Tensor, dev: int) -> Tuple[int, int]:
    _need(topk_ids, "topk_ids", 2, _INT32, dev)
    _need(topk_weights, "topk_weights", 2, _FLOAT32, dev)
    return _moe.routing_dims(topk_ids.shape, topk_weights.shape)


def _moe_ffn_impl(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert=0, num_experts=None) -> Tensor:
    """The fast path (_torch_args) when its quick checks pass, else the
    checks that say what is wrong, and the call."""
    out = _torch_args.moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights, None, first_expert, num_experts)
    if out is not None:
        return out
    dev = _cuda_ordinal(x, "x")
    _need(x, "x", 2, _OPERAND, dev)
    _need(w_gate_up, "w_gate_up", 3, (x.dtype,), dev)
    _need(w_down, "w_down", 3, (x.dtype,), dev)
    _routing_inputs(topk_ids, topk_weights, dev)
    dims = _moe.moe_ffn_dims(x.shape, w_gate_up.shape, w_down.shape, topk_ids.shape, topk_weights.shape)
    n_experts, first = _moe.expert_range(dims.local_experts, first_expert, num_experts)
    out = torch.empty((dims.tokens, dims.hidden), dtype=x.dtype, device=x.device)
    args = _moe.ffn_struct(dims, _OPERAND[x.dtype], n_experts, first)
    args.x, args.w_gate_up, args.w_down = x.data_ptr(), w_gate_up.data_ptr(), w_down.data_ptr()
    args.topk_ids, args.topk_weights, args.out = topk_ids.data_ptr(), topk_weights.data_ptr(), out.data_ptr()
    _call("ggemm_moe_ffn", args, dev, workspace=True)
    return out


def _routing_outputs(topk_ids: Tensor, num_experts: int, first_expert: int, local_experts: Optional[int]):
    """(local expert count, {name: (shape, dtype)}) of moe_route's outputs."""
    local = num_experts - first_expert if local_experts is None else local_experts
    layout = _moe.routing_layout(topk_ids.shape[0], topk_ids.shape[1], local)
    return local, {name: (shape, getattr(torch, dtypes[0])) for name, (shape, dtypes) in layout.items()}


def _moe_route_impl(topk_ids, topk_weights, num_experts, first_expert=0, local_experts=None) -> Tuple[Tensor, ...]:
    dev = _cuda_ordinal(topk_ids, "topk_ids")
    t, k = _routing_inputs(topk_ids, topk_weights, dev)
    local, layout = _routing_outputs(topk_ids, num_experts, first_expert, local_experts)
    outs = {name: torch.empty(shape, dtype=dtype, device=topk_ids.device) for name, (shape, dtype) in layout.items()}
    args = _moe.route_struct(t, k, num_experts, first_expert, local)
    args.topk_ids, args.topk_weights = topk_ids.data_ptr(), topk_weights.data_ptr()
    for name, tensor in outs.items():
        setattr(args, _moe.route_field(name), tensor.data_ptr())
    _call("ggemm_moe_route", args, dev, workspace=True)
    return tuple(outs.values())


def _moe_combine_impl(y, slot_row, out_dtype=None) -> Tensor:
    dev = _cuda_ordinal(y, "y")
    _need(y, "y", 2, _OPERAND, dev)
    _need(slot_row, "slot_row", 2, _INT32, dev)
    t, k = slot_row.shape
    out = torch.empty((t, y.shape[1]), dtype=out_dtype or y.dtype, device=y.device)
    if out.dtype not in (y.dtype, torch.float32):
        raise TypeError(f"out_dtype: {out.dtype} is neither y's dtype ({y.dtype}) nor torch.float32")
    args = _moe.combine_struct(_OPERAND[y.dtype], _OUTPUT[out.dtype], t, k, y.shape[1], y.shape[0], False)
    args.y, args.slot_row, args.out = y.data_ptr(), slot_row.data_ptr(), out.data_ptr()
    _call("ggemm_moe_combine", args, dev)
    return out


def _moe_ffn_fake(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert=0, num_experts=None):
    return x.new_empty((x.shape[0], x.shape[1]))


def _moe_route_fake(topk_ids, topk_weights, num_experts, first_expert=0, local_experts=None):
    _, layout = _routing_outputs(topk_ids, num_experts, first_expert, local_experts)
    return tuple(topk_ids.new_empty(shape, dtype=dtype) for shape, dtype in layout.values())


def _moe_combine_fake(y, slot_row, out_dtype=None):
    return y.new_empty((slot_row.shape[0], y.shape[1]), dtype=out_dtype or y.dtype)


_define("moe_ffn",
        "(Tensor x, Tensor w_gate_up, Tensor w_down, Tensor topk_ids, Tensor topk_weights, SymInt first_expert=0, "
        "SymInt? num_experts=None) -> Tensor",
        _moe_ffn_impl, _moe_ffn_fake)
_define("moe_route",
        "(Tensor topk_ids, Tensor topk_weights, SymInt num_experts, SymInt first_expert=0, "
        "SymInt? local_experts=None) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
        _moe_route_impl, _moe_route_fake)
_define("moe_combine", "(Tensor y, Tensor slot_row, ScalarType? out_dtype=None) -> Tensor", _moe_combine_impl,
        _moe_combine_fake)
for _name in ("moe_ffn", "moe_route", "moe_combine"):
    _no_gradient(_name)


def _eager() -> bool:
    """Whether a call may skip the operator's dispatch (~20 us of host time on
    the H200): not while torch.compile traces it. The MoE operators have no
    autograd, so gradients are not a reason to dispatch."""
    return not torch.compiler.is_compiling()


def moe_ffn(x: Tensor, w_gate_up: Tensor, w_down: Tensor, topk_ids: Tensor, topk_weights: Tensor, *,
            first_expert: int = 0, num_experts: Optional[int] = None) -> Tensor:
    """ggemm.moe_ffn for torch tensors, as an operator torch.compile keeps
    (torch.ops.ggemm.moe_ffn); returns a new [T, H] tensor. No autograd."""
    if _eager():
        return _moe_ffn_impl(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert, num_experts)
    return torch.ops.ggemm.moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert, num_experts)


def moe_route(topk_ids: Tensor, topk_weights: Tensor, *, num_experts: int, first_expert: int = 0,
              local_experts: Optional[int] = None) -> "_moe.MoeRouting":
    """ggemm.moe_route for torch tensors (torch.ops.ggemm.moe_route); returns a ggemm.MoeRouting."""
    if _eager():
        outs = _moe_route_impl(topk_ids, topk_weights, num_experts, first_expert, local_experts)
    else:
        outs = torch.ops.ggemm.moe_route(topk_ids, topk_weights, num_experts, first_expert, local_experts)
    return _moe.MoeRouting(*outs)


def moe_combine(y: Tensor, slot_row: Tensor, out_dtype: Optional[torch.dtype] = None) -> Tensor:
    """ggemm.moe_combine for torch tensors (torch.ops.ggemm.moe_combine); returns a new [T, H] tensor."""
    if _eager():
        return _moe_combine_impl(y, slot_row, out_dtype)
    return torch.ops.ggemm.moe_combine(y, slot_row, out_dtype)


# ---- grouped_mm: torch._grouped_mm's 2D x 3D case ----------------------------------


def _weights_as_ggemm(b: Tensor) -> Tuple[Tensor, bool]:
    """b [E, K, N] as ggemm's weights: a transposed view of a contiguous
    [E, N, K] is read K-major without a copy (transpose_b); a contiguous
    [E, K, N] as it is; anything else is copied."""
    bt = b.transpose(-2, -1)
    if bt.is_contiguous():
        return bt, True
    if b.is_contiguous():
        return b, False
    return b.contiguous(), False


def _grouped_mm_impl(a: Tensor, b: Tensor, offs: Tensor, out_dtype: Optional[torch.dtype] = None) -> Tensor:
    # The common call (CUDA tensors, a contiguous, b a view of either weight
    # layout, int32 offs) in one pass: torch's offs go to the library as the
    # group ends they are, no extra kernel (_torch_args.grouped_mm).
    out = _torch_args.grouped_mm(a, b, offs, out_dtype)
    if out is not None:
        return out
    # Everything else: copies where ggemm needs them, then the checked path.
    m, k = a.shape
    experts, _, n = b.shape
    out = torch.empty((m, n), dtype=out_dtype or a.dtype, device=a.device)
    if m == 0:
        return out
    weights, transpose_b = _weights_as_ggemm(b)
    ids, usage = _torch_args.expert_routing(a, a.get_device(), experts)
    ends = offs if offs.dtype == torch.int32 else offs.to(torch.int32)
    _grouped_matmul_impl(a.contiguous(), weights, out, None, ids, usage, transpose_b, group_ends=ends)
    return out


_define("grouped_mm", "(Tensor a, Tensor b, Tensor offs, ScalarType? out_dtype=None) -> Tensor", _grouped_mm_impl,
        lambda a, b, offs, out_dtype=None: a.new_empty((a.shape[0], b.shape[2]), dtype=out_dtype or a.dtype))


def _grouped_mm_setup(ctx, inputs, output) -> None:
    a, b, offs, _out_dtype = inputs
    ctx.save_for_backward(a, b, offs)


def _grouped_mm_backward(ctx, grad):
    a, b, offs = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        # dA = dY B^T per group: the same operator with the other weight layout.
        grad_a = torch.ops.ggemm.grouped_mm(grad.to(a.dtype), b.transpose(-2, -1), offs, a.dtype)
    if ctx.needs_input_grad[1]:
        # dB[g] = A_g^T dY_g: a product grouped along K (the rows), which ggemm
        # has no kernel for yet. The slower path: torch._grouped_mm's 2D x 2D
        # form. Rows past offs[-1] belong to no group and add nothing.
        grad_b = torch._grouped_mm(a.t(), grad.to(a.dtype), offs=offs, out_dtype=b.dtype)
    return grad_a, grad_b, None, None


torch.library.register_autograd("ggemm::grouped_mm", _grouped_mm_backward, setup_context=_grouped_mm_setup, lib=_LIB)


def grouped_mm(a: Tensor, b: Tensor, offs: Tensor, out_dtype: Optional[torch.dtype] = None) -> Tensor:
    """torch._grouped_mm(a, b, offs=offs, out_dtype=out_dtype) for 2D a and 3D b, on ggemm's kernels.

    a     [M, K] bf16/fp16, rows sorted by group
    b     [E, K, N] (a transposed view of a contiguous [E, N, K], as w.transpose(-2, -1),
          is read without a copy)
    offs  int32 [E] on the device: group g owns rows [offs[g-1], offs[g]) (offs[-1] = 0),
          passed to the library as they are (its group_ends)
    Returns a new [M, N] tensor (out_dtype, default a's); rows at or past offs[-1]
    belong to no group and are left unwritten, as torch leaves them. Differentiable:
    the input gradient runs on ggemm, the weight gradient on torch._grouped_mm.
    """
    # Eager calls that autograd need not record skip the operator's dispatch;
    # traced calls and calls with gradients go through it.
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
        return torch.ops.ggemm.grouped_mm(a, b, offs, out_dtype)
    return _grouped_mm_impl(a, b, offs, out_dtype)
