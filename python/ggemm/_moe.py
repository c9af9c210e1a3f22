"""The MoE layer: moe_ffn (ggemm_moe_ffn, the whole layer in one call) and its
steps moe_route and moe_combine, over any CUDA tensors.

The shape rules, the filling of the C structs and the workspace are here
once; ggemm.torch's operators use them on torch tensors directly.
"""

from __future__ import annotations

import threading
from ctypes import byref, c_size_t
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Sequence, Tuple

from . import _capi
from ._capi import Dtype, MoeCombineArgs, MoeFfnArgs, MoeRouteArgs
from ._core import (
    _OPERAND_DTYPES,
    _OUTPUT_DTYPES,
    BuiltArgs,
    Handle,
    _describe_all,
    _need,
    _torch_fast_path,
    check,
    fill_pointers,
    handle_for,
    resolve_stream,
)
from ._tensor import describe
from ._workspace import Backend, backend_of, workspaces

# ---- shapes ----------------------------------------------------------------------


@dataclass(frozen=True)
class MoeDims:
    """The sizes of one MoE layer call."""

    tokens: int  # T
    hidden: int  # H
    intermediate: int  # I, the moe ffn size
    top_k: int  # k
    local_experts: int  # the weights' first dimension


def routing_dims(ids_shape: Sequence[int], weights_shape: Sequence[int]) -> Tuple[int, int]:
    """(T, k) of the top-k ids and weights, which must both be [T, k]."""
    if tuple(weights_shape) != tuple(ids_shape):
        raise ValueError(
            f"topk_weights: shape {tuple(weights_shape)} differs from topk_ids' {tuple(ids_shape)}; both are [T, k]"
        )
    t, k = ids_shape
    return t, k


def moe_ffn_dims(
    x_shape: Sequence[int],
    w_gate_up_shape: Sequence[int],
    w_down_shape: Sequence[int],
    ids_shape: Sequence[int],
    weights_shape: Sequence[int],
    out_shape: Optional[Sequence[int]] = None,
) -> MoeDims:
    """The sizes from the operands' shapes (ranks already checked); ValueError
    naming the operand that disagrees. Ranges and multiples of 8 are the library's."""
    t, h = x_shape
    local, two_i, h_gate_up = w_gate_up_shape
    if two_i % 2:
        raise ValueError(
            f"w_gate_up: shape {tuple(w_gate_up_shape)} has {two_i} rows per expert, an odd count; it must be "
            "[E, 2I, H]: I gate rows, then I up rows"
        )
    i = two_i // 2
    if h_gate_up != h:
        raise ValueError(f"w_gate_up: shape {tuple(w_gate_up_shape)} has H = {h_gate_up}; x {tuple(x_shape)} has H = {h}")
    if tuple(w_down_shape) != (local, h, i):
        raise ValueError(
            f"w_down: shape {tuple(w_down_shape)} does not match [E, H, I] = {(local, h, i)} (E and I from "
            f"w_gate_up {tuple(w_gate_up_shape)}, H from x)"
        )
    ids_t, k = routing_dims(ids_shape, weights_shape)
    if ids_t != t:
        raise ValueError(f"topk_ids: shape {tuple(ids_shape)} has {ids_t} tokens; x {tuple(x_shape)} has {t}")
    if out_shape is not None and tuple(out_shape) != (t, h):
        raise ValueError(f"out: shape {tuple(out_shape)} must be [T, H] = {(t, h)}, x's shape")
    return MoeDims(tokens=t, hidden=h, intermediate=i, top_k=k, local_experts=local)


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name}: expected an int, got {type(value).__name__}")
    return int(value)


def expert_range(local_experts: int, first_expert: Any = 0, num_experts: Any = None) -> Tuple[int, int]:
    """(num_experts, first_expert) of a call with `local_experts` experts' weights.

    Without expert parallelism (first_expert 0) num_experts defaults to the
    local count. With it, the global count cannot be guessed from the weights,
    and a wrong guess would change which ids checked mode reports, so it must
    be given. Whether the range fits (first + local <= num_experts) is the
    library's check.
    """
    first = _count(first_expert, "first_expert")
    if num_experts is None:
        if first != 0:
            raise ValueError(
                f"num_experts: give the global expert count with first_expert={first} (expert parallelism: "
                f"this rank holds experts [{first}, {first + local_experts}))"
            )
        return local_experts, 0
    return _count(num_experts, "num_experts"), first


# Outputs of ggemm_moe_route: shape and the dtypes allowed (the first is the one
# the package allocates). Offsets and usage are the C API's uint32, which the
# grouped matmuls also read as int32 (the counts stay below 2^31).
def routing_layout(tokens: int, top_k: int, local_experts: int) -> Dict[str, Tuple[Tuple[int, ...], Tuple[str, ...]]]:
    rows = (tokens * top_k,)
    return {
        "a_offsets": ((local_experts + 1,), ("int32", "uint32")),
        "expert_ids": ((local_experts,), ("int32",)),
        "usage_stats": ((2,), ("int32", "uint32")),
        "row_token": (rows, ("int32",)),
        "row_slot": (rows, ("int32",)),
        "row_weight": (rows, ("float32",)),
        "slot_row": ((tokens, top_k), ("int32",)),
    }


def route_field(name: str) -> str:
    """The field of ggemm_moe_route_args that holds argument (or MoeRouting field) `name`:
    the same name, but for the usage stats, as in the grouped matmul's struct."""
    return "expert_usage_stats" if name == "usage_stats" else name


class MoeRouting(NamedTuple):
    """What moe_route writes (device arrays). Sorted row m is the m-th (token,
    slot) pair with a local expert, by expert, then by t * k + slot; the first
    three are the grouped matmuls' routing, row_token their gather index."""

    a_offsets: Any  # [E_local + 1] group boundaries; past the active groups: R, the routed row count
    expert_ids: Any  # [E_local] local expert of group g; -1 past the active groups
    usage_stats: Any  # [2] most rows in a group, active groups
    row_token: Any  # [T * k] token of sorted row m; -1 for m >= R
    row_slot: Any  # [T * k] t * k + slot of sorted row m; -1 for m >= R
    row_weight: Any  # [T * k] float32 routing weight of sorted row m; 0 for m >= R
    slot_row: Any  # [T, k] sorted row of (t, slot); -1 = no local expert


# ---- the C structs -----------------------------------------------------------------


def _fill(args: Any, fields: Mapping[str, Any]) -> Any:
    for name, value in fields.items():
        setattr(args, name, value)
    return args


def ffn_struct(dims: MoeDims, dtype: Dtype, num_experts: int, first_expert: int) -> MoeFfnArgs:
    """A MoeFfnArgs with every size set and no pointer (the caller sets them)."""
    return _fill(MoeFfnArgs(), dict(
        dtype=int(dtype), num_tokens=dims.tokens, hidden=dims.hidden, intermediate=dims.intermediate,
        top_k=dims.top_k, num_experts=num_experts, first_expert=first_expert, local_experts=dims.local_experts,
    ))


def route_struct(tokens: int, top_k: int, num_experts: int, first_expert: int, local_experts: int) -> MoeRouteArgs:
    return _fill(MoeRouteArgs(), dict(
        num_tokens=tokens, top_k=top_k, num_experts=num_experts, first_expert=first_expert,
        local_experts=local_experts,
    ))


def combine_struct(y_dtype: Dtype, out_dtype: Dtype, tokens: int, top_k: int, hidden: int, y_rows: int,
                   accumulate: bool) -> MoeCombineArgs:
    return _fill(MoeCombineArgs(), dict(
        y_dtype=int(y_dtype), out_dtype=int(out_dtype), num_tokens=tokens, top_k=top_k, hidden=hidden,
        y_rows=y_rows, accumulate=1 if accumulate else 0,
    ))


# ---- the workspace -------------------------------------------------------------------

# Which size query answers for which struct, and the fields the size depends
# on (ggemm.h: T, k, H, I, local experts and dtype): the answer is kept per
# such key, so a call costs a dict lookup, not a library call.
_SIZE_QUERIES: Dict[type, Tuple[str, Callable[[Any], Tuple[int, ...]]]] = {
    MoeFfnArgs: ("ggemm_moe_ffn_workspace_size",
                 lambda a: (a.dtype, a.num_tokens, a.hidden, a.intermediate, a.top_k, a.local_experts)),
    MoeRouteArgs: ("ggemm_moe_route_workspace_size", lambda a: (a.num_tokens, a.top_k, a.local_experts)),
}
_sizes: Dict[Tuple[Any, ...], int] = {}
_sizes_lock = threading.Lock()
_MAX_SIZES = 4096  # distinct shapes remembered before the memo starts again


def workspace_bytes(args: Any) -> int:
    """The workspace the call with these arguments needs (the library's size
    query, which also checks the arguments and raises GgemmError for bad ones)."""
    function, key_of = _SIZE_QUERIES[type(args)]
    return workspace_bytes_by_key(args, key_of(args))


def workspace_bytes_by_key(args: Any, sizes: Tuple[int, ...]) -> int:
    """workspace_bytes(args) for a caller that has the fields the size depends
    on at hand (`sizes`, in _SIZE_QUERIES' order): no field read back from
    the struct."""
    function = _SIZE_QUERIES[type(args)][0]
    key = (function,) + sizes
    size = _sizes.get(key)
    if size is None:
        lib = _capi.load_library()
        out = c_size_t()
        check(_capi.require_function(lib, function)(byref(args), byref(out)))
        size = int(out.value)
        with _sizes_lock:
            if len(_sizes) >= _MAX_SIZES:
                _sizes.clear()
            _sizes[key] = size
    return size


def attach_workspace(args: Any, backend: Optional[Backend], device: int, stream: int, workspace: Any = None) -> Any:
    """Sets args.workspace and workspace_bytes; returns what must stay alive until the call is enqueued.

    `workspace` (a device array of any dtype, C-contiguous) is the caller's
    own; else the cached one of (backend, device, stream) is used, grown when
    needed.
    """
    if workspace is not None:
        info = describe(workspace, "workspace", stream)
        if not info.is_contiguous():
            raise ValueError(f"workspace: must be one contiguous buffer; got strides {info.strides}")
        args.workspace, args.workspace_bytes = info.ptr or None, info.numel * info.itemsize
        return (workspace, info.keepalive)
    need = workspace_bytes(args)
    if need == 0:
        args.workspace, args.workspace_bytes = None, 0
        return None
    if backend is None:
        raise ValueError(
            f"workspace: this call needs {need} bytes of device scratch, and ggemm allocates it only next to "
            "PyTorch tensors or CuPy arrays; pass workspace=, a contiguous device buffer of that many bytes"
        )
    buf = workspaces.get(backend, need, device, stream)
    args.workspace, args.workspace_bytes = describe(buf, "workspace").ptr, backend.nbytes(buf)
    return buf


# ---- allocation of outputs ----------------------------------------------------------

Allocate = Callable[[Tuple[int, ...], str, Optional[int]], Any]


def _allocator(like: Any, stream: int) -> Optional[Allocate]:
    """(shape, dtype, device) -> a new array next to `like` (its library, in
    `stream`'s order); None when `like` has no library ggemm can allocate with."""
    backend = backend_of(like)
    if backend is None:
        return None
    return lambda shape, dtype, device: backend.empty(shape, dtype, 0 if device is None else device, stream)


def _output(out: Any, allocate: Optional[Allocate], shape: Tuple[int, ...], dtype: str, device: Optional[int],
            what: str) -> Any:
    if out is not None:
        return out
    if allocate is None:
        raise ValueError(
            f"out: ggemm allocates outputs only next to PyTorch tensors or CuPy arrays; pass out= ({what})"
        )
    return allocate(shape, dtype, device)


def _dtype_name(dtype: Any) -> str:
    """'bfloat16' from torch.bfloat16, numpy's float32, or the name itself."""
    name = getattr(dtype, "name", None)
    return (name if isinstance(name, str) else str(dtype)).rsplit(".", 1)[-1].lower()


# ---- moe_ffn -------------------------------------------------------------------------


def _build_moe_ffn_args(
    x: Any, w_gate_up: Any, w_down: Any, topk_ids: Any, topk_weights: Any, out: Any = None, *,
    first_expert: Any = 0, num_experts: Any = None, stream: int = 0, allocate: Optional[Allocate] = None,
) -> BuiltArgs:
    """Reads the tensors and fills a MoeFfnArgs (workspace not yet set); no GPU
    and no library needed. `out` None is allocated with `allocate`."""
    infos = _describe_all({"x": x, "w_gate_up": w_gate_up, "w_down": w_down, "topk_ids": topk_ids,
                           "topk_weights": topk_weights}, stream)
    ix, ig, idn, ii, iw = infos.values()
    operand = list(_OPERAND_DTYPES)
    _need(ix, 2, operand, "activations [T, H], in token order")
    _need(ig, 3, operand, "gate_up weights [E, 2I, H]: I gate rows, then I up rows")
    _need(idn, 3, operand, "down weights [E, H, I]")
    _need(ii, 2, ("int32",), "top-k expert ids [T, k], -1 = no expert")
    _need(iw, 2, ("float32",), "top-k routing weights [T, k]")
    for info in (ig, idn):
        if info.dtype != ix.dtype:
            raise TypeError(f"{info.name}: dtype {info.dtype} differs from x's {ix.dtype}; x, weights and out share one")
    dims = moe_ffn_dims(ix.shape, ig.shape, idn.shape, ii.shape, iw.shape)
    n_experts, first = expert_range(dims.local_experts, first_expert, num_experts)

    out = _output(out, allocate, (dims.tokens, dims.hidden), ix.dtype, ix.device, "[T, H], x's dtype")
    io = infos["out"] = describe(out, "out", stream)
    _need(io, 2, (ix.dtype,), "output [T, H], x's dtype")
    if io.readonly:
        raise ValueError("out: the array is read-only")
    moe_ffn_dims(ix.shape, ig.shape, idn.shape, ii.shape, iw.shape, io.shape)

    args = ffn_struct(dims, _OPERAND_DTYPES[ix.dtype], n_experts, first)
    built = fill_pointers(args, infos, {name: name for name in infos})
    built.result = out
    return built


def _run(function: str, built: BuiltArgs, like: Any, stream: int, handle: Optional[Handle], workspace: Any) -> Any:
    """Attaches the workspace (for the functions that have one) and calls `function`."""
    handle = handle_for(built, handle)
    if type(built.args) in _SIZE_QUERIES:
        # Held until the call has been enqueued; after that a cached buffer
        # lives in the cache and a captured one in the graph's pool (_workspace).
        built.keepalive.append(attach_workspace(built.args, backend_of(like), handle.device, stream, workspace))
    elif workspace is not None:
        raise ValueError(f"workspace: {function} takes none")
    check(_capi.require_function(handle._lib, function)(handle.ptr, byref(built.args), stream or None))
    return built.result


def moe_ffn(
    x: Any,
    w_gate_up: Any,
    w_down: Any,
    topk_ids: Any,
    topk_weights: Any,
    out: Any = None,
    *,
    first_expert: int = 0,
    num_experts: Optional[int] = None,
    workspace: Any = None,
    handle: Optional[Handle] = None,
    stream: Any = None,
) -> Any:
    """The whole MoE feed-forward layer in one call; returns `out`.

        out[t] = sum_j w[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t])),   e = topk_ids[t, j]

    with fp32 accumulation: the SwiGLU product rounded once to x's dtype, each
    slot's weighted down projection rounded once, the k slots summed in fp32
    in slot order and rounded once (bitwise reproducible).

    x             [T, H] bf16/fp16, in token order
    w_gate_up     [E_local, 2I, H], x's dtype: per expert I gate rows, then I up rows
    w_down        [E_local, H, I], x's dtype
    topk_ids      int32 [T, k]: global expert ids; -1, or an expert outside this rank's
                  [first_expert, first_expert + E_local), contributes nothing
    topk_weights  float32 [T, k]; a NaN or infinite weight drops its slot
    out           [T, H], x's dtype; allocated (next to x) when None
    first_expert, num_experts: expert parallelism: this rank holds experts
                  [first_expert, first_expert + E_local) of num_experts (default E_local;
                  required when first_expert is not 0)
    workspace     None: ggemm allocates it (PyTorch / CuPy memory, cached per device and
                  stream); or a contiguous device buffer of ggemm.moe_ffn_workspace_size bytes
    handle, stream: as for grouped_matmul

    Nothing synchronises with the host: a captured call replays with new x,
    ids and weights. Raises ValueError / TypeError for tensors whose shapes,
    dtypes or devices do not fit, GgemmError for what the library refuses.
    """
    fast = _torch_fast_path()
    if fast is not None and workspace is None:
        result = fast.moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights, out, first_expert, num_experts, stream,
                              handle)
        if result is not None:
            return result
    s = resolve_stream(stream, (x, w_gate_up, w_down, topk_ids, topk_weights, out))
    built = _build_moe_ffn_args(x, w_gate_up, w_down, topk_ids, topk_weights, out, first_expert=first_expert,
                                num_experts=num_experts, stream=s, allocate=_allocator(x, s))
    return _run("ggemm_moe_ffn", built, x, s, handle, workspace)


def moe_ffn_workspace_size(tokens: int, hidden: int, intermediate: int, top_k: int, local_experts: int,
                           dtype: Any = "bfloat16") -> int:
    """Bytes of workspace moe_ffn needs for these sizes (ggemm_moe_ffn_workspace_size)."""
    name = _dtype_name(dtype)
    if name not in _OPERAND_DTYPES:
        raise TypeError(f"dtype: {dtype!r} is not bfloat16 or float16")
    dims = MoeDims(_count(tokens, "tokens"), _count(hidden, "hidden"), _count(intermediate, "intermediate"),
                   _count(top_k, "top_k"), _count(local_experts, "local_experts"))
    return workspace_bytes(ffn_struct(dims, _OPERAND_DTYPES[name], dims.local_experts, 0))


# ---- moe_route -----------------------------------------------------------------------


def _build_moe_route_args(
    topk_ids: Any, topk_weights: Any, routing: Optional[MoeRouting] = None, *, num_experts: Any,
    first_expert: Any = 0, local_experts: Any = None, stream: int = 0, allocate: Optional[Allocate] = None,
) -> BuiltArgs:
    """Reads the tensors and fills a MoeRouteArgs (workspace not yet set); the
    outputs are `routing`'s arrays, or new ones from `allocate`."""
    infos = _describe_all({"topk_ids": topk_ids, "topk_weights": topk_weights}, stream)
    ii, iw = infos["topk_ids"], infos["topk_weights"]
    _need(ii, 2, ("int32",), "top-k expert ids [T, k], -1 = no expert")
    _need(iw, 2, ("float32",), "top-k routing weights [T, k]")
    t, k = routing_dims(ii.shape, iw.shape)
    n_experts = _count(num_experts, "num_experts")
    first = _count(first_expert, "first_expert")
    local = n_experts - first if local_experts is None else _count(local_experts, "local_experts")
    layout = routing_layout(t, k, local)
    if routing is None:
        if allocate is None:
            raise ValueError("routing: ggemm allocates outputs only next to PyTorch tensors or CuPy arrays; "
                             "pass routing=, a ggemm.MoeRouting of device arrays")
        routing = MoeRouting(**{name: allocate(shape, dtypes[0], ii.device) for name, (shape, dtypes) in layout.items()})
    elif not isinstance(routing, MoeRouting):
        raise TypeError(f"routing: expected a ggemm.MoeRouting, got {type(routing).__name__}")
    for name, (shape, dtypes) in layout.items():
        info = infos[name] = describe(getattr(routing, name), name, stream)
        _need(info, len(shape), dtypes, f"routing output {list(shape)}")
        if info.shape != shape:
            raise ValueError(f"{name}: shape {info.shape}; T = {t}, k = {k} and {local} local experts need {shape}")
        if info.readonly:
            raise ValueError(f"{name}: the array is read-only")
    pointers = {route_field(name): name for name in infos}
    built = fill_pointers(route_struct(t, k, n_experts, first, local), infos, pointers)
    built.result = routing
    return built


def moe_route(
    topk_ids: Any,
    topk_weights: Any,
    *,
    num_experts: int,
    first_expert: int = 0,
    local_experts: Optional[int] = None,
    routing: Optional[MoeRouting] = None,
    workspace: Any = None,
    handle: Optional[Handle] = None,
    stream: Any = None,
) -> MoeRouting:
    """Sorts the (token, slot) pairs by expert (ggemm_moe_route); returns a ggemm.MoeRouting.

    topk_ids int32 [T, k] and topk_weights float32 [T, k] as for moe_ffn; this
    rank holds experts [first_expert, first_expert + local_experts) of
    num_experts (local_experts default: num_experts - first_expert). The
    outputs go into `routing` (preallocated arrays of the shapes MoeRouting
    lists) or new arrays next to topk_ids. With them the layer's steps can be
    called one by one:

        r = ggemm.moe_route(ids, weights, num_experts=E)
        ggemm.grouped_matmul(x, w_gate_up, h, r.a_offsets, r.expert_ids, r.usage_stats,
                             a_row_index=r.row_token, epilogue="swiglu")         # h [T*k, I]
        ggemm.grouped_matmul(h, w_down, y, r.a_offsets, r.expert_ids, r.usage_stats,
                             epilogue="row_scale", row_scale=r.row_weight)        # y [T*k, H]
        out = ggemm.moe_combine(y, r.slot_row)                                    # [T, H]
    """
    s = resolve_stream(stream, (topk_ids, topk_weights) + tuple(routing or ()))
    built = _build_moe_route_args(topk_ids, topk_weights, routing, num_experts=num_experts, first_expert=first_expert,
                                  local_experts=local_experts, stream=s, allocate=_allocator(topk_ids, s))
    return _run("ggemm_moe_route", built, topk_ids, s, handle, workspace)


def moe_route_workspace_size(tokens: int, top_k: int, local_experts: int) -> int:
    """Bytes of workspace moe_route needs (ggemm_moe_route_workspace_size)."""
    local = _count(local_experts, "local_experts")
    return workspace_bytes(route_struct(_count(tokens, "tokens"), _count(top_k, "top_k"), local, 0, local))


# ---- moe_combine ---------------------------------------------------------------------


def _build_moe_combine_args(
    y: Any, slot_row: Any, out: Any = None, *, accumulate: bool = False, out_dtype: Any = None, stream: int = 0,
    allocate: Optional[Allocate] = None,
) -> BuiltArgs:
    infos = _describe_all({"y": y, "slot_row": slot_row}, stream)
    iy, isr = infos["y"], infos["slot_row"]
    _need(iy, 2, list(_OPERAND_DTYPES), "the weighted down projection [rows, H], sorted rows")
    _need(isr, 2, ("int32",), "sorted row of each (token, slot) [T, k], as moe_route writes it")
    t, k = isr.shape
    y_rows, hidden = iy.shape
    want = iy.dtype if out_dtype is None else _dtype_name(out_dtype)
    if want not in (iy.dtype, "float32"):
        raise TypeError(f"out_dtype: {want} is neither y's dtype ({iy.dtype}) nor float32")
    if out is None and accumulate:
        raise ValueError("accumulate=True adds into out: pass out= (float32 [T, H])")
    out = _output(out, allocate, (t, hidden), want, iy.device, f"[T, H] = {(t, hidden)}, {want}")
    io = infos["out"] = describe(out, "out", stream)
    _need(io, 2, (want,) if out_dtype is not None else (iy.dtype, "float32"), "output [T, H]: y's dtype or float32")
    if io.shape != (t, hidden):
        raise ValueError(f"out: shape {io.shape} must be [T, H] = {(t, hidden)} (T from slot_row, H from y)")
    if io.readonly:
        raise ValueError("out: the array is read-only")
    args = combine_struct(_OPERAND_DTYPES[iy.dtype], _OUTPUT_DTYPES[io.dtype], t, k, hidden, y_rows, accumulate)
    built = fill_pointers(args, infos, {"y": "y", "slot_row": "slot_row", "out": "out"})
    built.result = out
    return built


def moe_combine(
    y: Any,
    slot_row: Any,
    out: Any = None,
    *,
    accumulate: bool = False,
    out_dtype: Any = None,
    handle: Optional[Handle] = None,
    stream: Any = None,
) -> Any:
    """Sums each token's k rows (ggemm_moe_combine); returns `out`.

        out[t] = sum over slots j with slot_row[t, j] >= 0 of y[slot_row[t, j]]

    in fp32, in slot order, rounded once. y [R, H] bf16/fp16 (rows in sorted
    order), slot_row int32 [T, k] as moe_route writes it, out [T, H] of y's
    dtype or float32 (allocated when None, of out_dtype, default y's dtype).
    accumulate=True adds into a float32 out.
    """
    s = resolve_stream(stream, (y, slot_row, out))
    built = _build_moe_combine_args(y, slot_row, out, accumulate=accumulate, out_dtype=out_dtype, stream=s,
                                    allocate=_allocator(y, s))
    return _run("ggemm_moe_combine", built, y, s, handle, None)


__all__ = [
    "MoeDims",
    "MoeRouting",
    "moe_combine",
    "moe_ffn",
    "moe_ffn_workspace_size",
    "moe_route",
    "moe_route_workspace_size",
]
