"""Handles, errors, streams, the arguments every call shares, and grouped matmul
(LoRA Q/K/V: _lora; the MoE layer: _moe)."""

from __future__ import annotations

import ctypes
import sys
import threading
from ctypes import byref, c_void_p
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _capi
from ._capi import Config, Dtype, Epilogue, GroupedMatmulArgs, Status
from ._tensor import TensorInfo, cai_stream, describe, is_cupy_array, is_torch_tensor


class GgemmError(RuntimeError):
    """A ggemm call failed.

    Attributes: status (a Status when known, else the int), status_name
    (ggemm_status_string) and message (ggemm_last_error_message, which names
    the offending argument).
    """

    def __init__(self, status: int, message: str = "") -> None:
        try:
            self.status: Union[Status, int] = Status(int(status))
        except ValueError:
            self.status = int(status)
        self.status_name = _capi.status_string(int(status))
        self.message = message
        super().__init__(f"{self.status_name}: {message}" if message else self.status_name)

    def __reduce__(self):  # picklable (e.g. across multiprocessing)
        return (type(self), (int(self.status), self.message))


def check(status: int) -> None:
    """Raises GgemmError for a failed status, with this thread's last error message."""
    if status != Status.SUCCESS:
        raise GgemmError(status, _capi.last_error_message())


def version() -> int:
    """The loaded library's version (major * 10000 + minor * 100 + patch)."""
    return int(_capi.load_library().ggemm_version())


def status_string(status: int) -> str:
    """ggemm_status_string(status)."""
    _capi.load_library()
    return _capi.status_string(status)


def library_path() -> str:
    """Where the loaded libggemm came from (loads it if needed)."""
    _capi.load_library()
    return str(_capi.loaded_library_path())


# ---- handles ---------------------------------------------------------------


class Handle:
    """A ggemm handle on one CUDA device (ggemm_create / ggemm_destroy).

    Creating one loads the driver and the kernels; without a driver or a GPU it
    raises GgemmError (DRIVER_NOT_FOUND, NO_DEVICE or UNSUPPORTED_DEVICE).
    Use it as a context manager or call close(); close() must come after the
    work enqueued with the handle has finished.
    """

    def __init__(self, device: int = 0) -> None:
        self._lib = _capi.load_library()
        self._ptr: Optional[int] = None
        self._device_status: Any = None
        self.device = int(device)
        raw = c_void_p()
        check(self._lib.ggemm_create(byref(raw), self.device))
        self._ptr = raw.value

    @property
    def ptr(self) -> int:
        """The raw ggemm_handle_t, for passing to other C code."""
        if not self._ptr:
            raise ValueError("the handle is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        return not self._ptr

    def close(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr:
            check(self._lib.ggemm_destroy(ptr))

    def __enter__(self) -> "Handle":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else hex(self._ptr or 0)
        return f"ggemm.Handle(device={self.device}, {state})"

    def set_device_status(self, status: Any) -> None:
        """Checked mode (ggemm_set_device_status).

        `status` is a zeroed one-element int32 (or uint32) device tensor; every
        launch enqueued through this handle afterwards ORs the DeviceFault bits
        of malformed routing arrays into it. The caller keeps it alive while
        such launches may run and reads it after they finish. None turns
        checked mode off.
        """
        if status is None:
            check(self._lib.ggemm_set_device_status(self.ptr, None))
            self._device_status = None
            return
        info = describe(status, "status")
        if info.dtype not in ("int32", "uint32") or info.shape not in ((1,), ()):
            raise ValueError(f"status must be one int32 or uint32 element; got shape {info.shape}, dtype {info.dtype}")
        if info.device is not None and info.device != self.device:
            raise ValueError(f"status is on device {info.device}; this handle is on device {self.device}")
        check(self._lib.ggemm_set_device_status(self.ptr, info.ptr))
        self._device_status = status  # kept alive while the handle may use it

    def grouped_matmul(self, *args: Any, **kwargs: Any) -> Any:
        """grouped_matmul(...) on this handle."""
        return grouped_matmul(*args, handle=self, **kwargs)

    # The LoRA and MoE layer calls live in _lora and _moe, which build on
    # this module.
    def lora_shrink_qkv(self, *args: Any, **kwargs: Any) -> Any:
        """lora_shrink_qkv(...) on this handle."""
        from ._lora import lora_shrink_qkv

        return lora_shrink_qkv(*args, handle=self, **kwargs)

    def lora_expand_qkv(self, *args: Any, **kwargs: Any) -> Any:
        """lora_expand_qkv(...) on this handle."""
        from ._lora import lora_expand_qkv

        return lora_expand_qkv(*args, handle=self, **kwargs)

    def moe_ffn(self, *args: Any, **kwargs: Any) -> Any:
        """moe_ffn(...) on this handle."""
        from ._moe import moe_ffn

        return moe_ffn(*args, handle=self, **kwargs)

    def moe_route(self, *args: Any, **kwargs: Any) -> Any:
        """moe_route(...) on this handle."""
        from ._moe import moe_route

        return moe_route(*args, handle=self, **kwargs)

    def moe_combine(self, *args: Any, **kwargs: Any) -> Any:
        """moe_combine(...) on this handle."""
        from ._moe import moe_combine

        return moe_combine(*args, handle=self, **kwargs)


_default_lock = threading.Lock()
_default_handles: Dict[int, Handle] = {}


def default_handle(device: int = 0) -> Handle:
    """The process-wide handle of `device`, created on first use and kept until exit.

    It is never destroyed: work may be in flight when the interpreter exits,
    and the driver releases everything with the process.
    """
    with _default_lock:
        h = _default_handles.get(device)
        if h is None:
            h = Handle(device)
            _default_handles[device] = h
        return h


# ---- streams ---------------------------------------------------------------


def stream_handle(stream: Any) -> int:
    """A CUDA stream handle as an int, from an int, a torch.cuda.Stream
    (.cuda_stream), a CuPy stream (.ptr), an object with __cuda_stream__, or a
    ctypes pointer. 0 is the legacy default stream."""
    if stream is None:
        return 0
    if isinstance(stream, bool):
        raise TypeError("stream: expected a CUDA stream or an int handle, got a bool")
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):
        _version, handle = stream.__cuda_stream__()
        return int(handle)
    for attr in ("cuda_stream", "ptr", "handle"):
        v = getattr(stream, attr, None)
        if isinstance(v, int):
            return v
    if isinstance(stream, ctypes.c_void_p):
        return int(stream.value or 0)
    raise TypeError(f"stream: cannot read a CUDA stream handle from {type(stream).__name__}")


def resolve_stream(stream: Any, tensors: Sequence[Any]) -> int:
    """The stream to enqueue on: `stream` if given; else the current PyTorch
    stream of the first torch tensor's device; else CuPy's current stream;
    else the stream that __cuda_array_interface__ v3 producers name (when they
    agree); else 0, the legacy default stream."""
    if stream is not None:
        return stream_handle(stream)
    present = [t for t in tensors if t is not None]
    for t in present:
        if is_torch_tensor(t) and getattr(t, "is_cuda", False):
            import torch  # the caller's own torch: already imported

            # The current stream's raw handle (what torch.cuda.current_stream
            # wraps in an object first).
            return int(torch._C._cuda_getCurrentRawStream(t.get_device()))
    if any(is_cupy_array(t) for t in present):
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    streams = {s for s in (cai_stream(t) for t in present) if s is not None}
    if len(streams) == 1:
        return streams.pop()  # CAI's 1 and 2 are also the driver's legacy / per-thread handles
    return 0


# ---- arguments -------------------------------------------------------------

_OPERAND_DTYPES = {"bfloat16": Dtype.BF16, "float16": Dtype.FP16}
_OUTPUT_DTYPES = {"bfloat16": Dtype.BF16, "float16": Dtype.FP16, "float32": Dtype.FP32}
_INDEX_DTYPES = ("int32", "uint32")
_EPILOGUE_NAMES = {
    "store": Epilogue.STORE,
    "accumulate": Epilogue.ACCUMULATE,
    "row_scale": Epilogue.ROW_SCALE,
    "rowscale": Epilogue.ROW_SCALE,
    "swiglu": Epilogue.SWIGLU,
}
_EPILOGUE_EXPECTED = "expected 'store', 'accumulate', 'row_scale' or 'swiglu'"


def parse_epilogue(epilogue: Union[str, int, Epilogue]) -> Epilogue:
    if isinstance(epilogue, str):
        key = epilogue.strip().lower().replace("-", "_")
        if key not in _EPILOGUE_NAMES:
            raise ValueError(f"epilogue={epilogue!r}: {_EPILOGUE_EXPECTED}")
        return _EPILOGUE_NAMES[key]
    try:
        return Epilogue(int(epilogue))
    except (TypeError, ValueError):
        raise ValueError(f"epilogue={epilogue!r}: {_EPILOGUE_EXPECTED}") from None


def grouped_matmul_dims(
    a_shape: Sequence[int],
    b_shape: Sequence[int],
    out_shape: Sequence[int],
    *,
    transpose_b: bool,
    epilogue: Epilogue,
    planes: int = 1,
    gather: bool = False,
) -> Tuple[int, int, int, int]:
    """(m, n, k, num_experts) of a grouped matmul from its 2-D a and out and 3-D b;
    ValueError naming the operand whose shape disagrees.

    n is the weights' row count: out's columns, or twice them with the SwiGLU
    epilogue (out [M, N/2]). With gather (a_row_index) a may have any number
    of rows; else M of them (3 M with plane splits).
    """
    m, out_cols = out_shape
    swiglu = epilogue == Epilogue.SWIGLU
    n = 2 * out_cols if swiglu else out_cols
    k = a_shape[1]
    if gather:
        if planes != 1:
            raise ValueError("a_row_index: gather on load cannot be combined with plane_splits")
    elif a_shape[0] != planes * m:
        need = f"3 * {m} (plane splits are on)" if planes == 3 else f"{m}"
        raise ValueError(f"a: has {a_shape[0]} rows; out has {m}, so a needs {need}")
    num_experts = b_shape[0]
    expect_b = (num_experts, n, k) if transpose_b else (num_experts, k, n)
    if tuple(b_shape) != expect_b:
        layout = "[E, N, K] (transpose_b=True)" if transpose_b else "[E, K, N] (transpose_b=False)"
        why = f"; epilogue='swiglu' writes out [M, N/2], so N = {n}" if swiglu else ""
        raise ValueError(
            f"b: shape {tuple(b_shape)} does not match {layout} = {expect_b} for a {tuple(a_shape)} and out "
            f"{tuple(out_shape)}{why}"
        )
    return m, n, k, num_experts


@dataclass
class BuiltArgs:
    """A filled argument struct, the device the tensors live on (None if no
    tensor says), what must stay alive until the call returns, and the call's
    result."""

    args: Any  # GroupedMatmulArgs, LoraShrinkQkvArgs, LoraExpandQkvArgs or a MoE struct
    device: Optional[int]
    tensors: Dict[str, TensorInfo]
    keepalive: List[Any] = field(default_factory=list)
    result: Any = None  # what the call returns (the MoE calls may allocate it)


def _need(info: TensorInfo, ndim: int, dtypes: Sequence[str], what: str) -> None:
    if len(info.shape) != ndim:
        raise ValueError(f"{info.name}: expected {ndim}-D ({what}), got shape {info.shape}")
    if info.dtype not in dtypes:
        raise TypeError(f"{info.name}: dtype {info.dtype} is not allowed here ({what}: {' or '.join(dtypes)})")
    if not info.is_contiguous():
        raise ValueError(
            f"{info.name}: ggemm needs a densely packed row-major (C-contiguous) tensor; got shape "
            f"{info.shape} with strides {info.strides} (in elements). Make a contiguous copy first "
            "(e.g. .contiguous() in PyTorch, cupy.ascontiguousarray)."
        )


def _check_groups(io: TensorInfo, ie: TensorInfo, iu: TensorInfo, num_groups: Optional[int]) -> int:
    """The group count (default len(a_offsets) - 1, or len(group_ends) when
    `io` is the group ends), checked against the routing arrays' lengths."""
    ends = io.name == "group_ends"
    capacity = io.shape[0] if ends else io.shape[0] - 1
    groups = capacity if num_groups is None else int(num_groups)
    if capacity < 1:
        need = "num_groups >= 1" if ends else "num_groups + 1 >= 2"
        raise ValueError(f"{io.name}: needs {need} entries, has {io.shape[0]}")
    if groups > capacity:
        raise ValueError(f"num_groups={groups}: {io.name} holds only {capacity} groups ({io.shape[0]} entries)")
    if ie.shape[0] < groups:
        raise ValueError(f"{ie.name}: has {ie.shape[0]} entries, num_groups is {groups}")
    if iu.shape[0] < 2:
        raise ValueError(f"usage_stats: needs 2 entries (max rows in a group, active groups), has {iu.shape[0]}")
    return groups


def _one_device(infos: Mapping[str, TensorInfo]) -> Optional[int]:
    """The CUDA ordinal all the tensors share (None when none says); refuses a mix."""
    devices = {i.device for i in infos.values() if i.device is not None}
    if len(devices) > 1:
        where = ", ".join(f"{i.name}: cuda:{i.device}" for i in infos.values() if i.device is not None)
        raise ValueError(f"tensors are on different devices ({where})")
    return devices.pop() if devices else None


def _describe_all(named: Mapping[str, Any], stream: int) -> Dict[str, TensorInfo]:
    """Each tensor's TensorInfo, by the argument name its messages use."""
    return {name: describe(obj, name, stream) for name, obj in named.items()}


def _finish(
    args: Any,
    infos: Dict[str, TensorInfo],
    pointers: Mapping[str, str],
    ids_field: str,
    groups: int,
    max_rows_per_group: int,
    config: Any,
) -> BuiltArgs:
    """The part of building that every call shares, after its own checks.

    Refuses tensors on different devices, then fills the struct's pointers
    (`pointers` maps a struct field to the argument name of its tensor), the
    routing arrays (`ids_field`: expert_ids or adapter_ids), the checked group
    count, max_rows_per_group and the config, and wraps the struct with what
    must stay alive (the config, DLPack capsules).
    """
    built = fill_pointers(args, infos, pointers)
    iid, iu = infos[ids_field], infos["usage_stats"]
    if "group_ends" in infos:  # grouped_matmul only: torch's offs in place of a_offsets
        args.group_ends = infos["group_ends"].ptr or None
    else:
        args.a_offsets = infos["a_offsets"].ptr or None
    args.expert_usage_stats = iu.ptr or None
    setattr(args, ids_field, iid.ptr or None)
    args.num_groups = groups
    args.max_rows_per_group = int(max_rows_per_group)
    if config is not None:
        cfg = config if isinstance(config, Config) else Config(**dict(config))
        args.config = ctypes.pointer(cfg)
        built.keepalive.append(cfg)
    return built


def fill_pointers(args: Any, infos: Dict[str, TensorInfo], pointers: Mapping[str, str]) -> BuiltArgs:
    """Refuses tensors on different devices, sets the struct's pointer fields
    (`pointers` maps a struct field to the argument name of its tensor) and
    wraps the struct with what must stay alive (DLPack capsules)."""
    device = _one_device(infos)
    for struct_field, name in pointers.items():
        setattr(args, struct_field, infos[name].ptr or None)
    keepalive: List[Any] = [i.keepalive for i in infos.values() if i.keepalive]
    return BuiltArgs(args=args, device=device, tensors=infos, keepalive=keepalive)


def _build_args(
    a: Any,
    b: Any,
    out: Any,
    a_offsets: Any,
    expert_ids: Any,
    usage_stats: Any,
    *,
    transpose_b: bool = True,
    epilogue: Union[str, int, Epilogue] = "store",
    row_scale: Any = None,
    num_groups: Optional[int] = None,
    max_rows_per_group: int = 0,
    plane_splits: Tuple[int, int] = (0, 0),
    config: Union[None, Config, Mapping[str, int]] = None,
    a_row_index: Any = None,
    group_ends: Any = None,
    stream: int = 0,
) -> BuiltArgs:
    """Reads the tensors and fills a GroupedMatmulArgs; no GPU and no library needed.

    Checks here are those the C library cannot make (it sees bare pointers):
    dtypes, ranks, contiguity, shapes that must agree, one device. Ranges and
    multiples (n and k multiples of 8, alignment, group count) are the
    library's, so that its message is the one users see.
    """
    epi = parse_epilogue(epilogue)
    if (a_offsets is None) == (group_ends is None):
        raise ValueError(
            "a_offsets and group_ends: give the groups as exactly one of them ("
            + ("both were given)" if a_offsets is not None else "neither was given)")
        )
    routing = "a_offsets" if group_ends is None else "group_ends"
    named = {"a": a, "b": b, "out": out, routing: a_offsets if group_ends is None else group_ends,
             "expert_ids": expert_ids, "usage_stats": usage_stats}
    if row_scale is not None:
        named["row_scale"] = row_scale
    if a_row_index is not None:
        named["a_row_index"] = a_row_index
    infos = _describe_all(named, stream)
    ia, ib, ic = infos["a"], infos["b"], infos["out"]
    io, ie, iu = infos[routing], infos["expert_ids"], infos["usage_stats"]

    _need(ia, 2, list(_OPERAND_DTYPES), "activations [M, K]")
    _need(ib, 3, list(_OPERAND_DTYPES), "weights [E, N, K] if transpose_b else [E, K, N]")
    _need(ic, 2, list(_OUTPUT_DTYPES), "output [M, N]")
    _need(io, 1, _INDEX_DTYPES, "group offsets [num_groups + 1]" if group_ends is None
          else "group ends [num_groups] (torch._grouped_mm's offs)")
    _need(ie, 1, ("int32",), "expert ids [num_groups]")
    _need(iu, 1, _INDEX_DTYPES, "usage stats [2]: max rows in a group, active groups")
    if ib.dtype != ia.dtype:
        raise TypeError(f"b: dtype {ib.dtype} differs from a's {ia.dtype}; both operands share one dtype")
    if ic.readonly:
        raise ValueError("out: the array is read-only")

    split0, split1 = (int(s) for s in plane_splits)
    planes = 3 if (split0, split1) != (0, 0) else 1
    gather = a_row_index is not None
    m, n, k, num_experts = grouped_matmul_dims(
        ia.shape, ib.shape, ic.shape, transpose_b=transpose_b, epilogue=epi, planes=planes, gather=gather
    )

    groups = _check_groups(io, ie, iu, num_groups)

    pointers = {"a": "a", "b": "b", "c": "out"}
    if gather:
        ii = infos["a_row_index"]
        _need(ii, 1, ("int32",), "gather index [M]: the row of a that row m of the product reads")
        if ii.shape[0] < m:
            raise ValueError(f"a_row_index: has {ii.shape[0]} entries, M is {m}")
        pointers["a_row_index"] = "a_row_index"
    if epi == Epilogue.ROW_SCALE:
        if row_scale is None:
            raise ValueError("epilogue='row_scale' needs row_scale, a float32 device array of M entries")
        isc = infos["row_scale"]
        _need(isc, 1, ("float32",), "per-row scale [M]")
        if isc.shape[0] < m:
            raise ValueError(f"row_scale: has {isc.shape[0]} entries, M is {m}")
        pointers["row_scale"] = "row_scale"
    elif row_scale is not None:
        raise ValueError(f"row_scale is read only by epilogue='row_scale' (epilogue is {epi.name.lower()!r})")

    args = GroupedMatmulArgs()
    args.a_dtype = _OPERAND_DTYPES[ia.dtype]
    args.b_dtype = _OPERAND_DTYPES[ib.dtype]
    args.c_dtype = _OUTPUT_DTYPES[ic.dtype]
    args.m, args.n, args.k, args.num_experts = m, n, k, num_experts
    args.transpose_b = 1 if transpose_b else 0
    args.a_plane_split0, args.a_plane_split1 = split0, split1
    args.epilogue = int(epi)
    args.a_rows = ia.shape[0] if gather else 0
    return _finish(args, infos, pointers, "expert_ids", groups, max_rows_per_group, config)


def grouped_matmul(
    a: Any,
    b: Any,
    out: Any,
    a_offsets: Any,
    expert_ids: Any,
    usage_stats: Any,
    *,
    transpose_b: bool = True,
    epilogue: Union[str, int, Epilogue] = "store",
    row_scale: Any = None,
    num_groups: Optional[int] = None,
    max_rows_per_group: int = 0,
    plane_splits: Tuple[int, int] = (0, 0),
    config: Union[None, Config, Mapping[str, int]] = None,
    a_row_index: Any = None,
    group_ends: Any = None,
    stream: Any = None,
    handle: Optional[Handle] = None,
) -> Any:
    """Enqueues one grouped matrix product; returns `out`.

    For row m of group g (rows a_offsets[g] .. a_offsets[g+1]) and column n:
        out[m, n] = sum_k A[m, k] * W[expert_ids[g]][n, k]
    with W[e] = b[e] ([E, N, K], transpose_b=True) or b[e].T ([E, K, N]), and
    A[m] = a[m], or a[a_row_index[m]] with gather on load.
    Rows of groups whose expert id is -1 are zeroed.

    a           [M, K] (or [3*M, K] with plane_splits; [any rows, K] with a_row_index) bf16/fp16,
                rows sorted by group unless a_row_index is given
    b           [E, N, K] or [E, K, N], a's dtype
    out         [M, N] bf16, fp16 or fp32, written in place; [M, N/2] with epilogue='swiglu'
    a_offsets   int32/uint32 [num_groups + 1] device prefix sums, a_offsets[0] == 0; or None
                with group_ends
    expert_ids  int32 [num_groups], -1 = inactive group
    usage_stats int32/uint32 [2] on the device: max rows in any group, active groups
    group_ends  int32/uint32 [num_groups] device group ends in place of a_offsets (torch._grouped_mm's
                offs: a_offsets without its leading zero), passed to the library as they are
    epilogue    'store', 'accumulate' (out += result), 'row_scale' (out = row_scale[m] * result) or
                'swiglu' (the MoE gate_up: weight rows [0, N/2) gate, [N/2, N) up;
                out[m, j] = silu(r[m, j]) * r[m, N/2 + j] on the fp32 result r, rounded once)
    row_scale   float32 [M], for epilogue='row_scale'
    a_row_index int32 [M] on the device: gather on load, row m reads a[a_row_index[m]] (an index
                outside a's rows reads zeros); the MoE layer's tokens stay in token order
    num_groups  capacity of the group arrays; default len(a_offsets) - 1
    max_rows_per_group  a host upper bound on rows in a group (launch sizing); 0 = M
    plane_splits (s0, s1): output column n reads activation plane (n >= s0) + (n >= s1)
    config      None (automatic), a ggemm.Config, or a dict of its fields
    stream      a CUDA stream (int handle, torch.cuda.Stream, CuPy stream); default:
                the caller's current PyTorch / CuPy stream, else the legacy default stream
    handle      a ggemm.Handle; default: one shared handle per device

    Tensors may be PyTorch CUDA tensors, CuPy arrays, or anything exposing
    __cuda_array_interface__ or DLPack; they must be C-contiguous. Nothing is
    synchronised: the call can be captured in a CUDA graph. Raises GgemmError
    (from the library), or TypeError / ValueError for tensors it cannot use.
    """
    # PyTorch tensors: the fast path (_torch_args), for every call its quick
    # checks pass; the rest, and other array types, the general path.
    fast = _torch_fast_path()
    if fast is None or not fast.grouped_matmul(
        a, b, out, a_offsets, expert_ids, usage_stats, transpose_b, epilogue, row_scale, num_groups,
        max_rows_per_group, plane_splits, config, a_row_index, group_ends, stream, handle,
    ):
        _grouped_matmul_general(
            a, b, out, a_offsets, expert_ids, usage_stats, transpose_b=transpose_b, epilogue=epilogue,
            row_scale=row_scale, num_groups=num_groups, max_rows_per_group=max_rows_per_group,
            plane_splits=plane_splits, config=config, a_row_index=a_row_index, group_ends=group_ends, stream=stream,
            handle=handle,
        )
    return out


def _grouped_matmul_general(a: Any, b: Any, out: Any, a_offsets: Any, expert_ids: Any, usage_stats: Any, *,
                            stream: Any = None, handle: Optional[Handle] = None, **options: Any) -> None:
    """grouped_matmul through TensorInfo descriptions of any array type: every
    check with its message, then the call."""
    tensors = (a, b, out, a_offsets, expert_ids, usage_stats, options.get("row_scale"), options.get("a_row_index"),
               options.get("group_ends"))
    s = resolve_stream(stream, tensors)
    built = _build_args(a, b, out, a_offsets, expert_ids, usage_stats, stream=s, **options)
    _launch("ggemm_grouped_matmul", built, s, handle)


_torch_args_module: Any = None


def _torch_fast_path() -> Any:
    """ggemm._torch_args once the caller's process has imported torch, else
    None (ggemm itself never imports it)."""
    global _torch_args_module
    if _torch_args_module is None and "torch" in sys.modules:
        from . import _torch_args

        _torch_args_module = _torch_args
    return _torch_args_module


def handle_for(built: BuiltArgs, handle: Optional[Handle]) -> Handle:
    """The handle a call runs on: the default one of the tensors' device, or
    `handle`, which must be on that device."""
    if handle is None:
        return default_handle(built.device if built.device is not None else 0)
    if built.device is not None and handle.device != built.device:
        raise ValueError(f"the tensors are on cuda:{built.device} but the handle is on device {handle.device}")
    return handle


def _launch(function: str, built: BuiltArgs, stream: int, handle: Optional[Handle]) -> None:
    """Calls `function` of the library with the built struct on `stream`; raises GgemmError on failure.

    `built` (its DLPack capsules and config) stays alive until the call has
    returned, when the library has read every pointer.
    """
    handle = handle_for(built, handle)
    status = _capi.require_function(handle._lib, function)(handle.ptr, byref(built.args), stream or None)
    check(status)
