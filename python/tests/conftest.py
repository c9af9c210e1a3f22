"""Shared fixtures. The library is found as ggemm finds it (GGEMM_LIBRARY
first); tests that need it skip, saying so, when it cannot be found."""

from __future__ import annotations

import os
import pathlib

import pytest

import ggemm

REPO = pathlib.Path(__file__).resolve().parents[2]


def header_path() -> pathlib.Path:
    """api/include/ggemm.h of this checkout, or $GGEMM_INCLUDE_DIR/ggemm.h."""
    base = os.environ.get("GGEMM_INCLUDE_DIR")
    return pathlib.Path(base) / "ggemm.h" if base else REPO / "api" / "include" / "ggemm.h"


@pytest.fixture(scope="session")
def lib():
    try:
        return ggemm.load_library()
    except ggemm.LibraryNotFoundError as e:
        pytest.skip(f"libggemm.so not found (set GGEMM_LIBRARY to build/libggemm.so): {e}")


@pytest.fixture(scope="module")
def handle(lib):
    """A ggemm.Handle on GPU 0 for a GPU test module (which has skipped already
    without PyTorch or a CUDA device); skips when ggemm cannot use the GPU.
    Closed when the module's work on the device has finished."""
    import torch  # only the GPU test modules ask for this fixture

    try:
        h = ggemm.Handle(0)
    except ggemm.GgemmError as e:
        pytest.skip(f"ggemm cannot use GPU 0: {e}")
    yield h
    torch.cuda.synchronize()
    h.close()


@pytest.fixture(scope="session")
def no_gpu(lib):
    """Skips unless creating a handle fails for want of a driver or a device."""
    try:
        h = ggemm.Handle(0)
    except ggemm.GgemmError as e:
        if e.status in (ggemm.Status.DRIVER_NOT_FOUND, ggemm.Status.NO_DEVICE):
            return e
        pytest.skip(f"a GPU is present but ggemm cannot use it: {e}")
    h.close()
    pytest.skip("a usable GPU is present: the no-GPU error path cannot be exercised here")
