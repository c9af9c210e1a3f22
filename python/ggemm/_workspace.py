"""Device memory the package allocates itself: the MoE calls' outputs when the
caller gives none, and their workspace (scratch the C library asks for).

Memory comes from the caller's own tensor library, so that it shares the
caller's pool and graph capture works: PyTorch's caching allocator, or
CuPy's memory pool. Tensors seen only through __cuda_array_interface__ or
DLPack have no allocator here; their calls need `out=` and `workspace=`.

The workspace is cached per (library, device, stream) and grown when a call
needs more:
- Per stream, because two streams running MoE calls at once must not share
  scratch; within one stream the calls run in order, so one buffer serves
  them all.
- Allocated in that stream's order (the caching allocators hand a freed
  block again only to later work on the stream that freed it), so dropping
  the old buffer when the cache grows is safe although calls enqueued
  before may still be running on the device.
- Never handed to a call that is being captured into a CUDA graph: the
  graph keeps the buffer's address for every replay, and the cache may
  free it. A call under capture gets a buffer of its own instead. With
  PyTorch it comes from the graph's private pool, which the graph keeps
  reserved until it is destroyed, as it does for every intermediate tensor
  of a captured model (so the buffer may die with the call, and later
  captures that share the pool may reuse it, replays being serialised). CuPy
  has no such pool: its captured buffers are kept for the life of the
  process.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ._tensor import is_cupy_array, is_torch_tensor

# Cached workspaces grow in steps of this many bytes, so that a run of calls
# whose needs creep up does not reallocate on every call.
GRANULE = 1 << 20


class Backend:
    """How to allocate next to one tensor library. Subclasses: torch, CuPy
    (and a fake in the CPU tests)."""

    name = "none"

    def empty(self, shape: Sequence[int], dtype: str, device: int, stream: int) -> Any:
        raise NotImplementedError

    def capturing(self, device: int, stream: int) -> bool:
        raise NotImplementedError

    @staticmethod
    def nbytes(buf: Any) -> int:
        raise NotImplementedError


class TorchBackend(Backend):
    name = "torch"

    @staticmethod
    def _on(device: int, stream: int):
        """A context in which PyTorch's current stream is `stream` (so the caching
        allocator files the allocation under it)."""
        import torch

        if stream == torch._C._cuda_getCurrentRawStream(device):
            return torch.cuda.device(device)
        s = torch.cuda.default_stream(device) if stream == 0 else torch.cuda.ExternalStream(stream, device=device)
        return torch.cuda.stream(s)

    def empty(self, shape, dtype, device, stream):
        import torch

        with self._on(device, stream):
            return torch.empty(tuple(shape), dtype=getattr(torch, dtype), device=f"cuda:{device}")

    def capturing(self, device, stream):
        import torch

        with self._on(device, stream):
            return torch.cuda.is_current_stream_capturing()

    @staticmethod
    def nbytes(buf):
        return buf.numel() * buf.element_size()


class CupyBackend(Backend):
    name = "cupy"

    def empty(self, shape, dtype, device, stream):
        import cupy

        if dtype == "bfloat16":
            raise TypeError("CuPy has no bfloat16 arrays: pass out= (e.g. a PyTorch tensor)")
        with cupy.cuda.Device(device), cupy.cuda.ExternalStream(stream):
            return cupy.empty(tuple(shape), dtype=dtype)

    def capturing(self, device, stream):
        import cupy

        with cupy.cuda.Device(device):
            return bool(cupy.cuda.runtime.streamIsCapturing(stream))

    @staticmethod
    def nbytes(buf):
        return int(buf.nbytes)


_TORCH, _CUPY = TorchBackend(), CupyBackend()


def backend_of(obj: Any) -> Optional[Backend]:
    """The allocator of `obj`'s library; None for tensors seen only through a protocol."""
    if is_torch_tensor(obj):
        return _TORCH
    if is_cupy_array(obj):
        return _CUPY
    return None


class WorkspaceCache:
    """Workspaces by (backend, device, stream); see the module's docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffers: Dict[Tuple[str, int, int], Any] = {}
        self._kept: List[Any] = []  # captured buffers with no graph pool to keep them

    def get(self, backend: Backend, nbytes: int, device: int, stream: int) -> Any:
        """A uint8 buffer of at least `nbytes` bytes on `device`, for work on `stream`; None for 0 bytes.
        The caller keeps it alive until the call that uses it has been enqueued."""
        if nbytes <= 0:
            return None
        if backend.capturing(device, stream):
            buf = backend.empty((nbytes,), "uint8", device, stream)
            if not isinstance(backend, TorchBackend):
                with self._lock:
                    self._kept.append(buf)
            return buf
        return self.cached(backend, nbytes, device, stream)

    def cached(self, backend: Backend, nbytes: int, device: int, stream: int) -> Any:
        """The cached buffer of (backend, device, stream), grown to `nbytes`
        if smaller: get()'s, for a caller that knows no capture is under way
        (the torch fast path asks PyTorch itself)."""
        key = (backend.name, device, stream)
        buf = self._buffers.get(key)
        if buf is not None and backend.nbytes(buf) >= nbytes:
            return buf
        with self._lock:
            buf = self._buffers.get(key)
            if buf is None or backend.nbytes(buf) < nbytes:
                # The old buffer is freed first, so the allocator can reuse its memory for the new one.
                self._buffers.pop(key, None)
                buf = None
                size = -(-nbytes // GRANULE) * GRANULE
                buf = self._buffers[key] = backend.empty((size,), "uint8", device, stream)
            return buf

    def clear(self) -> None:
        """Drops the cached workspaces (e.g. to give the memory back after a large batch). Safe while
        work that uses them is in flight: the allocators reuse a block only after it, in stream order."""
        with self._lock:
            self._buffers.clear()


workspaces = WorkspaceCache()
