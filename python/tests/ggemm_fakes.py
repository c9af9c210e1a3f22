"""Objects that look like CUDA tensors to ggemm without any GPU: they expose
__cuda_array_interface__ or DLPack over made-up device addresses."""

from __future__ import annotations

import ctypes
from typing import Any, Optional, Sequence, Tuple

from ggemm._tensor import DLManagedTensor

_SIZES = {"<V2": 2, "<f2": 2, "<f4": 4, "<f8": 8, "<i4": 4, "<u4": 4, "<i8": 8, "|u1": 1, ">f2": 2, "<u2": 2}

# Typestr and dtype attribute of each canonical dtype, as PyTorch exports them.
TORCH_LIKE = {
    "bfloat16": ("<V2", "torch.bfloat16"),
    "float16": ("<f2", "torch.float16"),
    "float32": ("<f4", "torch.float32"),
    "int32": ("<i4", "torch.int32"),
    "uint32": ("<u4", "torch.uint32"),
    "int64": ("<i8", "torch.int64"),
}


class FakeDevice:
    def __init__(self, index: int) -> None:
        self.index = index
        self.type = "cuda"


class FakeCudaArray:
    """__cuda_array_interface__ over a fake address. `dtype` is the producer's
    own dtype attribute (a string here, as str(torch.bfloat16) would give)."""

    _next = 0x7F00_0000_0000

    def __init__(
        self,
        shape: Sequence[int],
        typestr: str,
        *,
        dtype: Optional[str] = None,
        ptr: Optional[int] = None,
        strides: Optional[Tuple[int, ...]] = None,
        readonly: bool = False,
        descr: Any = None,
        device: Optional[int] = None,
        stream: Optional[int] = None,
        mask: Any = None,
    ) -> None:
        self.shape = tuple(shape)
        if ptr is None:  # 256-byte aligned, distinct, like cudaMalloc
            ptr = FakeCudaArray._next
            size = _SIZES[typestr]
            for s in self.shape:
                size *= s
            FakeCudaArray._next += (size + 255) // 256 * 256 + 256
        self.ptr = ptr
        self._cai = {"shape": self.shape, "typestr": typestr, "data": (ptr, readonly), "version": 3}
        if strides is not None:
            self._cai["strides"] = strides
        if descr is not None:
            self._cai["descr"] = descr
        if stream is not None:
            self._cai["stream"] = stream
        if mask is not None:
            self._cai["mask"] = mask
        if dtype is not None:
            self.dtype = dtype
        if device is not None:
            self.device = FakeDevice(device)

    @property
    def __cuda_array_interface__(self) -> dict:
        return dict(self._cai)


def torch_like(shape: Sequence[int], dtype: str, **kw: Any) -> FakeCudaArray:
    typestr, name = TORCH_LIKE[dtype]
    return FakeCudaArray(shape, typestr, dtype=name, **kw)


def moe_problem(
    m: int = 40, n: int = 64, k: int = 128, experts: int = 4, groups: int = 5, *, dtype: str = "bfloat16",
    out_dtype: str = "bfloat16", transpose_b: bool = True, planes: int = 1, **kw: Any
):
    """The six positional arguments of grouped_matmul, as fakes."""
    a = torch_like((planes * m, k), dtype, **kw)
    b = torch_like((experts, n, k) if transpose_b else (experts, k, n), dtype, **kw)
    out = torch_like((m, n), out_dtype, **kw)
    offsets = torch_like((groups + 1,), "int32", **kw)
    ids = torch_like((groups,), "int32", **kw)
    stats = torch_like((2,), "int32", **kw)
    return a, b, out, offsets, ids, stats


def lora_shrink_problem(
    m: int = 40, k: int = 128, rank: int = 16, adapters: int = 4, groups: int = 5, *, dtype: str = "bfloat16",
    p_dtype: str = "bfloat16", **kw: Any
):
    """The six positional arguments of lora_shrink_qkv, as fakes: x, lora_a, p, offsets, ids, stats."""
    x = torch_like((m, k), dtype, **kw)
    lora_a = torch_like((adapters, 3 * rank, k), dtype, **kw)
    p = torch_like((3, m, rank), p_dtype, **kw)
    return (x, lora_a, p) + _routing(groups, **kw)


def lora_expand_problem(
    m: int = 40, rank: int = 16, q_dim: int = 128, kv_dim: int = 32, adapters: int = 4, groups: int = 5, *,
    dtype: str = "bfloat16", out_dtype: str = "bfloat16", **kw: Any
):
    """The seven positional arguments of lora_expand_qkv, as fakes: p, lora_b, q_out, kv_out, offsets, ids, stats."""
    p = torch_like((3, m, rank), dtype, **kw)
    lora_b = torch_like((adapters, q_dim + 2 * kv_dim, rank), dtype, **kw)
    q_out = torch_like((m, q_dim), out_dtype, **kw)
    kv_out = torch_like((2 * m, kv_dim), out_dtype, **kw)
    return (p, lora_b, q_out, kv_out) + _routing(groups, **kw)


def _routing(groups: int, **kw: Any):
    return (torch_like((groups + 1,), "int32", **kw), torch_like((groups,), "int32", **kw),
            torch_like((2,), "int32", **kw))


# ---- DLPack ----------------------------------------------------------------

_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_CAPSULE_NAME = ctypes.c_char_p(b"dltensor")  # must outlive every capsule


class FakeDLPack:
    """A DLPack producer over a fake address (DLPack device type 2 = CUDA)."""

    def __init__(
        self,
        shape: Sequence[int],
        code: int,
        bits: int,
        *,
        ptr: int = 0x7E00_0000_0000,
        byte_offset: int = 0,
        strides: Optional[Sequence[int]] = None,
        device_type: int = 2,
        device_id: int = 0,
        accepts_stream: bool = True,
    ) -> None:
        self.shape, self.code, self.bits = tuple(shape), code, bits
        self.ptr, self.byte_offset, self.strides = ptr, byte_offset, strides
        self.device_type, self.device_id = device_type, device_id
        self.accepts_stream = accepts_stream
        self.streams_seen: list = []
        self._keep: list = []

    def __dlpack_device__(self):
        return (self.device_type, self.device_id)

    def __dlpack__(self, **kwargs: Any):
        if not self.accepts_stream and kwargs:
            raise TypeError("__dlpack__() takes no keyword arguments")
        self.streams_seen.append(kwargs.get("stream"))
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * ndim)(*self.shape)
        strides = (ctypes.c_int64 * ndim)(*self.strides) if self.strides is not None else None
        mt = DLManagedTensor()
        t = mt.dl_tensor
        t.data = self.ptr
        t.device.device_type, t.device.device_id = self.device_type, self.device_id
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = self.code, self.bits, 1
        t.shape = ctypes.cast(shape, type(t.shape))
        if strides is not None:
            t.strides = ctypes.cast(strides, type(t.strides))
        t.byte_offset = self.byte_offset
        self._keep.append((mt, shape, strides))
        return _PyCapsule_New(ctypes.addressof(mt), _CAPSULE_NAME, None)


def moe_ffn_problem(
    tokens: int = 5, hidden: int = 256, intermediate: int = 96, experts: int = 8, top_k: int = 2, *,
    dtype: str = "bfloat16", **kw: Any
):
    """The six array arguments of moe_ffn, as fakes: x, w_gate_up, w_down, topk_ids, topk_weights, out."""
    return (
        torch_like((tokens, hidden), dtype, **kw),
        torch_like((experts, 2 * intermediate, hidden), dtype, **kw),
        torch_like((experts, hidden, intermediate), dtype, **kw),
        torch_like((tokens, top_k), "int32", **kw),
        torch_like((tokens, top_k), "float32", **kw),
        torch_like((tokens, hidden), dtype, **kw),
    )


def fake_allocate(shape: Sequence[int], dtype: str, device: Optional[int]) -> FakeCudaArray:
    """An allocator for the MoE builders: a new fake of that shape and dtype."""
    return torch_like(tuple(shape), dtype, device=device)
