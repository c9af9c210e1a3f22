"""What the Python examples share, none of it about ggemm's API: finding a
checkout's package and library, the checks that decide whether a GPU run is
possible, CUDA-event timing, and the pass/fail comparison with PyTorch.

Importing this module first lets an example run from a checkout without
installing the package: it puts python/ on sys.path when ggemm is not
installed, and points GGEMM_LIBRARY at build/libggemm.so when that is unset
and the build exists.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

try:
    import ggemm
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, os.path.join(REPO, "python"))
    import ggemm

if not os.environ.get("GGEMM_LIBRARY") and os.path.exists(os.path.join(REPO, "build", "libggemm.so")):
    os.environ["GGEMM_LIBRARY"] = os.path.join(REPO, "build", "libggemm.so")


def torch_with_cuda(purpose: str):
    """PyTorch when it is installed and sees a CUDA device; else None, after
    saying SKIPPED and why (`purpose`: what the example does with them)."""
    try:
        import torch
    except ImportError:
        print(f"SKIPPED: PyTorch is not installed; this example {purpose}")
        return None
    if not torch.cuda.is_available():
        print(f"SKIPPED: PyTorch {torch.__version__} sees no CUDA device (no GPU or no NVIDIA driver)")
        return None
    return torch


def open_gpu(device: int, seed: int):
    """(torch, a ggemm.Handle, the torch.device) on CUDA device `device`, made
    the current one, with PyTorch's generator seeded by `seed`; or the
    example's exit status when it cannot run: 1 when libggemm is not found, 0
    (SKIPPED) without PyTorch, a CUDA device, or a GPU ggemm can use. Says
    which on stdout or stderr."""
    try:
        print(f"ggemm {ggemm.__version__}: libggemm {ggemm.version()} from {ggemm.library_path()}")
    except ggemm.LibraryNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    torch = torch_with_cuda("compares ggemm with PyTorch on a GPU")
    if torch is None:
        return 0
    try:
        handle = ggemm.Handle(device)
    except ggemm.GgemmError as e:
        if e.status in (ggemm.Status.DRIVER_NOT_FOUND, ggemm.Status.NO_DEVICE, ggemm.Status.UNSUPPORTED_DEVICE):
            print(f"SKIPPED: ggemm cannot use GPU {device}: {e}")
            return 0
        raise
    dev = torch.device("cuda", device)
    torch.cuda.set_device(dev)
    torch.manual_seed(seed)
    return torch, handle, dev


def compare(torch, name, out, ref, width=22):
    """Relative Frobenius error and max abs error, with a pass/fail against bf16-sized bounds."""
    diff = out.float() - ref.float()
    rel = (diff.norm() / ref.float().norm().clamp_min(1e-30)).item()
    max_abs = diff.abs().max().item()
    scale = ref.float().abs().max().item()
    ok = bool(torch.isfinite(out.float()).all().item()) and rel < 1e-2 and max_abs <= 5e-2 * max(scale, 1e-30)
    print(f"  {name:<{width}} rel. error {rel:.2e}   max abs error {max_abs:.2e} (max |ref| {scale:.2e})   "
          f"{'OK' if ok else 'MISMATCH'}")
    return ok


def cuda_ms(torch, fn, iters, warmup=3):
    """Mean milliseconds of `fn` over `iters` runs after `warmup`, by CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters
