"""LoRA Q/K/V: the shrink (x by the fused LoRA-A weights into planes [3, M, R])
and the expand (the planes by LoRA-B into the Q/K/V outputs), over the
arguments and launch of _core."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple, Union

from ._capi import Config, LoraExpandQkvArgs, LoraShrinkQkvArgs
from ._core import (
    _INDEX_DTYPES,
    _OPERAND_DTYPES,
    _OUTPUT_DTYPES,
    BuiltArgs,
    Handle,
    _check_groups,
    _describe_all,
    _finish,
    _launch,
    _need,
    resolve_stream,
)
from ._tensor import TensorInfo


def _lora_scale(scale: Any) -> float:
    """The scale as the library's float; finiteness is the library's check (and message)."""
    if isinstance(scale, bool):
        raise TypeError("scale: expected a number, got a bool")
    try:
        return float(scale)
    except (TypeError, ValueError):
        raise TypeError(f"scale: expected a number, got {type(scale).__name__}") from None


def _check_planes(ip: TensorInfo, m: int, m_from: str) -> int:
    """Checks that p is [3, M, R] for the M read from `m_from`; returns R."""
    planes, p_rows, rank = ip.shape
    if planes != 3:
        raise ValueError(f"p: shape {ip.shape} has {planes} planes; it must be [3, M, R] (one plane each for q, k, v)")
    if p_rows != m:
        raise ValueError(
            f"p: shape {ip.shape} has {p_rows} rows per plane; {m_from} has M = {m} rows, so p needs [3, {m}, R]"
        )
    return rank


def _finish_lora(
    args: Any,
    infos: Dict[str, TensorInfo],
    pointers: Mapping[str, str],
    *,
    scale: Any,
    accumulate: bool,
    num_groups: Optional[int],
    max_rows_per_group: int,
    config: Any,
) -> BuiltArgs:
    """What the shrink and the expand share after their shape checks: the
    routing arrays' checks, _finish, then the scale and accumulate flag (the
    scale's own check last, where it has always been)."""
    io, ia, iu = infos["a_offsets"], infos["adapter_ids"], infos["usage_stats"]
    _need(io, 1, _INDEX_DTYPES, "group offsets [num_groups + 1]")
    _need(ia, 1, ("int32",), "adapter ids [num_groups], -1 = no adapter")
    _need(iu, 1, _INDEX_DTYPES, "usage stats [2]: max rows in a group, active groups")
    groups = _check_groups(io, ia, iu, num_groups)
    built = _finish(args, infos, pointers, "adapter_ids", groups, max_rows_per_group, config)
    built.args.scale = _lora_scale(scale)
    built.args.accumulate = 1 if accumulate else 0
    return built


def _build_lora_shrink_args(
    x: Any,
    lora_a: Any,
    p: Any,
    a_offsets: Any,
    adapter_ids: Any,
    usage_stats: Any,
    *,
    scale: float = 1.0,
    accumulate: bool = False,
    num_groups: Optional[int] = None,
    max_rows_per_group: int = 0,
    config: Union[None, Config, Mapping[str, int]] = None,
    stream: int = 0,
) -> BuiltArgs:
    """Reads the tensors and fills a LoraShrinkQkvArgs; no GPU and no library needed.

    M and K come from x [M, K], R from p [3, M, R]; lora_a must be [G, 3R, K].
    As for grouped_matmul, ranges and multiples (K and R multiples of 8,
    alignment, group count, a finite scale) are left to the library.
    """
    named = {"x": x, "lora_a": lora_a, "p": p, "a_offsets": a_offsets, "adapter_ids": adapter_ids,
             "usage_stats": usage_stats}
    infos = _describe_all(named, stream)
    ix, ia, ip = infos["x"], infos["lora_a"], infos["p"]
    _need(ix, 2, list(_OPERAND_DTYPES), "activations [M, K]")
    _need(ia, 3, list(_OPERAND_DTYPES), "LoRA-A weights [G, 3 * R, K]: q rows, then k, then v")
    _need(ip, 3, list(_OUTPUT_DTYPES), "planar output [3, M, R]")
    if ia.dtype != ix.dtype:
        raise TypeError(f"lora_a: dtype {ia.dtype} differs from x's {ix.dtype}; both operands share one dtype")
    if ip.readonly:
        raise ValueError("p: the array is read-only")

    m, k = ix.shape
    rank = _check_planes(ip, m, "x")
    num_adapters = ia.shape[0]
    if ia.shape[1] != 3 * rank:
        raise ValueError(
            f"lora_a: shape {ia.shape} has {ia.shape[1]} rows per adapter; p {ip.shape} gives R = {rank}, "
            f"so lora_a needs 3 * R = {3 * rank} ([G, 3 * R, K] = {(num_adapters, 3 * rank, k)})"
        )
    if ia.shape[2] != k:
        raise ValueError(f"lora_a: shape {ia.shape} has K = {ia.shape[2]}; x {ix.shape} has K = {k}")

    args = LoraShrinkQkvArgs()
    args.x_dtype = _OPERAND_DTYPES[ix.dtype]
    args.p_dtype = _OUTPUT_DTYPES[ip.dtype]
    args.m, args.k, args.rank, args.num_adapters = m, k, rank, num_adapters
    return _finish_lora(
        args, infos, {"x": "x", "lora_a": "lora_a", "p": "p"}, scale=scale, accumulate=accumulate,
        num_groups=num_groups, max_rows_per_group=max_rows_per_group, config=config,
    )


def _build_lora_expand_args(
    p: Any,
    lora_b: Any,
    q_out: Any,
    kv_out: Any,
    a_offsets: Any,
    adapter_ids: Any,
    usage_stats: Any,
    *,
    scale: float = 1.0,
    accumulate: bool = False,
    num_groups: Optional[int] = None,
    max_rows_per_group: int = 0,
    config: Union[None, Config, Mapping[str, int]] = None,
    stream: int = 0,
) -> BuiltArgs:
    """Reads the tensors and fills a LoraExpandQkvArgs; no GPU and no library needed.

    M and q_dim come from q_out [M, q_dim], kv_dim from kv_out [2M, kv_dim],
    R from p [3, M, R]; lora_b must be [G, q_dim + 2 * kv_dim, R].
    """
    named = {"p": p, "lora_b": lora_b, "q_out": q_out, "kv_out": kv_out, "a_offsets": a_offsets,
             "adapter_ids": adapter_ids, "usage_stats": usage_stats}
    infos = _describe_all(named, stream)
    ip, ib, iq, ikv = infos["p"], infos["lora_b"], infos["q_out"], infos["kv_out"]
    _need(ip, 3, list(_OPERAND_DTYPES), "planar activations [3, M, R], as lora_shrink_qkv writes them")
    _need(ib, 3, list(_OPERAND_DTYPES), "LoRA-B weights [G, q_dim + 2 * kv_dim, R]: q rows, then k, then v")
    _need(iq, 2, list(_OUTPUT_DTYPES), "q output [M, q_dim]")
    _need(ikv, 2, list(_OUTPUT_DTYPES), "k and v output [2 * M, kv_dim]: K rows, then V rows")
    if ib.dtype != ip.dtype:
        raise TypeError(f"lora_b: dtype {ib.dtype} differs from p's {ip.dtype}; both operands share one dtype")
    if ikv.dtype != iq.dtype:
        raise TypeError(f"kv_out: dtype {ikv.dtype} differs from q_out's {iq.dtype}; both outputs share one dtype")
    for info in (iq, ikv):
        if info.readonly:
            raise ValueError(f"{info.name}: the array is read-only")

    m, q_dim = iq.shape
    kv_rows, kv_dim = ikv.shape
    if kv_rows != 2 * m:
        raise ValueError(
            f"kv_out: shape {ikv.shape} has {kv_rows} rows; q_out {iq.shape} has M = {m}, so kv_out needs "
            f"2 * M = {2 * m} (K rows, then V rows)"
        )
    rank = _check_planes(ip, m, "q_out")
    num_adapters = ib.shape[0]
    n = q_dim + 2 * kv_dim
    if ib.shape[1:] != (n, rank):
        raise ValueError(
            f"lora_b: shape {ib.shape} does not match [G, q_dim + 2 * kv_dim, R] = {(num_adapters, n, rank)} "
            f"(q_dim = {q_dim} from q_out, kv_dim = {kv_dim} from kv_out, R = {rank} from p)"
        )

    args = LoraExpandQkvArgs()
    args.p_dtype = _OPERAND_DTYPES[ip.dtype]
    args.out_dtype = _OUTPUT_DTYPES[iq.dtype]
    args.m, args.rank, args.q_dim, args.kv_dim, args.num_adapters = m, rank, q_dim, kv_dim, num_adapters
    return _finish_lora(
        args, infos, {"p": "p", "lora_b": "lora_b", "q_out": "q_out", "kv_out": "kv_out"}, scale=scale,
        accumulate=accumulate, num_groups=num_groups, max_rows_per_group=max_rows_per_group, config=config,
    )


def lora_shrink_qkv(
    x: Any,
    lora_a: Any,
    p: Any,
    a_offsets: Any,
    adapter_ids: Any,
    usage_stats: Any,
    *,
    scale: float = 1.0,
    accumulate: bool = False,
    num_groups: Optional[int] = None,
    max_rows_per_group: int = 0,
    config: Union[None, Config, Mapping[str, int]] = None,
    stream: Any = None,
    handle: Optional[Handle] = None,
) -> Any:
    """Enqueues the LoRA-A shrink of Q, K and V in one launch; returns `p`.

    For row m of group g (rows a_offsets[g] .. a_offsets[g+1], adapter
    a = adapter_ids[g]) and s in 0, 1, 2 (q, k, v):
        p[s, m, :] = scale * x[m, :] @ lora_a[a, s*R:(s+1)*R, :].T
    (p += ... with accumulate=True, rounded once). Rows of groups whose adapter
    is -1 are zeroed (left as they are when accumulating); rows in no group are
    never written.

    x           [M, K] bf16/fp16, rows sorted by adapter
    lora_a      [G, 3*R, K], x's dtype: per adapter, A_q's R rows, then A_k's, then A_v's
    p           [3, M, R] bf16, fp16 or fp32, written in place (R is read from here)
    a_offsets   int32/uint32 [num_groups + 1] device prefix sums, a_offsets[0] == 0
    adapter_ids int32 [num_groups], -1 = no adapter
    usage_stats int32/uint32 [2] on the device: max rows in any group, active groups
    scale       multiplies the result (finite)
    accumulate  False: p = result; True: p += result
    num_groups, max_rows_per_group, config, stream, handle: as for grouped_matmul

    Raises GgemmError (from the library; e.g. K or R not a multiple of 8), or
    TypeError / ValueError for tensors it cannot use or whose shapes disagree.
    """
    s = resolve_stream(stream, (x, lora_a, p, a_offsets, adapter_ids, usage_stats))
    built = _build_lora_shrink_args(
        x, lora_a, p, a_offsets, adapter_ids, usage_stats, scale=scale, accumulate=accumulate,
        num_groups=num_groups, max_rows_per_group=max_rows_per_group, config=config, stream=s,
    )
    _launch("ggemm_lora_shrink_qkv", built, s, handle)
    return p


def lora_expand_qkv(
    p: Any,
    lora_b: Any,
    q_out: Any,
    kv_out: Any,
    a_offsets: Any,
    adapter_ids: Any,
    usage_stats: Any,
    *,
    scale: float = 1.0,
    accumulate: bool = False,
    num_groups: Optional[int] = None,
    max_rows_per_group: int = 0,
    config: Union[None, Config, Mapping[str, int]] = None,
    stream: Any = None,
    handle: Optional[Handle] = None,
) -> Tuple[Any, Any]:
    """Enqueues the LoRA-B expand of Q, K and V in one launch; returns (q_out, kv_out).

    For row m of group g (adapter a = adapter_ids[g]), with B = lora_b[a]:
        q_out[m]      = scale * p[0, m] @ B[:q_dim].T
        kv_out[m]     = scale * p[1, m] @ B[q_dim:q_dim + kv_dim].T         (K)
        kv_out[M + m] = scale * p[2, m] @ B[q_dim + kv_dim:].T              (V)
    (+= with accumulate=True: the LoRA delta adds into the base projections'
    outputs in place, rounded once). Grouped-query attention: q_dim != kv_dim
    is fine. Rows of groups whose adapter is -1 are zeroed (left as they are
    when accumulating); rows in no group are never written.

    p           [3, M, R] bf16/fp16, as lora_shrink_qkv writes it
    lora_b      [G, q_dim + 2*kv_dim, R], p's dtype: B_q's rows, then B_k's, then B_v's
    q_out       [M, q_dim] bf16, fp16 or fp32, written in place
    kv_out      [2*M, kv_dim], q_out's dtype: K in rows [0, M), V in rows [M, 2M)
    a_offsets, adapter_ids, usage_stats, scale, accumulate: as for lora_shrink_qkv
    num_groups, max_rows_per_group, config, stream, handle: as for grouped_matmul
    """
    s = resolve_stream(stream, (p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats))
    built = _build_lora_expand_args(
        p, lora_b, q_out, kv_out, a_offsets, adapter_ids, usage_stats, scale=scale, accumulate=accumulate,
        num_groups=num_groups, max_rows_per_group=max_rows_per_group, config=config, stream=s,
    )
    _launch("ggemm_lora_expand_qkv", built, s, handle)
    return q_out, kv_out
