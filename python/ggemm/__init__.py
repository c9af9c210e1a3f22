"""ggemm: grouped matrix products for Mixture-of-Experts and multi-adapter LoRA, from Python.

On NVIDIA Hopper (sm_90a); the Blackwell (sm_100a) kernels are compiled
and planned but have never run on Blackwell hardware.

Pure Python over the C ABI (ctypes): no compile step. The shared library is
found through $GGEMM_LIBRARY, then ggemm/_lib/ inside this package, then the
system loader; it is loaded on first use, so `import ggemm` always works.

    import torch, ggemm
    ggemm.grouped_matmul(x_sorted, w, out, offsets, expert_ids, usage_stats)
    ggemm.lora_shrink_qkv(x, lora_a, p, offsets, adapter_ids, usage_stats)
    ggemm.lora_expand_qkv(p, lora_b, q_out, kv_out, offsets, adapter_ids, usage_stats,
                          scale=alpha / rank, accumulate=True)
    out = ggemm.moe_ffn(x, w_gate_up, w_down, topk_ids, topk_weights)   # the whole MoE layer

Tensors: PyTorch CUDA tensors, CuPy arrays, or anything exposing
__cuda_array_interface__ or DLPack. Errors from the library raise
ggemm.GgemmError with the status and the library's message.
"""

from ._capi import (
    HEADER_VERSION,
    MAX_GROUPS,
    Config,
    DeviceFault,
    Dtype,
    Epilogue,
    GroupedMatmulArgs,
    LibraryNotFoundError,
    LoraExpandQkvArgs,
    LoraShrinkQkvArgs,
    MoeCombineArgs,
    MoeFfnArgs,
    MoeRouteArgs,
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
from ._lora import lora_expand_qkv, lora_shrink_qkv
from ._moe import MoeRouting, moe_combine, moe_ffn, moe_ffn_workspace_size, moe_route, moe_route_workspace_size

__version__ = "0.2.0"


def last_error_message() -> str:
    """ggemm_last_error_message() of the calling thread."""
    from . import _capi

    load_library()
    return _capi.last_error_message()


__all__ = [
    "Config",
    "DeviceFault",
    "Dtype",
    "Epilogue",
    "GgemmError",
    "GroupedMatmulArgs",
    "HEADER_VERSION",
    "Handle",
    "LibraryNotFoundError",
    "LoraExpandQkvArgs",
    "LoraShrinkQkvArgs",
    "MAX_GROUPS",
    "MoeCombineArgs",
    "MoeFfnArgs",
    "MoeRouteArgs",
    "MoeRouting",
    "Status",
    "default_handle",
    "grouped_matmul",
    "last_error_message",
    "library_candidates",
    "library_path",
    "load_library",
    "lora_expand_qkv",
    "lora_shrink_qkv",
    "moe_combine",
    "moe_ffn",
    "moe_ffn_workspace_size",
    "moe_route",
    "moe_route_workspace_size",
    "status_string",
    "version",
    "__version__",
]
