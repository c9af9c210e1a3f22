"""ggemm for PyTorch: operators that torch.compile keeps and CUDA graphs capture.

    import ggemm.torch                      # registers torch.ops.ggemm.*
    out = ggemm.torch.grouped_mm(x, w.transpose(-2, -1), offs)   # as torch._grouped_mm(x, w.mT, offs)
    y = ggemm.torch.moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights)   # the whole MoE layer

Importing this module (it needs torch; the rest of the package does not)
registers custom operators with fake (meta) implementations, so
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
multiples of 8) are left to it, so its message is the one raised.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from . import _capi, _core, _moe
from ._capi import Dtype, Epilogue, GroupedMatmulArgs, LoraExpandQkvArgs, LoraShrinkQkvArgs
from ._workspace import TorchBackend

__all__ = ["grouped_mm", "moe_combine", "moe_ffn", "moe_route"]

_TORCH_MEMORY = TorchBackend()

_OPERAND = {torch.bfloat16: Dtype.BF16, torch.float16: Dtype.FP16}
_OUTPUT = {torch.bfloat16: Dtype.BF16, torch.float16: Dtype.FP16, torch.float32: Dtype.FP32}
_INDEX = (torch.int32, torch.uint32)


# ---- the fast path: torch tensors straight into the C structs -----------------


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


def _grouped_matmul_impl(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b, epilogue, row_scale,
                         max_rows_per_group, a_row_index=None) -> None:
    dev = _cuda_ordinal(out, "out")
    _need(a, "a", 2, _OPERAND, dev)
    _need(b, "b", 3, _OPERAND, dev)
    _need(out, "out", 2, _OUTPUT, dev)
    if b.dtype != a.dtype:
        raise TypeError(f"b: dtype {b.dtype} differs from a's {a.dtype}")
    epi = _core.parse_epilogue(epilogue)
    m, n, k, e = _core.grouped_matmul_dims(a.shape, b.shape, out.shape, transpose_b=transpose_b, epilogue=epi,
                                           gather=a_row_index is not None)
    args = GroupedMatmulArgs()
    args.a_dtype = args.b_dtype = _OPERAND[a.dtype]
    args.c_dtype = _OUTPUT[out.dtype]
    args.m, args.n, args.k, args.num_experts = m, n, k, e
    args.a, args.b, args.c = a.data_ptr(), b.data_ptr(), out.data_ptr()
    args.transpose_b = 1 if transpose_b else 0
    args.epilogue = int(epi)
    if a_row_index is not None:
        _need(a_row_index, "a_row_index", 1, (torch.int32,), dev)
        if a_row_index.shape[0] < m:
            raise ValueError(f"a_row_index: has {a_row_index.shape[0]} entries, M is {m}")
        args.a_row_index, args.a_rows = a_row_index.data_ptr(), a.shape[0]
    if epi == Epilogue.ROW_SCALE:
        if row_scale is None:
            raise ValueError("epilogue='row_scale' needs row_scale, float32 [M]")
        _need(row_scale, "row_scale", 1, (torch.float32,), dev)
        if row_scale.shape[0] < m:
            raise ValueError(f"row_scale: has {row_scale.shape[0]} entries, M is {m}")
        args.row_scale = row_scale.data_ptr()
    elif row_scale is not None:
        raise ValueError(f"row_scale is read only by epilogue='row_scale' (epilogue is {epilogue!r})")
    _routing(args, a_offsets, expert_ids, "expert_ids", usage_stats, max_rows_per_group, dev)
    _call("ggemm_grouped_matmul", args, dev)


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


@torch.library.custom_op("ggemm::grouped_matmul", mutates_args=("out",), device_types="cuda")
def _grouped_matmul_op(a: Tensor, b: Tensor, out: Tensor, a_offsets: Tensor, expert_ids: Tensor,
                       usage_stats: Tensor, transpose_b: bool = True, epilogue: str = "store",
                       row_scale: Optional[Tensor] = None, max_rows_per_group: int = 0,
                       a_row_index: Optional[Tensor] = None) -> None:
    _grouped_matmul_impl(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b, epilogue, row_scale,
                         max_rows_per_group, a_row_index)


@_grouped_matmul_op.register_fake
def _(a, b, out, a_offsets, expert_ids, usage_stats, transpose_b=True, epilogue="store", row_scale=None,
      max_rows_per_group=0, a_row_index=None) -> None:
    return None


@torch.library.custom_op("ggemm::lora_shrink_qkv", mutates_args=("p",), device_types="cuda")
def _lora_shrink_op(x: Tensor, lora_a: Tensor, p: Tensor, a_offsets: Tensor, adapter_ids: Tensor,
                    usage_stats: Tensor, scale: float = 1.0, accumulate: bool = False,
                    max_rows_per_group: int = 0) -> None:
    _lora_shrink_impl(x, lora_a, p, a_offsets, adapter_ids, usage_stats, scale, accumulate, max_rows_per_group)


@_lora_shrink_op.register_fake
def _(x, lora_a, p, a_offsets, adapter_ids, usage_stats, scale=1.0, accumulate=False, max_rows_per_group=0) -> None:
    return None


@torch.library.custom_op("ggemm::lora_expand_qkv", mutates_args=("q_out", "kv_out"), device_types="cuda")
def _lora_expand_op(p: Tensor, lora_b: Tensor, q_out: Tensor, kv_out: Tensor, a_offsets: Tensor,
                    adapter_ids: Tensor, usage_stats: Tensor, scale: float = 1.0, accumulate: bool = False,
                    max_rows_per_group: int = 0) -> None:
    _lora_expand_impl(p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats, scale, accumulate,
                      max_rows_per_group)


@_lora_expand_op.register_fake
def _(p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats, scale=1.0, accumulate=False,
      max_rows_per_group=0) -> None:
    return None


# ---- the MoE layer --------------------------------------------------------------

_FLOAT32, _INT32 = (torch.float32,), (torch.int32,)


def _routing_inputs(topk_ids: Tensor, topk_weights: Tensor, dev: int) -> Tuple[int, int]:
    _need(topk_ids, "topk_ids", 2, _INT32, dev)
    _need(topk_weights, "topk_weights", 2, _FLOAT32, dev)
    return _moe.routing_dims(topk_ids.shape, topk_weights.shape)


def _moe_ffn_impl(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert, num_experts) -> Tensor:
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


def _moe_route_impl(topk_ids, topk_weights, num_experts, first_expert, local_experts) -> Tuple[Tensor, ...]:
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


def _moe_combine_impl(y, slot_row, out_dtype) -> Tensor:
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


@torch.library.custom_op("ggemm::moe_ffn", mutates_args=(), device_types="cuda")
def _moe_ffn_op(x: Tensor, w_gate_up: Tensor, w_down: Tensor, topk_ids: Tensor, topk_weights: Tensor,
                first_expert: int = 0, num_experts: Optional[int] = None) -> Tensor:
    return _moe_ffn_impl(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert, num_experts)


@_moe_ffn_op.register_fake
def _(x, w_gate_up, w_down, topk_ids, topk_weights, first_expert=0, num_experts=None):
    return x.new_empty((x.shape[0], x.shape[1]))


@torch.library.custom_op("ggemm::moe_route", mutates_args=(), device_types="cuda")
def _moe_route_op(topk_ids: Tensor, topk_weights: Tensor, num_experts: int, first_expert: int = 0,
                  local_experts: Optional[int] = None) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _moe_route_impl(topk_ids, topk_weights, num_experts, first_expert, local_experts)


@_moe_route_op.register_fake
def _(topk_ids, topk_weights, num_experts, first_expert=0, local_experts=None):
    _, layout = _routing_outputs(topk_ids, num_experts, first_expert, local_experts)
    return tuple(topk_ids.new_empty(shape, dtype=dtype) for shape, dtype in layout.values())


@torch.library.custom_op("ggemm::moe_combine", mutates_args=(), device_types="cuda")
def _moe_combine_op(y: Tensor, slot_row: Tensor, out_dtype: Optional[torch.dtype] = None) -> Tensor:
    return _moe_combine_impl(y, slot_row, out_dtype)


@_moe_combine_op.register_fake
def _(y, slot_row, out_dtype=None):
    return y.new_empty((slot_row.shape[0], y.shape[1]), dtype=out_dtype or y.dtype)


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

# Per (device, E): the expert ids 0..E-1, the usage stats [0, E] and a
# leading zero for the offsets, which a call with torch's offsets needs (only
# usage_stats[1], the active groups, is read on the device; [0] sizes nothing
# there). Read-only, so safe to share between calls and streams.
_routing_cache: Dict[Tuple[int, int], Tuple[Tensor, Tensor, Tensor]] = {}
_routing_lock = threading.Lock()


def _expert_routing(device: torch.device, experts: int) -> Tuple[Tensor, Tensor, Tensor]:
    key = (device.index if device.index is not None else torch.cuda.current_device(), experts)
    cached = _routing_cache.get(key)
    if cached is not None:
        return cached
    ids = torch.arange(experts, dtype=torch.int32, device=device)
    usage = torch.zeros(2, dtype=torch.int32, device=device)
    usage[1] = experts
    zero = torch.zeros(1, dtype=torch.int32, device=device)
    if torch.cuda.is_current_stream_capturing():
        return ids, usage, zero  # made inside a capture: the graph's own memory, not cached
    with _routing_lock:
        return _routing_cache.setdefault(key, (ids, usage, zero))


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


def _grouped_mm_impl(a: Tensor, b: Tensor, offs: Tensor, out_dtype: Optional[torch.dtype]) -> Tensor:
    m, k = a.shape
    experts, _, n = b.shape
    out = torch.empty((m, n), dtype=out_dtype or a.dtype, device=a.device)
    if m == 0:
        return out
    weights, transpose_b = _weights_as_ggemm(b)
    ids, usage, zero = _expert_routing(a.device, experts)
    # ggemm's offsets start at 0: [0, offs...], one small kernel (pad would
    # launch two), no host sync. A fresh tensor per call, so calls on other
    # streams never share it.
    a_offsets = torch.cat((zero, offs.to(torch.int32)))
    _grouped_matmul_impl(a.contiguous(), weights, out, a_offsets, ids, usage, transpose_b, "store", None, 0)
    return out


@torch.library.custom_op("ggemm::grouped_mm", mutates_args=(), device_types="cuda")
def _grouped_mm_op(a: Tensor, b: Tensor, offs: Tensor, out_dtype: Optional[torch.dtype] = None) -> Tensor:
    return _grouped_mm_impl(a, b, offs, out_dtype)


@_grouped_mm_op.register_fake
def _(a, b, offs, out_dtype=None):
    return a.new_empty((a.shape[0], b.shape[2]), dtype=out_dtype or a.dtype)


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


torch.library.register_autograd("ggemm::grouped_mm", _grouped_mm_backward, setup_context=_grouped_mm_setup)


def grouped_mm(a: Tensor, b: Tensor, offs: Tensor, out_dtype: Optional[torch.dtype] = None) -> Tensor:
    """torch._grouped_mm(a, b, offs=offs, out_dtype=out_dtype) for 2D a and 3D b, on ggemm's kernels.

    a     [M, K] bf16/fp16, rows sorted by group
    b     [E, K, N] (a transposed view of a contiguous [E, N, K], as w.transpose(-2, -1),
          is read without a copy)
    offs  int32 [E] on the device: group g owns rows [offs[g-1], offs[g]) (offs[-1] = 0)
    Returns a new [M, N] tensor (out_dtype, default a's); rows at or past offs[-1]
    belong to no group and are left unwritten, as torch leaves them. Differentiable:
    the input gradient runs on ggemm, the weight gradient on torch._grouped_mm.
    """
    # Eager calls that autograd need not record skip the operator's dispatch
    # (~20 us of host time on the H200); traced calls and calls with
    # gradients go through it.
    if torch.compiler.is_compiling() or (torch.is_grad_enabled() and (a.requires_grad or b.requires_grad)):
        return torch.ops.ggemm.grouped_mm(a, b, offs, out_dtype)
    return _grouped_mm_impl(a, b, offs, out_dtype)
