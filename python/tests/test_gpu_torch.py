"""GPU tests: ggemm.grouped_matmul on PyTorch CUDA tensors against a PyTorch
reference (float64 on the CPU). Skipped, with the reason, without PyTorch, without
a CUDA device, or when ggemm cannot use GPU 0 (it has kernels for sm_90a and sm_100a)."""

from __future__ import annotations

import pytest

import ggemm

torch = pytest.importorskip("torch", reason="PyTorch is not installed: the GPU tests compare against PyTorch")

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="torch.cuda is not available (no GPU or no NVIDIA driver)"
)

from gpu_routing import DEV, routing  # noqa: E402  (needs torch, so after the skip above)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


def reference(a, b, offsets, ids, *, transpose_b=True, m=None, planes=None):
    """float64 on the CPU: C[r, n] = sum_k A[r + plane(n) * M, k] W[e][n, k]; rows of
    inactive groups are 0, rows past the last group are NaN (must not be written)."""
    a64, b64 = a.double().cpu(), b.double().cpu()
    m = a.shape[0] if m is None else m
    n = b.shape[1] if transpose_b else b.shape[2]
    out = torch.full((m, n), float("nan"), dtype=torch.float64)
    for g, e in enumerate(ids):
        lo, hi = offsets[g], offsets[g + 1]
        if e < 0:
            out[lo:hi] = 0
            continue
        w = b64[e] if transpose_b else b64[e].T  # [N, K]
        if planes is None:
            out[lo:hi] = a64[lo:hi] @ w.T
        else:
            s0, s1 = planes
            for col0, col1, p in ((0, s0, 0), (s0, s1, 1), (s1, n, 2)):
                rows = a64[lo + p * m : hi + p * m]
                out[lo:hi, col0:col1] = rows @ w[col0:col1].T
    return out


def assert_matches(out, ref, rtol, atol, written=None):
    got = out.double().cpu()
    written = ~torch.isnan(ref) if written is None else written
    assert not torch.isnan(got[written]).any(), "rows that belong to a group were not written"
    torch.testing.assert_close(got[written], ref[written], rtol=rtol, atol=atol)


# Ragged groups: empty ones, an inactive one (-1), an expert used twice.
ROWS = [0, 37, 1, 128, 5, 64, 0, 17]
IDS = [3, 0, -1, 5, 2, 1, 4, 0]
E, N, K = 6, 256, 512
TAIL = 7  # rows of A and C past the last group: never written


@pytest.mark.parametrize("transpose_b", [True, False], ids=["B_ENK", "B_EKN"])
def test_bf16_store(handle, transpose_b):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1] + TAIL
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16)
    b = (torch.randn(E, N, K, device=DEV) if transpose_b else torch.randn(E, K, N, device=DEV)).to(torch.bfloat16)
    out = torch.full((m, N), 7.0, dtype=torch.bfloat16, device=DEV)
    r = ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, transpose_b=transpose_b, handle=handle)
    assert r is out
    torch.cuda.synchronize()
    ref = reference(a, b, offsets, IDS, transpose_b=transpose_b)
    assert_matches(out, ref, rtol=2e-2, atol=5e-2)
    assert (out[offsets[-1] :] == 7.0).all(), "rows past the last group were written"


@pytest.mark.parametrize("path", ["fast", "general"])
def test_group_ends_say_what_offsets_say(handle, monkeypatch, path):
    """group_ends (torch's offs: a_offsets without the leading zero) passed to
    the library as they are, through the torch fast path and the general one
    (the fast path switched off): the same bits as with a_offsets."""
    if path == "general":
        monkeypatch.setattr(ggemm._core, "_torch_fast_path", lambda: None)
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1] + TAIL
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16)
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16)
    want = torch.full((m, N), 7.0, dtype=torch.bfloat16, device=DEV)
    got = want.clone()
    ggemm.grouped_matmul(a, b, want, offsets_t, ids_t, stats_t, handle=handle)
    ends = torch.full((len(ROWS) + 1,), 99, dtype=torch.int32, device=DEV)  # [0] is not the call's
    ends[1:] = offsets_t[1:]
    ggemm.grouped_matmul(a, b, got, None, ids_t, stats_t, group_ends=ends[1:], handle=handle)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


def test_fp16_in_fp32_out_default_handle():
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    a = torch.randn(m, K, device=DEV, dtype=torch.float16)
    b = torch.randn(E, N, K, device=DEV, dtype=torch.float16)
    out = torch.full((m, N), float("nan"), dtype=torch.float32, device=DEV)
    try:
        ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, max_rows_per_group=max(ROWS))
    except ggemm.GgemmError as e:
        if e.status == ggemm.Status.UNSUPPORTED_DEVICE:
            pytest.skip(str(e))
        raise
    torch.cuda.synchronize()
    assert_matches(out, reference(a, b, offsets, IDS), rtol=1e-4, atol=1e-3)


def test_accumulate(handle):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16)
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16)
    init = torch.randn(m, N, device=DEV)
    out = init.clone()
    ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, epilogue="accumulate", handle=handle)
    torch.cuda.synchronize()
    ref = reference(a, b, offsets, IDS) + init.double().cpu()  # inactive rows: += 0
    assert_matches(out, ref, rtol=1e-4, atol=1e-3)


def test_row_scale(handle):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16)
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16)
    scale = torch.rand(m, device=DEV, dtype=torch.float32)
    out = torch.empty(m, N, dtype=torch.bfloat16, device=DEV)
    ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, epilogue="row_scale", row_scale=scale, handle=handle)
    torch.cuda.synchronize()
    ref = reference(a, b, offsets, IDS) * scale.double().cpu()[:, None]
    assert_matches(out, ref, rtol=2e-2, atol=5e-2)


def test_plane_splits(handle):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    s0, s1 = 64, 192
    a = torch.randn(3 * m, K, device=DEV).to(torch.bfloat16)
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16)
    out = torch.empty(m, N, dtype=torch.float32, device=DEV)
    ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, plane_splits=(s0, s1), handle=handle)
    torch.cuda.synchronize()
    assert_matches(out, reference(a, b, offsets, IDS, m=m, planes=(s0, s1)), rtol=1e-4, atol=1e-3)


def test_current_stream_and_graph_replay_with_new_routing(handle):
    """Captured in a CUDA graph on PyTorch's current stream, then replayed with
    new routing written into the same device arrays (no host synchronisation)."""
    rows_1, ids_1 = [10, 0, 30, 24], [1, 2, -1, 0]
    rows_2, ids_2 = [40, 4, 0, 20], [2, 2, 1, -1]
    m = 64
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16)
    b = torch.randn(3, N, K, device=DEV).to(torch.bfloat16)
    out = torch.empty(m, N, dtype=torch.float32, device=DEV)
    offsets_t, ids_t, stats_t, offsets_1 = routing(rows_1, ids_1)
    call = dict(handle=handle, max_rows_per_group=m)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as PyTorch recommends before capture
        ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, **call)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # launching on any other stream than the capture stream would fail
        ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, **call)

    for rows, ids in ((rows_1, ids_1), (rows_2, ids_2)):
        o, i, s, offsets = routing(rows, ids)
        offsets_t.copy_(o)
        ids_t.copy_(i)
        stats_t.copy_(s)
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(out, reference(a, b, offsets, ids), rtol=1e-4, atol=1e-3)


class CudaArrayInterfaceOnly:
    """A tensor seen only through __cuda_array_interface__ (+ its dtype name)."""

    def __init__(self, t):
        self._t, self.dtype, self.device = t, t.dtype, t.device

    @property
    def __cuda_array_interface__(self):
        return self._t.__cuda_array_interface__


class DLPackOnly:
    """A tensor seen only through DLPack."""

    def __init__(self, t):
        self._t = t

    def __dlpack__(self, **kwargs):
        return self._t.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._t.__dlpack_device__()


@pytest.mark.parametrize("wrap", [CudaArrayInterfaceOnly, DLPackOnly], ids=["cuda_array_interface", "dlpack"])
def test_protocols(handle, wrap):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16)
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16)
    out = torch.empty(m, N, dtype=torch.float32, device=DEV)
    torch.cuda.synchronize()  # the wrappers name no stream: the call goes to the legacy default stream
    ggemm.grouped_matmul(*(wrap(t) for t in (a, b, out, offsets_t, ids_t, stats_t)), handle=handle)
    torch.cuda.synchronize()
    assert_matches(out, reference(a, b, offsets, IDS), rtol=1e-4, atol=1e-3)


def test_cupy_arrays(handle):
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    a = torch.randn(m, K, device=DEV, dtype=torch.float16)
    b = torch.randn(E, N, K, device=DEV, dtype=torch.float16)
    out = torch.empty(m, N, dtype=torch.float32, device=DEV)
    torch.cuda.synchronize()
    ggemm.grouped_matmul(*(cupy.asarray(t) for t in (a, b, out, offsets_t, ids_t, stats_t)), handle=handle)
    cupy.cuda.get_current_stream().synchronize()
    assert_matches(out, reference(a, b, offsets, IDS), rtol=1e-4, atol=1e-3)


def test_requires_grad_tensors_are_read_directly(handle):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16).requires_grad_()
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16).requires_grad_()
    out = torch.empty(m, N, dtype=torch.float32, device=DEV)
    ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, handle=handle)
    torch.cuda.synchronize()
    assert_matches(out, reference(a.detach(), b.detach(), offsets, IDS), rtol=1e-4, atol=1e-3)


def test_errors_on_the_gpu(handle):
    offsets_t, ids_t, stats_t, offsets = routing(ROWS, IDS)
    m = offsets[-1]
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16)
    out = torch.empty(m, N, dtype=torch.bfloat16, device=DEV)
    # One element past a 16-byte boundary: contiguous, but not aligned for TMA.
    flat = torch.zeros(m * K + 8, device=DEV, dtype=torch.bfloat16)
    a_misaligned = flat[1 : 1 + m * K].view(m, K)
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.grouped_matmul(a_misaligned, b, out, offsets_t, ids_t, stats_t, handle=handle)
    assert info.value.status == ggemm.Status.MISALIGNED_POINTER and "a = " in info.value.message
    a = torch.randn(K, m, device=DEV).to(torch.bfloat16).t()  # [m, K], column-major
    with pytest.raises(ValueError, match="C-contiguous"):
        ggemm.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t, handle=handle)
    with pytest.raises(ValueError, match="CUDA tensor"):
        ggemm.grouped_matmul(a.cpu(), b, out, offsets_t, ids_t, stats_t, handle=handle)
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.grouped_matmul(a.contiguous(), b, out, offsets_t, ids_t, stats_t, config={"tile_m": 24}, handle=handle)
    assert info.value.status == ggemm.Status.INVALID_CONFIG and "tile_m" in info.value.message


def test_checked_mode_reports_malformed_routing(lib):
    """Handle.set_device_status: malformed device arrays are computed safely and reported."""
    try:
        h = ggemm.Handle(0)
    except ggemm.GgemmError as e:
        pytest.skip(f"ggemm cannot use GPU 0: {e}")
    status = torch.zeros(1, dtype=torch.int32, device=DEV)
    h.set_device_status(status)
    rows, m = [30, 40], 70
    a = torch.randn(m, K, device=DEV).to(torch.bfloat16)
    b = torch.randn(E, N, K, device=DEV).to(torch.bfloat16)
    out = torch.full((m, N), 7.0, dtype=torch.bfloat16, device=DEV)
    offsets_t, ids_t, stats_t, offsets = routing(rows, [1, 2])
    h.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t)
    torch.cuda.synchronize()
    assert status.item() == 0, "well-formed routing reported a fault"
    assert_matches(out, reference(a, b, offsets, [1, 2]), rtol=2e-2, atol=5e-2)

    ids_t.copy_(torch.tensor([1, E], dtype=torch.int32))  # expert E does not exist: group 1 is inactive
    stats_t[1] = 5  # past num_groups = 2: capped
    out.fill_(7.0)
    h.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t)
    torch.cuda.synchronize()
    assert ggemm.DeviceFault(status.item()) == ggemm.DeviceFault.ID_OUT_OF_RANGE | ggemm.DeviceFault.ACTIVE_COUNT
    assert_matches(out, reference(a, b, offsets, [1, -1]), rtol=2e-2, atol=5e-2)

    h.set_device_status(None)
    status.zero_()
    h.grouped_matmul(a, b, out, offsets_t, ids_t, stats_t)
    torch.cuda.synchronize()
    assert status.item() == 0, "checked mode was switched off but still wrote"
    h.close()
