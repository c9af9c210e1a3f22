"""What ggemm needs to know about a tensor: device address, shape, dtype, device.

Three ways in, tried in this order:
  1. PyTorch tensors, read directly (data_ptr, shape, stride, dtype, device):
     no protocol object is built, bf16 is unambiguous, and tensors that
     require grad are accepted (ggemm writes `out` in place; autograd does not
     see it).
  2. __cuda_array_interface__ (CuPy, Numba, PyTorch, anything that has it).
  3. DLPack: __dlpack_device__ / __dlpack__ (JAX, CuPy, PyTorch, ...).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16, c_uint64, c_void_p
from dataclasses import dataclass, field
from typing import Any, List, Optional, Tuple

# Canonical dtype names and sizes.
ITEMSIZE = {
    "bfloat16": 2,
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "bool": 1,
}

# __cuda_array_interface__ typestr (kind + size) -> canonical name. '<V2' is
# left out: an opaque 2-byte type is bf16 only when the producer says so.
_TYPESTR = {
    "f2": "float16",
    "f4": "float32",
    "f8": "float64",
    "i1": "int8",
    "u1": "uint8",
    "i2": "int16",
    "u2": "uint16",
    "i4": "int32",
    "u4": "uint32",
    "i8": "int64",
    "u8": "uint64",
    "b1": "bool",
}

# DLPack (dlpack.h): device types and dtype codes.
KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_KDL_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host (pinned)", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                     10: "ROCm", 13: "CUDA managed"}
_KDL_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat"}


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [
        ("data", c_void_p),
        ("device", DLDevice),
        ("ndim", c_int32),
        ("dtype", DLDataType),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("byte_offset", c_uint64),
    ]


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]


@dataclass
class TensorInfo:
    """One tensor as ggemm sees it. Strides are in elements; None = C-contiguous."""

    name: str
    ptr: int
    shape: Tuple[int, ...]
    dtype: str
    strides: Optional[Tuple[int, ...]] = None
    device: Optional[int] = None  # CUDA ordinal, when the producer tells
    readonly: bool = False
    source: str = "cai"  # "torch", "cai" or "dlpack"
    keepalive: List[Any] = field(default_factory=list)  # e.g. a DLPack capsule

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    def is_contiguous(self) -> bool:
        """C-contiguous (dense row-major); strides of size-1 dims do not matter."""
        if self.strides is None or self.numel == 0:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True


def is_torch_tensor(obj: Any) -> bool:
    t = type(obj)
    return t.__module__.split(".")[0] == "torch" or any(
        c.__module__ == "torch" and c.__name__ == "Tensor" for c in t.__mro__
    )


def is_cupy_array(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "cupy"


def _dtype_hint(obj: Any) -> str:
    """The producer's own dtype name (torch.bfloat16 -> 'bfloat16'), or ''."""
    dt = getattr(obj, "dtype", None)
    if dt is None:
        return ""
    name = getattr(dt, "name", None)
    text = name if isinstance(name, str) else str(dt)
    return text.rsplit(".", 1)[-1].strip().lower()


def _device_hint(obj: Any) -> Optional[int]:
    dev = getattr(obj, "device", None)
    if dev is None:
        return None
    for attr in ("index", "id"):  # torch.device.index, cupy.cuda.Device.id
        v = getattr(dev, attr, None)
        if isinstance(v, int):
            return v
    return None


# Per torch dtype and layout object, what _from_torch derives from it: read
# once, since every call describes six or more tensors.
_TORCH_DTYPE_NAMES: dict = {}
_TORCH_LAYOUT_IS_STRIDED: dict = {}


def _from_torch(obj: Any, name: str) -> TensorInfo:
    device = obj.get_device()  # the CUDA ordinal; -1 on the CPU
    if device < 0 or not obj.is_cuda:
        raise ValueError(f"{name}: ggemm needs a CUDA tensor; this one is on {obj.device}")
    layout = obj.layout
    strided = _TORCH_LAYOUT_IS_STRIDED.get(layout)
    if strided is None:
        strided = _TORCH_LAYOUT_IS_STRIDED.setdefault(layout, str(layout) == "torch.strided")
    if not strided:
        raise ValueError(f"{name}: ggemm needs a dense (strided) tensor; got layout {obj.layout}")
    dtype = _TORCH_DTYPE_NAMES.get(obj.dtype)
    if dtype is None:
        dtype = _TORCH_DTYPE_NAMES.setdefault(obj.dtype, _dtype_hint(obj))
    if dtype not in ITEMSIZE:
        raise TypeError(f"{name}: dtype {obj.dtype} is not one ggemm reads")
    return TensorInfo(
        name=name,
        ptr=obj.data_ptr(),
        shape=tuple(obj.shape),
        dtype=dtype,
        # None = C-contiguous (PyTorch says so without a walk over the strides)
        strides=None if obj.is_contiguous() else obj.stride(),
        device=device,
        source="torch",
    )


def cai_dtype(cai: dict, hint: str, name: str) -> str:
    """Canonical dtype of a __cuda_array_interface__, using the producer's dtype name for bf16.

    '<V2' is what PyTorch (and ml_dtypes) export for bfloat16; the object's
    dtype attribute or the 'descr' field must say bfloat16 for ggemm to read
    it so. The producer's dtype name also wins when the typestr is a
    2-byte type it disagrees with (a producer exporting bf16 as '<f2').
    """
    typestr = cai.get("typestr")
    if not isinstance(typestr, str) or len(typestr) < 3:
        raise TypeError(f"{name}: __cuda_array_interface__ has no valid typestr ({typestr!r})")
    order, code = typestr[0], typestr[1:]
    if order == ">":
        raise TypeError(f"{name}: big-endian typestr {typestr!r}; CUDA data is little-endian")
    descr_names = " ".join(str(part) for entry in (cai.get("descr") or []) for part in entry).lower()
    says_bf16 = hint in ("bfloat16", "bf16") or "bfloat16" in descr_names or "bf16" in descr_names
    if code in ("V2", "f2", "u2", "i2") and says_bf16:
        return "bfloat16"
    if code == "V2":
        raise TypeError(
            f"{name}: typestr {typestr!r} is an opaque 2-byte type; ggemm reads it as bfloat16 only when the "
            f"object's dtype (got {hint or 'none'!r}) or the interface's descr says bfloat16"
        )
    if code not in _TYPESTR:
        raise TypeError(f"{name}: typestr {typestr!r} is not a dtype ggemm reads")
    return _TYPESTR[code]


def _from_cai(obj: Any, cai: Any, name: str) -> TensorInfo:
    if not isinstance(cai, dict):
        raise TypeError(f"{name}: __cuda_array_interface__ is not a dict")
    if cai.get("mask") is not None:
        raise ValueError(f"{name}: masked arrays are not supported")
    shape = tuple(int(s) for s in cai["shape"])
    dtype = cai_dtype(cai, _dtype_hint(obj), name)
    ptr, readonly = cai["data"]
    strides_bytes = cai.get("strides")
    strides = None
    if strides_bytes is not None:
        itemsize = ITEMSIZE[dtype]
        if any(int(s) % itemsize for s in strides_bytes):
            raise ValueError(
                f"{name}: strides {tuple(strides_bytes)} (bytes) are not multiples of the item size {itemsize}; "
                "ggemm needs a densely packed row-major (C-contiguous) array"
            )
        strides = tuple(int(s) // itemsize for s in strides_bytes)
    return TensorInfo(
        name=name,
        ptr=int(ptr or 0),
        shape=shape,
        dtype=dtype,
        strides=strides,
        device=_device_hint(obj),
        readonly=bool(readonly),
        source="cai",
    )


def dlpack_stream_argument(stream: int) -> int:
    """The DLPack `stream` argument for a CUDA stream handle: 1 names the legacy default stream (0 is not allowed)."""
    return 1 if stream == 0 else stream


def _from_dlpack(obj: Any, name: str, stream: int) -> TensorInfo:
    device_type, device_id = obj.__dlpack_device__()
    device_type, device_id = int(device_type), int(device_id)
    if device_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
        where = _KDL_DEVICE_NAMES.get(device_type, f"device type {device_type}")
        raise ValueError(f"{name}: ggemm needs CUDA device memory; this DLPack tensor is in {where} memory")
    try:
        capsule = obj.__dlpack__(stream=dlpack_stream_argument(stream))
    except TypeError:  # a producer that takes no stream argument
        capsule = obj.__dlpack__()
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError(f"{name}: __dlpack__ did not return an unused 'dltensor' capsule")
    managed = DLManagedTensor.from_address(_capsule_get_pointer(capsule, b"dltensor"))
    t = managed.dl_tensor
    if t.dtype.lanes != 1:
        raise TypeError(f"{name}: vector dtypes (lanes = {t.dtype.lanes}) are not supported")
    code = _KDL_CODES.get(t.dtype.code)
    dtype = f"{code}{t.dtype.bits}"  # e.g. bfloat16, float32, int32, uint32
    if code is None or dtype not in ITEMSIZE:
        raise TypeError(f"{name}: DLPack dtype (code {t.dtype.code}, {t.dtype.bits} bits) is not one ggemm reads")
    shape = tuple(int(t.shape[i]) for i in range(t.ndim))
    strides = tuple(int(t.strides[i]) for i in range(t.ndim)) if t.strides else None
    # The capsule is not renamed "used_dltensor": when it is collected, its
    # destructor calls the producer's deleter, which releases only the
    # producer's reference: the caller still holds the tensor itself.
    return TensorInfo(
        name=name,
        ptr=int(t.data or 0) + int(t.byte_offset),
        shape=shape,
        dtype=dtype,
        strides=strides,
        device=int(t.device.device_id),
        source="dlpack",
        keepalive=[capsule],
    )


def describe(obj: Any, name: str, stream: int = 0) -> TensorInfo:
    """Reads a tensor; `stream` is the stream the data will be used on (for DLPack producers)."""
    if is_torch_tensor(obj) and hasattr(obj, "data_ptr"):
        return _from_torch(obj, name)
    cai_error: Optional[BaseException] = None
    try:
        cai = obj.__cuda_array_interface__  # read once: producers build it on each access
    except AttributeError:
        cai = None
    except Exception as e:  # e.g. a producer that refuses to export this array
        cai, cai_error = None, e
    if cai is not None:
        return _from_cai(obj, cai, name)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, name, stream)
    detail = f" ({cai_error})" if cai_error else ""
    raise TypeError(
        f"{name}: expected a CUDA tensor exposing __cuda_array_interface__ or DLPack "
        f"(__dlpack__/__dlpack_device__), e.g. a PyTorch CUDA tensor or a CuPy array; got {type(obj).__name__}"
        + detail
    )


def cai_stream(obj: Any) -> Optional[int]:
    """The stream a __cuda_array_interface__ v3 producer asks consumers to use, if any."""
    try:
        cai = obj.__cuda_array_interface__
    except Exception:
        return None
    s = cai.get("stream") if isinstance(cai, dict) else None
    return int(s) if s is not None else None
