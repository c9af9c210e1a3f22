"""ctypes mirror of api/include/ggemm.h, and the loading of libggemm.so.

Everything here follows the C header field by field; python/tests checks the
layout against the header with a C compiler and against the library itself.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import glob
import os
import struct
import threading
from ctypes import POINTER, Structure, c_char_p, c_float, c_int, c_int64, c_size_t, c_void_p
from typing import Any, Dict, List, Optional, Tuple

# The header version these bindings mirror (GGEMM_VERSION's encoding).
HEADER_VERSION_MAJOR = 0
HEADER_VERSION_MINOR = 2
HEADER_VERSION_PATCH = 0
HEADER_VERSION = HEADER_VERSION_MAJOR * 10000 + HEADER_VERSION_MINOR * 100 + HEADER_VERSION_PATCH

MAX_GROUPS = 65536  # GGEMM_MAX_GROUPS

ENV_LIBRARY = "GGEMM_LIBRARY"
PACKAGE_LIB_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lib")


class Status(enum.IntEnum):
    """ggemm_status."""

    SUCCESS = 0
    NULL_POINTER = 1
    MISALIGNED_POINTER = 2
    INVALID_DIMENSION = 3
    INVALID_DTYPE = 4
    INVALID_GROUP_COUNT = 5
    INVALID_CONFIG = 6
    INVALID_VALUE = 7
    INVALID_HANDLE = 8
    DRIVER_NOT_FOUND = 9
    NO_DEVICE = 10
    UNSUPPORTED_DEVICE = 11
    DRIVER_ERROR = 12
    OUT_OF_MEMORY = 13
    INTERNAL_ERROR = 14


class Dtype(enum.IntEnum):
    """ggemm_dtype."""

    BF16 = 1
    FP16 = 2
    FP32 = 3


class Epilogue(enum.IntEnum):
    """ggemm_epilogue."""

    STORE = 0
    ACCUMULATE = 1
    ROW_SCALE = 2
    SWIGLU = 3


class DeviceFault(enum.IntFlag):
    """GGEMM_DEVICE_FAULT_*: the bits checked mode ORs into the device status word."""

    OFFSETS_NOT_MONOTONE = 0x1
    OFFSET_PAST_M = 0x2
    ID_OUT_OF_RANGE = 0x4
    ACTIVE_COUNT = 0x8
    INDEX_OUT_OF_RANGE = 0x10
    WEIGHT_NOT_FINITE = 0x20


class Config(Structure):
    """ggemm_config: a config override; 0 in a field means automatic."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("tile_n", c_int),
        ("tile_m", c_int),
        ("tile_k", c_int),
        ("mma_m", c_int),
        ("mma_n", c_int),
        ("mma_k", c_int),
        ("cluster_m", c_int),
        ("cluster_n", c_int),
        ("cta_group", c_int),
        ("stages", c_int),
        ("a_swizzle", c_int),
        ("b_swizzle", c_int),
    ]

    def __init__(self, **fields: int) -> None:
        super().__init__()
        self.struct_size = ctypes.sizeof(Config)
        for name, value in fields.items():
            if name == "struct_size" or name not in self.field_names():
                raise TypeError(f"ggemm_config has no field {name!r}; fields: {', '.join(self.field_names())}")
            setattr(self, name, int(value))

    @classmethod
    def field_names(cls) -> List[str]:
        return [f[0] for f in cls._fields_ if f[0] != "struct_size"]


class _ArgsStruct(Structure):
    """An argument struct of the C API: struct_size first, set on construction
    (the library refuses a struct whose size it does not know)."""

    def __init__(self) -> None:
        super().__init__()
        self.struct_size = ctypes.sizeof(type(self))


class GroupedMatmulArgs(_ArgsStruct):
    """ggemm_grouped_matmul_args. Pointers are plain integers (device addresses)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("a_dtype", c_int),
        ("b_dtype", c_int),
        ("c_dtype", c_int),
        ("m", c_int64),
        ("n", c_int64),
        ("k", c_int64),
        ("num_experts", c_int64),
        ("a", c_void_p),
        ("b", c_void_p),
        ("c", c_void_p),
        ("transpose_b", c_int),
        ("a_offsets", c_void_p),
        ("expert_ids", c_void_p),
        ("expert_usage_stats", c_void_p),
        ("num_groups", c_int64),
        ("max_rows_per_group", c_int64),
        ("a_plane_split0", c_int64),
        ("a_plane_split1", c_int64),
        ("epilogue", c_int),
        ("row_scale", c_void_p),  # const float *
        ("config", POINTER(Config)),
        ("a_row_index", c_void_p),  # const int32_t *, NULL = no gather
        ("a_rows", c_int64),
        ("group_ends", c_void_p),  # const uint32_t *: torch's offs in place of a_offsets (NULL = a_offsets)
    ]


# The fields both LoRA structs end with, in the header's order: routing,
# launch sizing, scale, accumulate flag, config.
_LORA_TAIL_FIELDS = [
    ("a_offsets", c_void_p),
    ("adapter_ids", c_void_p),
    ("expert_usage_stats", c_void_p),
    ("num_groups", c_int64),
    ("max_rows_per_group", c_int64),
    ("scale", c_float),
    ("accumulate", c_int),
    ("config", POINTER(Config)),
]


class LoraShrinkQkvArgs(_ArgsStruct):
    """ggemm_lora_shrink_qkv_args. Pointers are plain integers (device addresses)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("x_dtype", c_int),
        ("p_dtype", c_int),
        ("m", c_int64),
        ("k", c_int64),
        ("rank", c_int64),
        ("num_adapters", c_int64),
        ("x", c_void_p),
        ("lora_a", c_void_p),
        ("p", c_void_p),
    ] + _LORA_TAIL_FIELDS


class LoraExpandQkvArgs(_ArgsStruct):
    """ggemm_lora_expand_qkv_args. Pointers are plain integers (device addresses)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("p_dtype", c_int),
        ("out_dtype", c_int),
        ("m", c_int64),
        ("rank", c_int64),
        ("q_dim", c_int64),
        ("kv_dim", c_int64),
        ("num_adapters", c_int64),
        ("p", c_void_p),
        ("lora_b", c_void_p),
        ("q_out", c_void_p),
        ("kv_out", c_void_p),
    ] + _LORA_TAIL_FIELDS


class MoeRouteArgs(_ArgsStruct):
    """ggemm_moe_route_args. Pointers are plain integers (device addresses)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("num_tokens", c_int64),
        ("top_k", c_int64),
        ("num_experts", c_int64),
        ("first_expert", c_int64),
        ("local_experts", c_int64),
        ("topk_ids", c_void_p),  # const int32_t *
        ("topk_weights", c_void_p),  # const float *
        ("a_offsets", c_void_p),  # uint32_t *
        ("expert_ids", c_void_p),  # int32_t *
        ("expert_usage_stats", c_void_p),  # uint32_t *
        ("row_token", c_void_p),  # int32_t *
        ("row_slot", c_void_p),  # int32_t *
        ("row_weight", c_void_p),  # float *
        ("slot_row", c_void_p),  # int32_t *
        ("workspace", c_void_p),
        ("workspace_bytes", c_size_t),
    ]


class MoeCombineArgs(_ArgsStruct):
    """ggemm_moe_combine_args. Pointers are plain integers (device addresses)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("y_dtype", c_int),
        ("out_dtype", c_int),
        ("num_tokens", c_int64),
        ("top_k", c_int64),
        ("hidden", c_int64),
        ("y_rows", c_int64),
        ("y", c_void_p),
        ("slot_row", c_void_p),  # const int32_t *
        ("out", c_void_p),
        ("accumulate", c_int),
    ]


class MoeFfnArgs(_ArgsStruct):
    """ggemm_moe_ffn_args. Pointers are plain integers (device addresses)."""

    _fields_ = [
        ("struct_size", c_size_t),
        ("dtype", c_int),
        ("num_tokens", c_int64),
        ("hidden", c_int64),
        ("intermediate", c_int64),
        ("top_k", c_int64),
        ("num_experts", c_int64),
        ("first_expert", c_int64),
        ("local_experts", c_int64),
        ("x", c_void_p),
        ("w_gate_up", c_void_p),
        ("w_down", c_void_p),
        ("topk_ids", c_void_p),  # const int32_t *
        ("topk_weights", c_void_p),  # const float *
        ("out", c_void_p),
        ("workspace", c_void_p),
        ("workspace_bytes", c_size_t),
    ]


# ---- packing a struct in one call ---------------------------------------------

# struct-module codes of the ctypes field types the argument structs use.
_PACK_CODES = {c_size_t: "N", c_int: "i", c_int64: "q", c_void_p: "P", c_float: "f"}


def struct_packer(cls: Any) -> struct.Struct:
    """A struct.Struct laid out as the ctypes Structure `cls` (native alignment,
    C's padding): `packer.pack_into(instance, 0, *values)` sets every field, in
    declaration order, in one call (pointers as ints, 0 for NULL), where
    setting them one by one costs a Python attribute store each. Checked
    field by field against ctypes' own offsets."""
    fmt = "@"
    for name, ctype in cls._fields_:
        code = "P" if issubclass(ctype, ctypes._Pointer) else _PACK_CODES[ctype]
        if struct.calcsize(fmt + code) - struct.calcsize(code) != getattr(cls, name).offset:
            raise AssertionError(f"{cls.__name__}.{name}: struct module and ctypes disagree on its offset")
        fmt += code
    tail = ctypes.sizeof(cls) - struct.calcsize(fmt)  # C pads the end to the struct's alignment
    if not 0 <= tail < ctypes.alignment(cls):
        raise AssertionError(f"{cls.__name__}: struct module and ctypes disagree on its size")
    return struct.Struct(fmt + "x" * tail)


_RAW_PROTOTYPE = ctypes.CFUNCTYPE(c_int, c_void_p, c_void_p, c_void_p)


def raw_function(lib: ctypes.CDLL, name: str) -> Any:
    """lib's entry point `name` (handle, args, stream) -> status with void *
    arguments, for callers that pass the args struct's address as an int: a
    call converts three ints instead of checking a ctypes pointer type.
    Kept on the library object (one per loaded library)."""
    raws: Dict[str, Any] = lib.__dict__.setdefault("_ggemm_raw_functions", {})
    fn = raws.get(name)
    if fn is None:
        require_function(lib, name)  # a build without it says so
        fn = raws.setdefault(name, _RAW_PROTOTYPE((name, lib)))
    return fn


class LibraryNotFoundError(OSError):
    """libggemm.so could not be found or loaded."""


# ---- loading ---------------------------------------------------------------


def library_candidates(env: Optional[str] = None, package_dir: Optional[str] = None) -> List[Tuple[str, str]]:
    """Where libggemm is looked for, in order, as (origin, path-or-name) pairs.

    1. $GGEMM_LIBRARY: a file, or a directory holding libggemm.so. When it is
       set, nothing else is tried (a wrong path is an error, not a fallback).
    2. The package's own _lib/ directory (libggemm.so, then libggemm.so.*).
    3. The system loader: libggemm.so.<major>, libggemm.so, and what
       ctypes.util.find_library("ggemm") finds.
    """
    env = os.environ.get(ENV_LIBRARY, "") if env is None else env
    package_dir = PACKAGE_LIB_DIR if package_dir is None else package_dir
    if env:
        path = os.path.join(env, "libggemm.so") if os.path.isdir(env) else env
        return [(ENV_LIBRARY, path)]
    found: List[Tuple[str, str]] = []
    exact = os.path.join(package_dir, "libggemm.so")
    versioned = sorted(glob.glob(os.path.join(package_dir, "libggemm.so.*")))
    for path in ([exact] if os.path.exists(exact) else []) + versioned:
        found.append(("package", path))
    found.append(("system", f"libggemm.so.{HEADER_VERSION_MAJOR}"))
    found.append(("system", "libggemm.so"))
    by_find_library = ctypes.util.find_library("ggemm")
    if by_find_library and by_find_library not in ("libggemm.so", f"libggemm.so.{HEADER_VERSION_MAJOR}"):
        found.append(("system", by_find_library))
    return found


def _declare(lib: ctypes.CDLL) -> None:
    lib.ggemm_version.restype = c_int
    lib.ggemm_version.argtypes = []
    lib.ggemm_status_string.restype = c_char_p
    lib.ggemm_status_string.argtypes = [c_int]
    lib.ggemm_last_error_message.restype = c_char_p
    lib.ggemm_last_error_message.argtypes = []
    lib.ggemm_create.restype = c_int
    lib.ggemm_create.argtypes = [POINTER(c_void_p), c_int]
    lib.ggemm_destroy.restype = c_int
    lib.ggemm_destroy.argtypes = [c_void_p]
    lib.ggemm_set_device_status.restype = c_int
    lib.ggemm_set_device_status.argtypes = [c_void_p, c_void_p]
    lib.ggemm_grouped_matmul.restype = c_int
    lib.ggemm_grouped_matmul.argtypes = [c_void_p, POINTER(GroupedMatmulArgs), c_void_p]
    lib.ggemm_lora_shrink_qkv.restype = c_int
    lib.ggemm_lora_shrink_qkv.argtypes = [c_void_p, POINTER(LoraShrinkQkvArgs), c_void_p]
    lib.ggemm_lora_expand_qkv.restype = c_int
    lib.ggemm_lora_expand_qkv.argtypes = [c_void_p, POINTER(LoraExpandQkvArgs), c_void_p]
    _declare_moe(lib)


# The MoE layer's functions, by name: (argument struct, whether it is a
# workspace-size query). A library built before the MoE layer lacks them; it
# still loads (everything else works) and a call to one of them says why it
# cannot run (require_function).
MOE_FUNCTIONS = {
    "ggemm_moe_route": (MoeRouteArgs, False),
    "ggemm_moe_combine": (MoeCombineArgs, False),
    "ggemm_moe_ffn": (MoeFfnArgs, False),
    "ggemm_moe_route_workspace_size": (MoeRouteArgs, True),
    "ggemm_moe_ffn_workspace_size": (MoeFfnArgs, True),
}


def _declare_moe(lib: ctypes.CDLL) -> None:
    for name, (struct, is_size_query) in MOE_FUNCTIONS.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            continue
        fn.restype = c_int
        if is_size_query:  # (const args *, size_t *bytes)
            fn.argtypes = [POINTER(struct), POINTER(c_size_t)]
        else:  # (handle, const args *, stream)
            fn.argtypes = [c_void_p, POINTER(struct), c_void_p]


def require_function(lib: ctypes.CDLL, name: str) -> Any:
    """lib's function `name`, or LibraryNotFoundError saying that this build predates it."""
    try:
        return getattr(lib, name)
    except AttributeError:
        raise LibraryNotFoundError(
            f"the loaded libggemm ({_lib_path or lib._name}) has no {name}: it was built before the MoE layer "
            "(ggemm_moe_*); rebuild it from a checkout that has it"
        ) from None


def open_library(path: str) -> ctypes.CDLL:
    """Loads one libggemm file (or soname) and declares its functions; checks the ABI version."""
    lib = ctypes.CDLL(path)
    try:
        _declare(lib)
    except AttributeError as e:
        raise LibraryNotFoundError(f"{path} is not libggemm (missing {e})") from None
    version = lib.ggemm_version()
    if version // 10000 != HEADER_VERSION_MAJOR:
        raise LibraryNotFoundError(
            f"{path} is ggemm {version // 10000}.{version // 100 % 100}.{version % 100}; these bindings "
            f"need major version {HEADER_VERSION_MAJOR} (header {HEADER_VERSION})"
        )
    return lib


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[str] = None


def load_library(path: Optional[str] = None) -> ctypes.CDLL:
    """Returns the loaded libggemm, loading it on first use.

    With `path`, loads that file (replacing any library loaded before);
    otherwise searches library_candidates().
    """
    global _lib, _lib_path
    with _lock:
        if path is not None:
            _lib, _lib_path = open_library(path), path
            return _lib
        if _lib is not None:
            return _lib
        errors = []
        for origin, candidate in library_candidates():
            try:
                lib = open_library(candidate)
            except OSError as e:
                if origin == ENV_LIBRARY:
                    raise LibraryNotFoundError(f"{ENV_LIBRARY}={os.environ.get(ENV_LIBRARY)}: {e}") from None
                errors.append(f"  {origin}: {candidate}: {e}")
                continue
            _lib, _lib_path = lib, candidate
            return lib
        raise LibraryNotFoundError(
            "libggemm.so was not found. Set GGEMM_LIBRARY to its path (e.g. build/libggemm.so), "
            "copy it into " + PACKAGE_LIB_DIR + ", or put its directory on LD_LIBRARY_PATH. Tried:\n"
            + "\n".join(errors)
        )


def loaded_library_path() -> Optional[str]:
    """The path (or soname) of the loaded library, None if not loaded yet."""
    return _lib_path


def status_string(status: int) -> str:
    """ggemm_status_string, from the library when it is loaded, else from this mirror."""
    if _lib is not None:
        return _lib.ggemm_status_string(int(status)).decode("utf-8", "replace")
    try:
        return "GGEMM_STATUS_" + Status(status).name
    except ValueError:
        return "GGEMM_STATUS_<unknown>"


def last_error_message() -> str:
    """ggemm_last_error_message of this thread ("" when nothing failed or nothing is loaded)."""
    if _lib is None:
        return ""
    return _lib.ggemm_last_error_message().decode("utf-8", "replace")


__all__ = [
    "Config",
    "Dtype",
    "Epilogue",
    "GroupedMatmulArgs",
    "LibraryNotFoundError",
    "LoraExpandQkvArgs",
    "LoraShrinkQkvArgs",
    "MoeCombineArgs",
    "MoeFfnArgs",
    "MoeRouteArgs",
    "Status",
    "library_candidates",
    "load_library",
    "loaded_library_path",
    "open_library",
    "require_function",
    "status_string",
    "last_error_message",
]
