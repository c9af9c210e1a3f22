"""torch tensors straight into ggemm_grouped_matmul_args (and
ggemm_moe_ffn_args), and the call.

The fast path of ggemm.grouped_matmul and ggemm.moe_ffn when their tensors
are torch tensors, and the body of ggemm.torch's grouped_matmul, grouped_mm
and moe_ffn (imported only where torch already is). Per call, each tensor's attributes are read once, dtypes
map through dicts keyed by torch's dtype objects, and the calling thread's
own argument struct is packed in one call and passed by address: no
TensorInfo objects, no struct built field by field, no stream or handle
lookups past a dict.

Only what the library cannot see from bare pointers is checked here: rank,
dtype, packing and device of each tensor, the shapes that must agree, the
routing arrays' lengths. A call these quick checks do not pass is left
untouched (the functions return False / None) for the general path
(_core._grouped_matmul_general), which either accepts it (e.g. a
framework-neutral case the quick checks do not model) or raises the error
that names the argument. Ranges, multiples of 8 and alignment are the
library's checks, and its message is the one raised.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import Any, Dict, Optional, Tuple

import torch

from . import _capi, _core, _moe
from ._capi import GroupedMatmulArgs, MoeFfnArgs
from ._workspace import TorchBackend, workspaces

_Tensor = torch.Tensor
_INT32, _FLOAT32 = torch.int32, torch.float32
# ggemm_dtype codes by torch dtype.
_OPERAND = {torch.bfloat16: 1, torch.float16: 2}
_OUTPUT = {torch.bfloat16: 1, torch.float16: 2, torch.float32: 3}
_INDEX = frozenset(d for d in (torch.int32, getattr(torch, "uint32", None)) if d is not None)
# The epilogues as _core.parse_epilogue reads them, in their exact spellings
# (other spellings take the general path); Epilogue members hash as their ints.
_EPILOGUES = {"store": 0, "accumulate": 1, "row_scale": 2, "rowscale": 2, "swiglu": 3, 0: 0, 1: 1, 2: 2, 3: 3}
_SWIGLU, _ROW_SCALE = 3, 2
_NO_SPLITS = (0, 0)

_SIZE = ctypes.sizeof(GroupedMatmulArgs)
_PACK = _capi.struct_packer(GroupedMatmulArgs).pack_into
_FUNCTION = "ggemm_grouped_matmul"
_MOE_SIZE = ctypes.sizeof(MoeFfnArgs)
_MOE_PACK = _capi.struct_packer(MoeFfnArgs).pack_into
_MOE_FUNCTION = "ggemm_moe_ffn"


class _ThreadArgs(threading.local):
    """The calling thread's argument structs. The library reads one only
    during the call, so one per thread serves every call the thread makes."""

    def __init__(self) -> None:
        self.args = GroupedMatmulArgs()
        self.address = ctypes.addressof(self.args)
        self.moe_args = MoeFfnArgs()
        self.moe_address = ctypes.addressof(self.moe_args)


_mine = _ThreadArgs()

# Per (CUDA ordinal, function): the default handle's pointer and the library
# function (the handle lives as long as the process: _core.default_handle).
_defaults: Dict[Tuple[int, str], Tuple[int, Any]] = {}


def _default_entry(device: int, function: str = _FUNCTION) -> Tuple[int, Any]:
    entry = _defaults.get((device, function))
    if entry is None:
        h = _core.default_handle(device)
        entry = _defaults.setdefault((device, function), (h.ptr, _capi.raw_function(h._lib, function)))
    return entry


def _call(address: int, device: int, stream: Any, handle: Optional[_core.Handle], function: str = _FUNCTION) -> bool:
    """Calls the library's `function` with the struct at `address` on `handle`
    (default: the device's) and `stream` (default: PyTorch's current stream
    of the device); raises GgemmError when it refuses the call. False, with
    nothing called, for a handle of another device (the general path says
    why)."""
    if handle is None:
        handle_ptr, fn = _defaults.get((device, function)) or _default_entry(device, function)
    elif handle.device != device:
        return False
    else:
        handle_ptr, fn = handle.ptr, _capi.raw_function(handle._lib, function)
    status = fn(handle_ptr, address, torch._C._cuda_getCurrentRawStream(device) if stream is None
                else _core.stream_handle(stream))
    if status:
        _core.check(status)
    return True


def _vector(t: Any, dtypes: Any, device: int) -> int:
    """The entry count of a 1-D contiguous tensor of one of `dtypes` on
    `device`, else -1."""
    if not isinstance(t, _Tensor):
        return -1
    try:
        (n,) = t.shape
    except ValueError:
        return -1
    if t.dtype not in dtypes or not t.is_contiguous() or t.get_device() != device:
        return -1
    return n


def grouped_matmul(a: Any, b: Any, out: Any, a_offsets: Any, expert_ids: Any, usage_stats: Any,
                   transpose_b: Any = True, epilogue: Any = "store", row_scale: Any = None,
                   num_groups: Any = None, max_rows_per_group: Any = 0, plane_splits: Any = _NO_SPLITS,
                   config: Any = None, a_row_index: Any = None, group_ends: Any = None, stream: Any = None,
                   handle: Optional[_core.Handle] = None) -> bool:
    """ggemm.grouped_matmul's call for torch tensors, enqueued when every quick
    check passes (True); False, with nothing done, otherwise (plane splits and
    config overrides always: they take the general path)."""
    T = _Tensor
    if not (isinstance(out, T) and isinstance(a, T) and isinstance(b, T) and isinstance(expert_ids, T)
            and isinstance(usage_stats, T)):
        return False
    if config is not None or plane_splits != _NO_SPLITS or not isinstance(epilogue, (str, int)):
        return False
    epi = _EPILOGUES.get(epilogue)
    if epi is None:
        return False
    device = out.get_device()
    if device < 0 or not out.is_cuda:
        return False
    c_dtype, a_dtype = _OUTPUT.get(out.dtype), _OPERAND.get(a.dtype)
    if c_dtype is None or a_dtype is None or b.dtype is not a.dtype:
        return False
    try:
        m, out_cols = out.shape
        a_rows, k = a.shape
        experts, b1, b2 = b.shape
        (ids_len,) = expert_ids.shape
        (usage_len,) = usage_stats.shape
    except ValueError:
        return False
    if not (out.is_contiguous() and a.is_contiguous() and b.is_contiguous() and expert_ids.is_contiguous()
            and usage_stats.is_contiguous()):
        return False
    if (a.get_device() != device or b.get_device() != device or expert_ids.get_device() != device
            or usage_stats.get_device() != device or expert_ids.dtype is not _INT32 or usage_stats.dtype not in _INDEX):
        return False
    n = 2 * out_cols if epi == _SWIGLU else out_cols
    if (b1 != n or b2 != k) if transpose_b else (b1 != k or b2 != n):
        return False
    # The groups: a_offsets [groups + 1] or group_ends [groups], one of them.
    if group_ends is None:
        routing, capacity = a_offsets, _vector(a_offsets, _INDEX, device) - 1
    elif a_offsets is None:
        routing, capacity = group_ends, _vector(group_ends, _INDEX, device)
    else:
        return False
    groups = capacity if num_groups is None else num_groups
    if capacity < 1 or type(groups) is not int or groups > capacity or ids_len < groups or usage_len < 2:
        return False
    if a_row_index is None:
        if a_rows != m:
            return False
        index_ptr, gather_rows = 0, 0
    elif _vector(a_row_index, (_INT32,), device) < m:
        return False
    else:
        index_ptr, gather_rows = a_row_index.data_ptr(), a_rows
    if epi == _ROW_SCALE:
        if row_scale is None or _vector(row_scale, (_FLOAT32,), device) < m:
            return False
        scale_ptr = row_scale.data_ptr()
    elif row_scale is not None:
        return False
    else:
        scale_ptr = 0
    routing_ptr = routing.data_ptr()
    mine = _mine
    try:  # every field of the struct, in the header's order
        _PACK(mine.args, 0, _SIZE, a_dtype, a_dtype, c_dtype, m, n, k, experts, a.data_ptr(), b.data_ptr(),
              out.data_ptr(), 1 if transpose_b else 0, 0 if group_ends is not None else routing_ptr,
              expert_ids.data_ptr(), usage_stats.data_ptr(), groups, int(max_rows_per_group), 0, 0, epi, scale_ptr,
              0, index_ptr, gather_rows, 0 if group_ends is None else routing_ptr)
    except struct.error:  # an int past its field's range: ctypes' rules, on the general path
        return False
    return _call(mine.address, device, stream, handle)


# ---- torch._grouped_mm's 2D x 3D case ---------------------------------------------

# Per (CUDA ordinal, E): the expert ids 0..E-1 and the usage stats [0, E] of
# a call with torch's offsets (only usage_stats[1], the active groups, is read
# on the device; [0] sizes nothing there). Read-only, so safe to share
# between calls and streams.
_routing_cache: Dict[Tuple[int, int], Tuple[torch.Tensor, torch.Tensor]] = {}
_routing_lock = threading.Lock()


def expert_routing(like: torch.Tensor, ordinal: int, experts: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The ids and usage stats of a grouped_mm over `experts` groups on the
    device of `like` (CUDA ordinal `ordinal`)."""
    cached = _routing_cache.get((ordinal, experts))
    if cached is not None:
        return cached
    device = like.device
    ids = torch.arange(experts, dtype=torch.int32, device=device)
    usage = torch.zeros(2, dtype=torch.int32, device=device)
    usage[1] = experts
    if torch.cuda.is_current_stream_capturing():
        return ids, usage  # made inside a capture: the graph's own memory, not cached
    with _routing_lock:
        return _routing_cache.setdefault((ordinal, experts), (ids, usage))


def _k_major_view(strides: Tuple[int, ...], e: int, k: int, n: int) -> bool:
    """Whether b [E, K, N] with these strides is the transposed view of a
    contiguous [E, N, K] (what torch's is_contiguous says of b.mT, without
    making the view: size-1 dimensions' strides do not matter)."""
    s0, s1, s2 = strides
    return (k == 1 or s1 == 1) and (n == 1 or s2 == k) and (e == 1 or s0 == n * k)


def grouped_mm(a: Any, b: Any, offs: Any, out_dtype: Optional[torch.dtype]) -> Optional[torch.Tensor]:
    """torch._grouped_mm(a, b, offs=offs, out_dtype=out_dtype) for 2-D a and
    3-D b: torch's offs (int32 group ends) go to the library as they are
    (group_ends), b [E, K, N] is read as the weights it views, and a new [M, N]
    output is returned. None, with nothing allocated or enqueued, when a quick
    check does not pass (an empty call, a non-contiguous a, b in neither
    layout, a dtype or device the call cannot take): ggemm.torch then takes
    the general path, which copies or explains."""
    if not (isinstance(a, _Tensor) and isinstance(b, _Tensor) and isinstance(offs, _Tensor)):
        return None
    device = a.get_device()
    if device < 0 or not a.is_cuda or b.get_device() != device:
        return None
    a_dtype = _OPERAND.get(a.dtype)
    c_torch = a.dtype if out_dtype is None else out_dtype
    c_dtype = _OUTPUT.get(c_torch)
    if a_dtype is None or c_dtype is None or b.dtype is not a.dtype:
        return None
    try:
        m, k = a.shape
        experts, b_k, n = b.shape
    except ValueError:
        return None
    groups = _vector(offs, (_INT32,), device)
    if m == 0 or b_k != k or groups < 1 or groups > experts or not a.is_contiguous():
        return None
    if _k_major_view(b.stride(), experts, k, n):
        transpose_b = 1
    elif b.is_contiguous():
        transpose_b = 0
    else:
        return None
    ids, usage = _routing_cache.get((device, experts)) or expert_routing(a, device, experts)
    out = a.new_empty((m, n), dtype=c_torch)
    mine = _mine
    _PACK(mine.args, 0, _SIZE, a_dtype, a_dtype, c_dtype, m, n, k, experts, a.data_ptr(), b.data_ptr(),
          out.data_ptr(), transpose_b, 0, ids.data_ptr(), usage.data_ptr(), groups, 0, 0, 0, 0, 0, 0, 0, 0,
          offs.data_ptr())
    _call(mine.address, device, None, None)
    return out


# ---- the MoE layer ------------------------------------------------------------------

_TORCH_MEMORY = TorchBackend()
_STRIDED = torch.strided


def _moe_workspace(mine: _ThreadArgs, key: Tuple[int, ...], device: int, stream: int) -> Any:
    """The workspace of the call packed in `mine` (its size by `key`: dtype,
    T, H, I, k, local experts, as _moe's memo of the size query), set in
    the struct; returns the buffer, to be held until the call is enqueued.
    `stream` is PyTorch's current stream of `device` (moe_ffn takes no
    other): where that device is the current one and its current stream is
    not capturing, the package's cached buffer of (device, stream); else the
    general rule (_workspace), which asks about `stream` itself."""
    need = _moe.workspace_bytes_by_key(mine.moe_args, key)  # the first time, also the library's argument checks
    if need == 0:
        return None
    if device == torch._C._cuda_getDevice() and not torch._C._cuda_isCurrentStreamCapturing():
        buf = workspaces.cached(_TORCH_MEMORY, need, device, stream)
    else:
        buf = workspaces.get(_TORCH_MEMORY, need, device, stream)
    mine.moe_args.workspace, mine.moe_args.workspace_bytes = buf.data_ptr(), buf.numel()
    return buf


def moe_ffn(x: Any, w_gate_up: Any, w_down: Any, topk_ids: Any, topk_weights: Any, out: Any = None,
            first_expert: Any = 0, num_experts: Any = None, stream: Any = None,
            handle: Optional[_core.Handle] = None) -> Optional[torch.Tensor]:
    """ggemm.moe_ffn's call for torch tensors on PyTorch's current stream
    (the package's workspace), enqueued when every quick check passes:
    returns `out` (allocated when None). None, with nothing allocated or
    enqueued, otherwise: the general path then runs the call or says what is
    wrong with it. A call given a stream of its own takes the general path,
    which allocates `out` and decides on the cached workspace (never under a
    capture) by that stream; here both follow from the current stream."""
    T = _Tensor
    if stream is not None:
        return None
    if not (isinstance(x, T) and isinstance(w_gate_up, T) and isinstance(w_down, T) and isinstance(topk_ids, T)
            and isinstance(topk_weights, T)):
        return None
    if not x.is_cuda or not (x.layout is _STRIDED and w_gate_up.layout is _STRIDED and w_down.layout is _STRIDED
                             and topk_ids.layout is _STRIDED and topk_weights.layout is _STRIDED):
        return None
    device = x.get_device()
    dtype = _OPERAND.get(x.dtype)
    if (device < 0 or dtype is None or w_gate_up.dtype is not x.dtype or w_down.dtype is not x.dtype
            or topk_ids.dtype is not _INT32 or topk_weights.dtype is not _FLOAT32):
        return None
    if type(first_expert) is not int or not (num_experts is None or type(num_experts) is int):
        return None
    try:
        t, h = x.shape
        local, two_i, h_gate_up = w_gate_up.shape
        local_down, h_down, i = w_down.shape
        t_ids, k = topk_ids.shape
        t_weights, k_weights = topk_weights.shape
    except ValueError:
        return None
    if (two_i != 2 * i or h_gate_up != h or h_down != h or local_down != local or t_ids != t or t_weights != t
            or k_weights != k):
        return None
    if num_experts is None:
        if first_expert != 0:
            return None
        num_experts = local
    if not (x.is_contiguous() and w_gate_up.is_contiguous() and w_down.is_contiguous()
            and topk_ids.is_contiguous() and topk_weights.is_contiguous()):
        return None
    if (w_gate_up.get_device() != device or w_down.get_device() != device or topk_ids.get_device() != device
            or topk_weights.get_device() != device or (handle is not None and handle.device != device)):
        return None
    if out is None:
        out = x.new_empty((t, h))
    elif not (isinstance(out, T) and out.dtype is x.dtype and tuple(out.shape) == (t, h) and out.is_contiguous()
              and out.get_device() == device):
        return None
    raw_stream = torch._C._cuda_getCurrentRawStream(device)
    mine = _mine
    try:  # every field of the struct, in the header's order (the workspace below)
        _MOE_PACK(mine.moe_args, 0, _MOE_SIZE, dtype, t, h, i, k, num_experts, first_expert, local, x.data_ptr(),
                  w_gate_up.data_ptr(), w_down.data_ptr(), topk_ids.data_ptr(), topk_weights.data_ptr(),
                  out.data_ptr(), 0, 0)
    except struct.error:  # an int past its field's range: ctypes' rules, on the general path
        return None
    keep = _moe_workspace(mine, (dtype, t, h, i, k, local), device, raw_stream)
    _call(mine.moe_address, device, raw_stream, handle, _MOE_FUNCTION)
    del keep  # enqueued: the buffer may go (_workspace)
    return out
