"""The MoE layer's bindings without a GPU: the ctypes structs that moe_ffn,
moe_route and moe_combine build from fake tensors, the shape, dtype and
device checks made before the library is called, the workspace cache (on a
fake allocator), and the library's size queries where the library has them."""

from __future__ import annotations

import ctypes

import pytest

import ggemm
from ggemm import _capi, _moe
from ggemm._moe import _build_moe_combine_args, _build_moe_ffn_args, _build_moe_route_args, attach_workspace
from ggemm._workspace import GRANULE, Backend, WorkspaceCache
from ggemm_fakes import fake_allocate, moe_ffn_problem, torch_like

# ---- moe_ffn ---------------------------------------------------------------------------


def test_ffn_struct_fields_from_tensors():
    x, wgu, wd, ids, w, out = moe_ffn_problem(tokens=5, hidden=256, intermediate=96, experts=8, top_k=2)
    built = _build_moe_ffn_args(x, wgu, wd, ids, w, out)
    a = built.args
    assert isinstance(a, ggemm.MoeFfnArgs) and a.struct_size == ctypes.sizeof(ggemm.MoeFfnArgs)
    assert a.dtype == ggemm.Dtype.BF16
    assert (a.num_tokens, a.hidden, a.intermediate, a.top_k) == (5, 256, 96, 2)
    assert (a.num_experts, a.first_expert, a.local_experts) == (8, 0, 8)  # no expert parallelism
    assert (a.x, a.w_gate_up, a.w_down, a.topk_ids, a.topk_weights, a.out) == tuple(
        t.ptr for t in (x, wgu, wd, ids, w, out)
    )
    assert not a.workspace and a.workspace_bytes == 0  # set at launch, from the size query
    assert built.result is out and built.device is None


def test_ffn_fp16_and_expert_parallelism():
    x, wgu, wd, ids, w, out = moe_ffn_problem(experts=4, dtype="float16")
    a = _build_moe_ffn_args(x, wgu, wd, ids, w, out, first_expert=12, num_experts=32).args
    assert a.dtype == ggemm.Dtype.FP16
    assert (a.num_experts, a.first_expert, a.local_experts) == (32, 12, 4)
    with pytest.raises(ValueError, match=r"num_experts: give the global expert count with first_expert=12.*\[12, 16\)"):
        _build_moe_ffn_args(x, wgu, wd, ids, w, out, first_expert=12)
    with pytest.raises(TypeError, match="first_expert"):
        _build_moe_ffn_args(x, wgu, wd, ids, w, out, first_expert=True)
    with pytest.raises(TypeError, match="num_experts"):
        _build_moe_ffn_args(x, wgu, wd, ids, w, out, num_experts=8.0)


@pytest.mark.parametrize(
    "which, fake, words",
    [
        (1, ((8, 191, 256), "bfloat16"), r"w_gate_up: .*191 rows per expert, an odd count"),
        (1, ((8, 192, 128), "bfloat16"), r"w_gate_up: .*H = 128; x \(5, 256\) has H = 256"),
        (2, ((8, 256, 64), "bfloat16"), r"w_down: shape \(8, 256, 64\) does not match \[E, H, I\] = \(8, 256, 96\)"),
        (2, ((4, 256, 96), "bfloat16"), r"w_down: .*\(8, 256, 96\)"),
        ((3, 4), ((6, 2), ("int32", "float32")), r"topk_ids: shape \(6, 2\) has 6 tokens; x \(5, 256\) has 5"),
        (4, ((5, 3), "float32"), r"topk_weights: shape \(5, 3\) differs from topk_ids' \(5, 2\)"),
        (5, ((5, 128), "bfloat16"), r"out: shape \(5, 128\) must be \[T, H\] = \(5, 256\)"),
        (0, ((5, 256, 1), "bfloat16"), r"x: expected 2-D"),
    ],
)
def test_ffn_shapes_that_disagree_name_the_argument(which, fake, words):
    args = list(moe_ffn_problem())
    shape, dtypes = fake
    for i, dtype in zip(which if isinstance(which, tuple) else (which,), dtypes if isinstance(dtypes, tuple) else (dtypes,)):
        args[i] = torch_like(shape, dtype)
    with pytest.raises(ValueError, match=words):
        _build_moe_ffn_args(*args)


@pytest.mark.parametrize(
    "which, dtype, words",
    [
        (3, "int64", "topk_ids: dtype int64"),
        (4, "bfloat16", "topk_weights: dtype bfloat16"),
        (2, "float16", "w_down: dtype float16 differs from x's bfloat16"),
        (5, "float32", "out: dtype float32"),
        (0, "float32", "x: dtype float32"),
    ],
)
def test_ffn_dtypes(which, dtype, words):
    args = list(moe_ffn_problem())
    shape = args[which].shape
    args[which] = torch_like(shape, dtype)
    with pytest.raises(TypeError, match=words):
        _build_moe_ffn_args(*args)


def test_ffn_devices_contiguity_and_read_only():
    x, wgu, wd, ids, w, out = moe_ffn_problem(device=0)
    with pytest.raises(ValueError, match="different devices"):
        _build_moe_ffn_args(x, wgu, wd, ids, w, torch_like((5, 256), "bfloat16", device=1))
    with pytest.raises(ValueError, match="C-contiguous"):
        _build_moe_ffn_args(torch_like((5, 256), "bfloat16", strides=(1, 5)), wgu, wd, ids, w, out)
    with pytest.raises(ValueError, match="read-only"):
        _build_moe_ffn_args(x, wgu, wd, ids, w, torch_like((5, 256), "bfloat16", readonly=True))
    assert _build_moe_ffn_args(x, wgu, wd, ids, w, out).device == 0


def test_ffn_out_is_allocated_when_it_can_be():
    x, wgu, wd, ids, w, _ = moe_ffn_problem(tokens=7, dtype="float16")
    with pytest.raises(ValueError, match="out: ggemm allocates outputs only next to PyTorch tensors or CuPy"):
        _build_moe_ffn_args(x, wgu, wd, ids, w, None)  # fakes have no allocator
    built = _build_moe_ffn_args(x, wgu, wd, ids, w, None, allocate=fake_allocate)
    out = built.result
    assert out.shape == (7, 256) and out.dtype == "torch.float16"
    assert built.args.out == out.ptr


def test_zero_tokens_builds():
    # T = 0 is the library's no-op; the shapes still have to agree.
    a = _build_moe_ffn_args(*moe_ffn_problem(tokens=0)).args
    assert (a.num_tokens, a.hidden, a.top_k) == (0, 256, 2)


# ---- moe_route -------------------------------------------------------------------------


def test_route_allocates_every_output_with_the_layout_of_the_header():
    ids, w = torch_like((5, 8), "int32"), torch_like((5, 8), "float32")
    built = _build_moe_route_args(ids, w, num_experts=128, first_expert=32, local_experts=16, allocate=fake_allocate)
    r = built.result
    assert isinstance(r, ggemm.MoeRouting)
    shapes = {name: (getattr(r, name).shape, getattr(r, name).dtype) for name in r._fields}
    assert shapes == {
        "a_offsets": ((17,), "torch.int32"), "expert_ids": ((16,), "torch.int32"),
        "usage_stats": ((2,), "torch.int32"), "row_token": ((40,), "torch.int32"),
        "row_slot": ((40,), "torch.int32"), "row_weight": ((40,), "torch.float32"),
        "slot_row": ((5, 8), "torch.int32"),
    }
    a = built.args
    assert (a.num_tokens, a.top_k, a.num_experts, a.first_expert, a.local_experts) == (5, 8, 128, 32, 16)
    assert (a.topk_ids, a.topk_weights) == (ids.ptr, w.ptr)
    assert (a.a_offsets, a.expert_ids, a.expert_usage_stats) == (r.a_offsets.ptr, r.expert_ids.ptr, r.usage_stats.ptr)
    assert (a.row_token, a.row_slot, a.row_weight, a.slot_row) == tuple(
        getattr(r, n).ptr for n in ("row_token", "row_slot", "row_weight", "slot_row"))
    # local_experts defaults to the experts from first_expert on
    assert _build_moe_route_args(ids, w, num_experts=64, allocate=fake_allocate).args.local_experts == 64
    assert _build_moe_route_args(ids, w, num_experts=64, first_expert=60, allocate=fake_allocate).args.local_experts == 4


def test_route_into_given_arrays_checks_them():
    ids, w = torch_like((3, 2), "int32"), torch_like((3, 2), "float32")
    r = _build_moe_route_args(ids, w, num_experts=4, allocate=fake_allocate).result
    assert _build_moe_route_args(ids, w, r, num_experts=4).result is r
    with pytest.raises(ValueError, match=r"row_token: shape \(5,\); T = 3, k = 2 and 4 local experts need \(6,\)"):
        _build_moe_route_args(ids, w, r._replace(row_token=torch_like((5,), "int32")), num_experts=4)
    with pytest.raises(TypeError, match="row_weight: dtype int32"):
        _build_moe_route_args(ids, w, r._replace(row_weight=torch_like((6,), "int32")), num_experts=4)
    with pytest.raises(ValueError, match="routing: ggemm allocates outputs only"):
        _build_moe_route_args(ids, w, num_experts=4)
    with pytest.raises(TypeError, match="MoeRouting"):
        _build_moe_route_args(ids, w, tuple(r), num_experts=4)
    with pytest.raises(ValueError, match="topk_weights"):
        _build_moe_route_args(ids, torch_like((3, 1), "float32"), r, num_experts=4)


# ---- moe_combine -----------------------------------------------------------------------


def test_combine_struct_and_output_dtypes():
    y, slot_row = torch_like((40, 256), "bfloat16"), torch_like((5, 8), "int32")
    built = _build_moe_combine_args(y, slot_row, None, allocate=fake_allocate)
    a, out = built.args, built.result
    assert out.shape == (5, 256) and out.dtype == "torch.bfloat16"
    assert (a.y_dtype, a.out_dtype) == (ggemm.Dtype.BF16, ggemm.Dtype.BF16)
    assert (a.num_tokens, a.top_k, a.hidden, a.y_rows, a.accumulate) == (5, 8, 256, 40, 0)
    assert (a.y, a.slot_row, a.out) == (y.ptr, slot_row.ptr, out.ptr)
    acc = torch_like((5, 256), "float32")
    a = _build_moe_combine_args(y, slot_row, acc, accumulate=True).args
    assert (a.out_dtype, a.accumulate, a.out) == (ggemm.Dtype.FP32, 1, acc.ptr)
    assert _build_moe_combine_args(y, slot_row, None, out_dtype="float32", allocate=fake_allocate).result.dtype == (
        "torch.float32")


def test_combine_errors():
    y, slot_row = torch_like((40, 256), "float16"), torch_like((5, 8), "int32")
    with pytest.raises(ValueError, match="accumulate=True adds into out"):
        _build_moe_combine_args(y, slot_row, None, accumulate=True, allocate=fake_allocate)
    with pytest.raises(TypeError, match="out_dtype: bfloat16 is neither y's dtype"):
        _build_moe_combine_args(y, slot_row, None, out_dtype="bfloat16", allocate=fake_allocate)
    with pytest.raises(ValueError, match=r"out: shape \(4, 256\) must be \[T, H\] = \(5, 256\)"):
        _build_moe_combine_args(y, slot_row, torch_like((4, 256), "float16"))
    with pytest.raises(TypeError, match="out: dtype bfloat16"):
        _build_moe_combine_args(y, slot_row, torch_like((5, 256), "bfloat16"))
    with pytest.raises(TypeError, match="slot_row: dtype int64"):
        _build_moe_combine_args(y, torch_like((5, 8), "int64"), torch_like((5, 256), "float16"))


# ---- the workspace ------------------------------------------------------------------------


class FakeBackend(Backend):
    """Allocations as fakes, with a switch for 'the stream is being captured'."""

    name = "fake"

    def __init__(self, capturing=False):
        self.allocated = []
        self._capturing = capturing

    def empty(self, shape, dtype, device, stream):
        buf = torch_like(tuple(shape), "int32" if dtype == "int32" else "float32")
        buf.bytes = shape[0]
        self.allocated.append((shape[0], dtype, device, stream))
        return buf

    def capturing(self, device, stream):
        return self._capturing

    @staticmethod
    def nbytes(buf):
        return buf.bytes


def test_workspace_is_cached_per_device_and_stream_and_grows():
    cache, fake = WorkspaceCache(), FakeBackend()
    first = cache.get(fake, 1000, 0, 7)
    assert fake.allocated == [(GRANULE, "uint8", 0, 7)]  # rounded up to the granule, on the caller's stream
    assert cache.get(fake, GRANULE, 0, 7) is first  # fits: no allocation
    assert cache.get(fake, 10, 0, 8) is not first  # another stream has its own
    assert cache.get(fake, 10, 1, 7) is not first  # and another device
    bigger = cache.get(fake, GRANULE + 1, 0, 7)
    assert bigger is not first and fake.allocated[-1] == (2 * GRANULE, "uint8", 0, 7)
    assert cache.get(fake, 5, 0, 7) is bigger  # it never shrinks by itself
    assert cache.get(fake, 0, 0, 7) is None  # nothing needed: no buffer
    cache.clear()
    assert cache.get(fake, 5, 0, 7) is not bigger


def test_workspace_under_capture_is_never_the_cached_one():
    cache = WorkspaceCache()
    eager = cache.get(FakeBackend(), 100, 0, 7)
    capturing = FakeBackend(capturing=True)
    captured = cache.get(capturing, 100, 0, 7)
    assert captured is not eager and capturing.allocated == [(100, "uint8", 0, 7)]  # exact size, fresh
    assert cache.get(FakeBackend(), 100, 0, 7) is eager  # the cache is untouched
    # Without PyTorch's graph pool to keep it, the captured buffer is kept by the cache for good.
    assert any(b is captured for b in cache._kept)


def test_attach_workspace(monkeypatch):
    args = _build_moe_ffn_args(*moe_ffn_problem()).args
    monkeypatch.setattr(_moe, "workspace_bytes", lambda a: 4096)
    mine = torch_like((1024,), "int32")
    attach_workspace(args, None, 0, 0, mine)
    assert (args.workspace, args.workspace_bytes) == (mine.ptr, 4096)
    with pytest.raises(ValueError, match="needs 4096 bytes of device scratch.*pass workspace="):
        attach_workspace(args, None, 0, 0)
    with pytest.raises(ValueError, match="contiguous"):
        attach_workspace(args, None, 0, 0, torch_like((32, 32), "int32", strides=(1, 32)))
    monkeypatch.setattr(_moe, "workspace_bytes", lambda a: 0)
    attach_workspace(args, None, 0, 0)
    assert not args.workspace and args.workspace_bytes == 0


# ---- through the library ------------------------------------------------------------------


def _has(lib, name):
    try:
        _capi.require_function(lib, name)
        return True
    except ggemm.LibraryNotFoundError:
        return False


def test_a_library_without_the_moe_layer_still_loads_and_says_why(lib):
    if _has(lib, "ggemm_moe_ffn"):
        pytest.skip("this libggemm has the MoE layer")
    with pytest.raises(ggemm.LibraryNotFoundError, match="has no ggemm_moe_ffn: it was built before the MoE layer"):
        _capi.require_function(lib, "ggemm_moe_ffn")


@pytest.fixture
def moe_lib(lib):
    if not _has(lib, "ggemm_moe_ffn_workspace_size"):
        pytest.skip("this libggemm predates the MoE layer (no ggemm_moe_*)")
    _moe._sizes.clear()
    return lib


def test_size_queries_answer_and_check(moe_lib):
    t, h, i, k, e = 64, 2048, 768, 8, 128
    ffn = ggemm.moe_ffn_workspace_size(t, h, i, k, e)
    route = ggemm.moe_route_workspace_size(t, k, e)
    assert ffn > 0 and route >= 0
    # The layer keeps h [T*k, I] between its products, at least, in bf16.
    assert ffn >= t * k * i * 2
    assert ggemm.moe_ffn_workspace_size(2 * t, h, i, k, e) >= ffn  # more tokens never need less
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.moe_ffn_workspace_size(t, 2052, i, k, e)  # H not a multiple of 8
    assert info.value.status == ggemm.Status.INVALID_DIMENSION and "hidden" in info.value.message
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.moe_route_workspace_size(t, 65, e)  # k past 64
    assert "top_k" in info.value.message
    with pytest.raises(TypeError, match="dtype"):
        ggemm.moe_ffn_workspace_size(t, h, i, k, e, dtype="float32")


def test_built_ffn_args_pass_the_library_checks(moe_lib):
    # The size query checks the call's arguments: a struct the library reads
    # field by field as built here passes. Holds only if the ctypes struct matches.
    built = _build_moe_ffn_args(*moe_ffn_problem(), first_expert=8, num_experts=16)
    assert _moe.workspace_bytes(built.args) > 0
    built.args.first_expert = 9  # [9, 17) is past 16 experts
    _moe._sizes.clear()
    with pytest.raises(ggemm.GgemmError) as info:
        _moe.workspace_bytes(built.args)
    assert "first_expert" in info.value.message or "local_experts" in info.value.message
