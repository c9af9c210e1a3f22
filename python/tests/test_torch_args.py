"""The torch fast path (ggemm._torch_args) against the general path, on the CPU.

CPU tensors are made to look like CUDA tensors of device 0 (torch.Tensor's
is_cuda and get_device patched for the test), the stream query is patched, and
the library function is replaced by one that records the struct it is given.
Every call the fast path takes must fill the struct byte for byte as the
general path (_core._build_args) does; every call it declines must reach the
general path, which raises its message.
"""

from __future__ import annotations

import ctypes
import threading

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed")

import ggemm  # noqa: E402
from ggemm import _capi, _core, _torch_args  # noqa: E402

BF16, FP16, FP32, I32 = torch.bfloat16, torch.float16, torch.float32, torch.int32


class Recorder:
    """Stands in for the library function: keeps a copy of each struct."""

    def __init__(self, struct=_capi.GroupedMatmulArgs):
        self.calls = []
        self.struct = struct

    def __call__(self, handle, address, stream):
        self.calls.append((handle, bytes(ctypes.string_at(address, ctypes.sizeof(self.struct))), stream))
        return 0

    def last(self):
        return self.struct.from_buffer_copy(self.calls[-1][1])


@pytest.fixture
def fake_cuda(monkeypatch):
    """CPU tensors as CUDA tensors of device 0, stream 0x5100, and a recording library."""
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 0)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda device: 0x5100)
    rec = Recorder()
    monkeypatch.setattr(_torch_args, "_defaults", {(0, "ggemm_grouped_matmul"): (0x4A00, rec)})
    return rec


def problem(m=40, n=64, k=128, e=4, groups=5, dtype=BF16, out_dtype=BF16, transpose_b=True):
    a = torch.zeros(m, k, dtype=dtype)
    b = torch.zeros((e, n, k) if transpose_b else (e, k, n), dtype=dtype)
    out = torch.zeros(m, n, dtype=out_dtype)
    offsets = torch.zeros(groups + 1, dtype=I32)
    ids = torch.zeros(groups, dtype=I32)
    usage = torch.zeros(2, dtype=I32)
    return a, b, out, offsets, ids, usage


def general_bytes(*tensors, **options) -> bytes:
    return bytes(_core._build_args(*tensors, **options).args)


CASES = {
    "store": ({}, {}),
    "mn_major_fp16_fp32_out": (dict(dtype=FP16, out_dtype=FP32, transpose_b=False), dict(transpose_b=False)),
    "accumulate_by_enum": ({}, dict(epilogue=ggemm.Epilogue.ACCUMULATE)),
    "num_groups_and_max_rows": ({}, dict(num_groups=3, max_rows_per_group=17)),
    "swiglu_half_out": (dict(n=64), dict(epilogue="swiglu")),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fast_path_fills_the_struct_as_the_general_path_does(fake_cuda, name):
    shape, options = CASES[name]
    a, b, out, o, i, u = problem(**shape)
    if options.get("epilogue") == "swiglu":
        out = torch.zeros(a.shape[0], b.shape[1] // 2, dtype=out.dtype)
    ggemm.grouped_matmul(a, b, out, o, i, u, **options)
    assert len(fake_cuda.calls) == 1, "the fast path did not take the call"
    handle, got, stream = fake_cuda.calls[0]
    assert (handle, stream) == (0x4A00, 0x5100)
    assert got == general_bytes(a, b, out, o, i, u, **options)


def test_fast_path_row_scale_gather_and_group_ends(fake_cuda):
    a, b, out, o, i, u = problem(m=40)
    scale = torch.zeros(40, dtype=FP32)
    ggemm.grouped_matmul(a, b, out, o, i, u, epilogue="row_scale", row_scale=scale)
    assert fake_cuda.calls[-1][1] == general_bytes(a, b, out, o, i, u, epilogue="row_scale", row_scale=scale)
    tokens, index = torch.zeros(7, a.shape[1], dtype=BF16), torch.zeros(40, dtype=I32)
    ggemm.grouped_matmul(tokens, b, out, o, i, u, a_row_index=index)
    assert fake_cuda.calls[-1][1] == general_bytes(tokens, b, out, o, i, u, a_row_index=index)
    ends = o[1:]  # torch's offs: no leading zero
    ggemm.grouped_matmul(a, b, out, None, i, u, group_ends=ends)
    x = fake_cuda.last()
    assert (x.a_offsets, x.group_ends, x.num_groups) == (None, ends.data_ptr(), 5)
    assert fake_cuda.calls[-1][1] == general_bytes(a, b, out, None, i, u, group_ends=ends)
    assert len(fake_cuda.calls) == 3


def test_the_op_takes_the_fast_path_and_bumps_the_version(fake_cuda):
    import ggemm.torch  # noqa: F401  (registers torch.ops.ggemm)

    a, b, out, o, i, u = problem()
    v = out._version
    # The CPU tensors dispatch to the CPU key, which the op does not have: the
    # CUDA kernel is called as the dispatcher would call it.
    ggemm.torch._grouped_matmul_kernel(a, b, out, o, i, u)
    assert out._version == v + 1
    assert fake_cuda.calls[-1][1] == general_bytes(a, b, out, o, i, u)


def test_declined_calls_get_the_general_paths_message(fake_cuda):
    a, b, out, o, i, u = problem(m=40, k=128)
    with pytest.raises(ValueError, match="C-contiguous"):
        ggemm.grouped_matmul(torch.zeros(128, 40, dtype=BF16).t(), b, out, o, i, u)
    with pytest.raises(TypeError, match="b: dtype float16 differs from a's bfloat16"):
        ggemm.grouped_matmul(a, b.half(), out, o, i, u)
    with pytest.raises(TypeError, match="expert_ids"):
        ggemm.grouped_matmul(a, b, out, o, i.long(), u)
    with pytest.raises(ValueError, match="a: has 39 rows"):
        ggemm.grouped_matmul(a[:39], b, out, o, i, u)
    with pytest.raises(ValueError, match="expert_ids: has 4 entries, num_groups is 5"):
        ggemm.grouped_matmul(a, b, out, o, i[:4], u)
    with pytest.raises(ValueError, match="row_scale is read only by epilogue='row_scale'"):
        ggemm.grouped_matmul(a, b, out, o, i, u, row_scale=torch.zeros(40, dtype=FP32))
    with pytest.raises(ValueError, match="give the groups as exactly one of them"):
        ggemm.grouped_matmul(a, b, out, o, i, u, group_ends=o[1:])
    with pytest.raises(ValueError, match="group_ends: needs num_groups >= 1 entries"):
        ggemm.grouped_matmul(a, b, out, None, i, u, group_ends=o[:0])
    with pytest.raises(ValueError, match="epilogue="):
        ggemm.grouped_matmul(a, b, out, o, i, u, epilogue="gelu")
    assert not fake_cuda.calls


def test_other_devices_and_handles_take_the_general_path(fake_cuda, monkeypatch):
    a, b, out, o, i, u = problem()
    monkeypatch.setattr(torch.Tensor, "get_device", lambda self: 1 if self.dtype == I32 else 0)
    with pytest.raises(ValueError, match="different devices"):
        ggemm.grouped_matmul(a, b, out, o, i, u)
    assert not fake_cuda.calls


def test_spellings_and_overrides_the_fast_path_leaves_to_the_general_one(fake_cuda, monkeypatch):
    # A config override, plane splits or another spelling of an epilogue are
    # the general path's; it then calls the library through _launch.
    launched = []
    monkeypatch.setattr(_core, "_launch", lambda function, built, stream, handle: launched.append(bytes(built.args)))
    a, b, out, o, i, u = problem()
    ggemm.grouped_matmul(a, b, out, o, i, u, epilogue=" Row-Scale ", row_scale=torch.zeros(40, dtype=FP32))
    ggemm.grouped_matmul(a, b, out, o, i, u, config={"tile_m": 64})
    assert len(launched) == 2 and not fake_cuda.calls


def test_each_thread_fills_its_own_struct(fake_cuda):
    seen = {}
    together = threading.Barrier(3)  # all alive at once (a dead thread's struct may be reused)

    def run(name):
        seen[name] = _torch_args._mine.address
        together.wait()

    threads = [threading.Thread(target=run, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen.values())) == 3


def test_packer_matches_ctypes_for_every_struct():
    for cls in (_capi.GroupedMatmulArgs, _capi.LoraShrinkQkvArgs, _capi.LoraExpandQkvArgs, _capi.MoeFfnArgs,
                _capi.MoeRouteArgs, _capi.MoeCombineArgs, _capi.Config):
        packer = _capi.struct_packer(cls)
        values = []
        for n, (name, ctype) in enumerate(cls._fields_):
            values.append(0.5 * n if ctype is ctypes.c_float else 0x1000 + n)
        x = cls()
        packer.pack_into(x, 0, *values)
        for (name, ctype), want in zip(cls._fields_, values):
            got = getattr(x, name)
            if isinstance(got, ctypes._Pointer):
                got = ctypes.cast(got, ctypes.c_void_p).value
            assert got == want, f"{cls.__name__}.{name}"


# ---- the MoE layer's call -----------------------------------------------------------

WORKSPACE_PTR, WORKSPACE_BYTES = 0x7700, 4096


@pytest.fixture
def fake_moe(fake_cuda, monkeypatch):
    """fake_cuda, with ggemm_moe_ffn recorded and the workspace a fixed
    (pointer, size) instead of a CUDA buffer."""
    rec = Recorder(_capi.MoeFfnArgs)
    monkeypatch.setitem(_torch_args._defaults, (0, "ggemm_moe_ffn"), (0x4A00, rec))

    def workspace(mine, key, device, stream):
        mine.moe_args.workspace, mine.moe_args.workspace_bytes = WORKSPACE_PTR, WORKSPACE_BYTES
        return None

    monkeypatch.setattr(_torch_args, "_moe_workspace", workspace)
    return rec


def moe_problem(t=5, h=64, i=32, e=4, k=2, dtype=BF16):
    return (torch.zeros(t, h, dtype=dtype), torch.zeros(e, 2 * i, h, dtype=dtype), torch.zeros(e, h, i, dtype=dtype),
            torch.zeros(t, k, dtype=I32), torch.zeros(t, k, dtype=FP32))


def general_moe_bytes(*tensors, out, **options) -> bytes:
    from ggemm import _moe

    args = _moe._build_moe_ffn_args(*tensors, out, stream=0x5100, **options).args
    args.workspace, args.workspace_bytes = WORKSPACE_PTR, WORKSPACE_BYTES
    return bytes(args)


@pytest.mark.parametrize("options", [{}, dict(first_expert=8, num_experts=16)], ids=["local", "expert_parallel"])
def test_moe_ffn_fast_path_fills_the_struct_as_the_general_path_does(fake_moe, options):
    import ggemm.torch as gt

    operands = moe_problem(dtype=FP16 if options else BF16)
    out = torch.zeros(5, 64, dtype=operands[0].dtype)
    assert ggemm.moe_ffn(*operands, out=out, **options) is out
    assert len(fake_moe.calls) == 1, "the fast path did not take the call"
    handle, got, stream = fake_moe.calls[0]
    assert (handle, stream) == (0x4A00, 0x5100)
    assert got == general_moe_bytes(*operands, out=out, **options)
    # ggemm.torch's eager call and the operator's kernel: the same struct, a new output.
    for call in (lambda: gt.moe_ffn(*operands, **options),
                 lambda: gt._moe_ffn_impl(*operands, options.get("first_expert", 0), options.get("num_experts"))):
        new = call()
        assert new.shape == (5, 64) and new.dtype == operands[0].dtype
        assert fake_moe.calls[-1][1] == general_moe_bytes(*operands, out=new, **options)
    assert len(fake_moe.calls) == 3


def test_moe_ffn_leaves_calls_on_a_stream_of_their_own_to_the_general_path(fake_moe):
    # Its output and workspace are the general path's to place by that
    # stream (stream-ordered allocation, the capture check of that stream).
    x, wgu, wd, ids, w = moe_problem()
    assert _torch_args.moe_ffn(x, wgu, wd, ids, w, None, 0, None, 0x7777, None) is None
    assert _torch_args.moe_ffn(x, wgu, wd, ids, w, None, 0, None, None, None) is not None
    assert len(fake_moe.calls) == 1


def test_moe_ffn_declined_calls_get_the_general_paths_message(fake_moe):
    x, wgu, wd, ids, w = moe_problem()
    with pytest.raises(ValueError, match="w_down: shape"):
        ggemm.moe_ffn(x, wgu, torch.zeros(4, 64, 16, dtype=BF16), ids, w)
    with pytest.raises(TypeError, match="w_gate_up: dtype float16 differs from x's bfloat16"):
        ggemm.moe_ffn(x, wgu.half(), wd, ids, w)
    with pytest.raises(TypeError, match="topk_ids"):
        ggemm.moe_ffn(x, wgu, wd, ids.long(), w)
    with pytest.raises(ValueError, match="num_experts: give the global expert count"):
        ggemm.moe_ffn(x, wgu, wd, ids, w, first_expert=4)
    with pytest.raises(ValueError, match="out: shape"):
        ggemm.moe_ffn(x, wgu, wd, ids, w, out=torch.zeros(5, 32, dtype=BF16))
    assert not fake_moe.calls


# ---- the drop-in: torch._grouped_mm's call ---------------------------------------


def test_grouped_mm_passes_torch_offs_as_group_ends(fake_cuda, monkeypatch):
    import ggemm.torch as gt

    monkeypatch.setattr(_torch_args, "expert_routing",
                        lambda like, ordinal, experts: (torch.zeros(experts, dtype=I32), torch.zeros(2, dtype=I32)))
    e, m, k, n = 4, 40, 64, 48
    a = torch.zeros(m, k, dtype=BF16)
    offs = torch.tensor([10, 10, 30, 40], dtype=I32)
    w = torch.zeros(e, n, k, dtype=BF16)
    out = gt.grouped_mm(a, w.transpose(-2, -1), offs)  # the K-major view: no copy
    x = fake_cuda.last()
    assert out.shape == (m, n) and out.dtype == BF16
    assert (x.a_offsets, x.group_ends, x.num_groups, x.transpose_b) == (None, offs.data_ptr(), 4, 1)
    assert (x.m, x.n, x.k, x.num_experts, x.b, x.c) == (m, n, k, e, w.data_ptr(), out.data_ptr())
    w_kn = torch.zeros(e, k, n, dtype=BF16)  # [E, K, N] itself
    gt.grouped_mm(a, w_kn, offs, torch.float32)
    x = fake_cuda.last()
    assert (x.transpose_b, x.b, x.c_dtype) == (0, w_kn.data_ptr(), 3)
    # Size-1 dimensions' strides do not matter (torch's contiguity rule).
    w1 = torch.zeros(1, n, 1, dtype=BF16).transpose(-2, -1)
    gt.grouped_mm(torch.zeros(m, 1, dtype=BF16), w1, offs[:1])
    assert fake_cuda.last().transpose_b in (0, 1) and len(fake_cuda.calls) == 3


def test_grouped_mm_copies_what_ggemm_cannot_read(fake_cuda, monkeypatch):
    import ggemm.torch as gt

    monkeypatch.setattr(_torch_args, "expert_routing",
                        lambda like, ordinal, experts: (torch.zeros(experts, dtype=I32), torch.zeros(2, dtype=I32)))
    e, m, k, n = 4, 40, 64, 48
    offs = torch.tensor([10, 10, 30, 40], dtype=I32)
    # b in neither layout and int64 offs: copied, then the matmul itself.
    strided = torch.zeros(e, k, 2 * n, dtype=BF16)[:, :, ::2]
    out = gt.grouped_mm(torch.zeros(m, k, dtype=BF16), strided, offs.long())
    x = fake_cuda.last()
    assert out.shape == (m, n) and len(fake_cuda.calls) == 1
    assert x.a_offsets is None and x.group_ends not in (None, offs.data_ptr()) and x.num_groups == 4
    assert x.transpose_b == 0 and x.b != strided.data_ptr()
    assert gt.grouped_mm(torch.zeros(0, k, dtype=BF16), strided, offs).shape == (0, n)  # nothing to do
    assert len(fake_cuda.calls) == 1
