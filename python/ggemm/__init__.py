"""ggemm: grouped matrix products for Mixture-of-Experts on NVIDIA Hopper, from Python.

Pure Python over the C ABI (ctypes): no compile step. The shared library is
found through $GGEMM_LIBRARY, then ggemm/_lib/ inside this package, then the
system loader; it is loaded on first use, so `import ggemm` always works.

    import torch, ggemm
    ggemm.grouped_matmul(x_sorted, w, out, offsets, expert_ids, usage_stats)

Tensors: PyTorch CUDA tensors, CuPy arrays, or anything exposing
__cuda_array_interface__ or DLPack. Errors from the library raise
ggemm.GgemmError with the status and the library's message.
"""

from ._capi import (
    HEADER_VERSION,
    MAX_GROUPS,
    Config,
    Dtype,
    Epilogue,
    GroupedMatmulArgs,
    LibraryNotFoundError,
    Status,
    library_candidates,
    load_library,
)
from ._core import (
    GgemmError,
    Handle,
    default_handle,
    grouped_matmul,
    library_path,
    status_string,
    version,
)

__version__ = "0.1.0"


def last_error_message() -> str:
    """ggemm_last_error_message() of the calling thread."""
    from . import _capi

    load_library()
    return _capi.last_error_message()


__all__ = [
    "Config",
    "Dtype",
    "Epilogue",
    "GgemmError",
    "GroupedMatmulArgs",
    "HEADER_VERSION",
    "Handle",
    "LibraryNotFoundError",
    "MAX_GROUPS",
    "Status",
    "default_handle",
    "grouped_matmul",
    "last_error_message",
    "library_candidates",
    "library_path",
    "load_library",
    "status_string",
    "version",
    "__version__",
]
