"""Argument inference from fake tensors (no GPU, no library): the ctypes
struct that grouped_matmul would pass, built by ggemm._core._build_args."""

from __future__ import annotations

import ctypes

import pytest

import ggemm
from ggemm._core import _build_args, parse_epilogue, resolve_stream, stream_handle
from ggemm._tensor import describe
from ggemm_fakes import FakeCudaArray, FakeDLPack, moe_problem, torch_like


def test_struct_fields_from_tensors():
    a, b, out, offsets, ids, stats = moe_problem(m=40, n=64, k=128, experts=4, groups=5)
    built = _build_args(a, b, out, offsets, ids, stats, max_rows_per_group=17)
    x = built.args
    assert x.struct_size == ctypes.sizeof(ggemm.GroupedMatmulArgs)
    assert (x.a_dtype, x.b_dtype, x.c_dtype) == (ggemm.Dtype.BF16,) * 3
    assert (x.m, x.n, x.k, x.num_experts) == (40, 64, 128, 4)
    assert (x.a, x.b, x.c) == (a.ptr, b.ptr, out.ptr)
    assert (x.a_offsets, x.expert_ids, x.expert_usage_stats) == (offsets.ptr, ids.ptr, stats.ptr)
    assert x.transpose_b == 1
    assert x.num_groups == 5 and x.max_rows_per_group == 17
    assert (x.a_plane_split0, x.a_plane_split1) == (0, 0)
    assert x.epilogue == ggemm.Epilogue.STORE
    assert x.row_scale is None and not x.config
    assert built.device is None  # no fake says where it lives


def test_bf16_from_v2_and_dtype_attribute():
    # PyTorch exports bfloat16 as '<V2'; its dtype attribute names it.
    info = describe(FakeCudaArray((4, 8), "<V2", dtype="torch.bfloat16"), "a")
    assert info.dtype == "bfloat16" and info.itemsize == 2


def test_bf16_from_descr():
    info = describe(FakeCudaArray((4, 8), "<V2", descr=[("bfloat16", "<V2")]), "a")
    assert info.dtype == "bfloat16"


def test_v2_without_a_name_is_refused():
    with pytest.raises(TypeError, match="bfloat16"):
        describe(FakeCudaArray((4, 8), "<V2"), "a")


def test_dtype_attribute_wins_over_an_ambiguous_typestr():
    # A producer that exports bf16 with a float16 typestr: its dtype attribute decides.
    assert describe(FakeCudaArray((4, 8), "<f2", dtype="torch.bfloat16"), "a").dtype == "bfloat16"
    assert describe(FakeCudaArray((4, 8), "<f2", dtype="float16"), "a").dtype == "float16"
    assert describe(FakeCudaArray((4, 8), "<f2"), "a").dtype == "float16"


def test_fp16_operands_and_fp32_output():
    built = _build_args(*moe_problem(dtype="float16", out_dtype="float32"))
    assert (built.args.a_dtype, built.args.b_dtype, built.args.c_dtype) == (
        ggemm.Dtype.FP16,
        ggemm.Dtype.FP16,
        ggemm.Dtype.FP32,
    )


def test_weights_k_by_n():
    built = _build_args(*moe_problem(n=48, k=32, transpose_b=False), transpose_b=False)
    assert built.args.transpose_b == 0 and (built.args.n, built.args.k) == (48, 32)


def test_weights_of_the_wrong_shape():
    a, b, out, o, i, s = moe_problem(n=48, k=32, transpose_b=False)  # b is [E, K, N]
    with pytest.raises(ValueError, match=r"transpose_b=True"):
        _build_args(a, b, out, o, i, s)


def test_non_contiguous_is_refused_with_a_clear_error():
    a, b, out, o, i, s = moe_problem(m=40, k=128)
    a_t = torch_like((40, 128), "bfloat16", strides=(2, 80))  # a transposed view
    with pytest.raises(ValueError, match="C-contiguous"):
        _build_args(a_t, b, out, o, i, s)
    b_sliced = torch_like((4, 64, 128), "bfloat16", strides=(64 * 256 * 2, 256 * 2, 2))  # rows padded to 256
    with pytest.raises(ValueError, match="contiguous"):
        _build_args(a, b_sliced, out, o, i, s)


def test_explicit_contiguous_strides_and_unit_dims_are_accepted():
    a = torch_like((40, 128), "bfloat16", strides=(256, 2))
    assert describe(a, "a").is_contiguous()
    one_row = torch_like((1, 128), "bfloat16", strides=(12345 * 2, 2))  # a size-1 dim's stride is free
    assert describe(one_row, "a").is_contiguous()
    odd = FakeCudaArray((4, 8), "<f2", strides=(16, 3))
    with pytest.raises(ValueError, match="item size"):
        describe(odd, "a")


def test_operand_dtypes_must_agree():
    a, _, out, o, i, s = moe_problem()
    b16 = torch_like((4, 64, 128), "float16")
    with pytest.raises(TypeError, match="both operands"):
        _build_args(a, b16, out, o, i, s)


def test_index_arrays_must_be_32_bit():
    a, b, out, _, i, s = moe_problem(groups=5)
    with pytest.raises(TypeError, match="a_offsets"):
        _build_args(a, b, out, torch_like((6,), "int64"), i, s)
    uint_offsets = torch_like((6,), "uint32")
    assert _build_args(a, b, out, uint_offsets, i, s).args.a_offsets == uint_offsets.ptr


def test_read_only_output_is_refused():
    a, b, _, o, i, s = moe_problem()
    with pytest.raises(ValueError, match="read-only"):
        _build_args(a, b, torch_like((40, 64), "bfloat16", readonly=True), o, i, s)


def test_num_groups_default_explicit_and_bounds():
    a, b, out, o, i, s = moe_problem(groups=5)
    assert _build_args(a, b, out, o, i, s).args.num_groups == 5
    assert _build_args(a, b, out, o, i, s, num_groups=3).args.num_groups == 3
    with pytest.raises(ValueError, match="holds only 5 groups"):
        _build_args(a, b, out, o, i, s, num_groups=6)
    with pytest.raises(ValueError, match="expert_ids"):
        _build_args(a, b, out, torch_like((9,), "int32"), i, s)
    with pytest.raises(ValueError, match="usage_stats"):
        _build_args(a, b, out, o, i, torch_like((1,), "int32"))


@pytest.mark.parametrize(
    "spelling, value",
    [("store", 0), ("accumulate", 1), ("row_scale", 2), ("ROW-SCALE", 2), (ggemm.Epilogue.ACCUMULATE, 1), (2, 2), ("swiglu", 3), ("SwiGLU", 3)],
)
def test_epilogue_spellings(spelling, value):
    assert parse_epilogue(spelling) == value


def test_epilogues_and_row_scale():
    a, b, out, o, i, s = moe_problem(m=40)
    assert _build_args(a, b, out, o, i, s, epilogue="accumulate").args.epilogue == ggemm.Epilogue.ACCUMULATE
    scale = torch_like((40,), "float32")
    built = _build_args(a, b, out, o, i, s, epilogue="row_scale", row_scale=scale)
    assert built.args.epilogue == ggemm.Epilogue.ROW_SCALE and built.args.row_scale == scale.ptr
    with pytest.raises(ValueError, match="needs row_scale"):
        _build_args(a, b, out, o, i, s, epilogue="row_scale")
    with pytest.raises(ValueError, match="read only by epilogue='row_scale'"):
        _build_args(a, b, out, o, i, s, row_scale=scale)
    with pytest.raises(ValueError, match="M is 40"):
        _build_args(a, b, out, o, i, s, epilogue="row_scale", row_scale=torch_like((39,), "float32"))
    with pytest.raises(TypeError, match="row_scale"):
        _build_args(a, b, out, o, i, s, epilogue="row_scale", row_scale=torch_like((40,), "bfloat16"))
    with pytest.raises(ValueError, match="epilogue="):
        _build_args(a, b, out, o, i, s, epilogue="gelu")


def test_plane_splits_need_three_planes_of_rows():
    args3 = moe_problem(m=40, n=64, planes=3)
    built = _build_args(*args3, plane_splits=(32, 48))
    assert (built.args.a_plane_split0, built.args.a_plane_split1, built.args.m) == (32, 48, 40)
    with pytest.raises(ValueError, match=r"3 \* 40"):
        _build_args(*moe_problem(m=40), plane_splits=(32, 48))


def test_devices_must_agree_and_are_reported():
    a, b, out, o, i, s = moe_problem(device=1)
    assert _build_args(a, b, out, o, i, s).device == 1
    other = torch_like((40, 64), "bfloat16", device=0)
    with pytest.raises(ValueError, match="different devices"):
        _build_args(a, b, other, o, i, s)


def test_config_from_dict_and_struct():
    built = _build_args(*moe_problem(), config={"tile_m": 64, "stages": 4})
    cfg = built.args.config.contents
    assert (cfg.tile_m, cfg.stages, cfg.tile_n) == (64, 4, 0)
    assert cfg.struct_size == ctypes.sizeof(ggemm.Config)
    assert any(isinstance(k, ggemm.Config) for k in built.keepalive)  # alive until the call returns
    with pytest.raises(TypeError, match="no field 'tile_q'"):
        _build_args(*moe_problem(), config={"tile_q": 1})
    explicit = ggemm.Config(tile_m=32)
    assert _build_args(*moe_problem(), config=explicit).args.config.contents.tile_m == 32


def test_empty_m_is_passed_through():
    built = _build_args(*moe_problem(m=0))
    assert built.args.m == 0  # the library treats M = 0 as a no-op


def test_things_that_are_not_cuda_tensors():
    a, b, out, o, i, s = moe_problem()
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        _build_args([[1.0]], b, out, o, i, s)
    with pytest.raises(ValueError, match="masked"):
        describe(FakeCudaArray((4,), "<f4", mask=object()), "x")
    with pytest.raises(TypeError, match="big-endian"):
        describe(FakeCudaArray((4,), ">f2"), "x")
    with pytest.raises(TypeError, match="not a dtype ggemm reads"):
        describe(FakeCudaArray((4,), "<c8", ptr=0x1000), "x")  # complex


# ---- a torch-shaped object, read through the direct path --------------------


class _TorchDtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class _Dev:
    def __init__(self, type_, index):
        self.type, self.index = type_, index

    def __str__(self):
        return f"{self.type}:{self.index}"


class FakeTorchTensor:
    """Duck-types the few torch.Tensor members ggemm reads."""

    def __init__(self, shape, dtype, strides=None, is_cuda=True, ptr=0x7D00_0000_0000, index=0):
        self.shape, self._ptr, self.is_cuda = tuple(shape), ptr, is_cuda
        self.dtype = _TorchDtype(dtype)
        self.device = _Dev("cuda" if is_cuda else "cpu", index if is_cuda else None)
        self.layout = "torch.strided"
        if strides is None:
            strides, acc = [], 1
            for s in reversed(self.shape):
                strides.insert(0, acc)
                acc *= s
        self._strides = tuple(strides)

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._strides

    def get_device(self):
        return self.device.index if self.is_cuda else -1

    def is_contiguous(self):  # torch's rule: dense row-major, size-1 dimensions' strides ignored
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self._strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def element_size(self):
        return 2


FakeTorchTensor.__module__ = "torch"  # what ggemm checks to take the direct path


def test_torch_path_reads_attributes():
    info = describe(FakeTorchTensor((8, 16), "bfloat16", index=3), "a")
    assert (info.source, info.dtype, info.shape, info.device, info.ptr) == ("torch", "bfloat16", (8, 16), 3, 0x7D00_0000_0000)
    assert info.is_contiguous()
    assert not describe(FakeTorchTensor((8, 16), "bfloat16", strides=(1, 8)), "a").is_contiguous()
    with pytest.raises(ValueError, match="CUDA tensor"):
        describe(FakeTorchTensor((8, 16), "bfloat16", is_cuda=False), "a")


# ---- DLPack -------------------------------------------------------------------


def test_dlpack_bf16_with_byte_offset():
    t = FakeDLPack((40, 128), code=4, bits=16, ptr=0x7E00_0000_0000, byte_offset=256, device_id=2)
    info = describe(t, "a", stream=0)
    assert (info.dtype, info.shape, info.ptr, info.device, info.source) == (
        "bfloat16",
        (40, 128),
        0x7E00_0000_0100,
        2,
        "dlpack",
    )
    assert info.keepalive, "the capsule must stay alive until the call returns"
    assert t.streams_seen == [1]  # DLPack names the legacy default stream 1, never 0


def test_dlpack_stream_is_passed_through():
    t = FakeDLPack((4,), code=0, bits=32)
    describe(t, "x", stream=0xABC0)
    assert t.streams_seen == [0xABC0]
    legacy = FakeDLPack((4,), code=1, bits=32, accepts_stream=False)
    assert describe(legacy, "x").dtype == "uint32"


def test_dlpack_refusals():
    with pytest.raises(ValueError, match="CPU"):
        describe(FakeDLPack((4,), code=2, bits=32, device_type=1), "x")
    with pytest.raises(TypeError, match="DLPack dtype"):
        describe(FakeDLPack((4,), code=5, bits=64), "x")  # complex
    transposed = FakeDLPack((8, 4), code=2, bits=16, strides=(1, 8))
    assert not describe(transposed, "x").is_contiguous()


def test_dlpack_in_build_args():
    a, b, out, o, i, s = moe_problem(m=40, k=128)
    a_dl = FakeDLPack((40, 128), code=4, bits=16)
    built = _build_args(a_dl, b, out, o, i, s, stream=7)
    assert built.args.a == a_dl.ptr and a_dl.streams_seen == [7]
    assert built.keepalive


# ---- streams ------------------------------------------------------------------


class _TorchStream:
    cuda_stream = 0x5000


class _CupyStream:
    ptr = 0x6000


class _ProtocolStream:
    def __cuda_stream__(self):
        return (0, 0x7000)


def test_stream_handles():
    assert stream_handle(None) == 0
    assert stream_handle(0x1234) == 0x1234
    assert stream_handle(_TorchStream()) == 0x5000
    assert stream_handle(_CupyStream()) == 0x6000
    assert stream_handle(_ProtocolStream()) == 0x7000
    assert stream_handle(ctypes.c_void_p(0x8000)) == 0x8000
    with pytest.raises(TypeError):
        stream_handle(True)
    with pytest.raises(TypeError):
        stream_handle("stream")


def test_stream_resolution_without_torch():
    a, b, out, o, i, s = moe_problem()
    assert resolve_stream(None, (a, b, out, o, i, s)) == 0  # nobody names one: the legacy default stream
    assert resolve_stream(0x99, (a, b)) == 0x99  # explicit wins
    named = [torch_like((4,), "int32", stream=0x4400) for _ in range(2)]
    assert resolve_stream(None, named) == 0x4400  # CAI v3 producers that agree
    mixed = [torch_like((4,), "int32", stream=0x4400), torch_like((4,), "int32", stream=0x5500)]
    assert resolve_stream(None, mixed) == 0


def test_swiglu_epilogue_reads_n_from_the_weights_and_writes_half():
    a, b, _, o, i, s = moe_problem(m=40, n=64, k=128)  # b [4, 64, 128]: 32 gate rows, 32 up rows
    half = torch_like((40, 32), "bfloat16")
    built = _build_args(a, b, half, o, i, s, epilogue="swiglu")
    assert built.args.epilogue == ggemm.Epilogue.SWIGLU == 3
    assert (built.args.m, built.args.n, built.args.k) == (40, 64, 128)
    assert built.args.c == half.ptr
    full = torch_like((40, 64), "bfloat16")  # out [M, N] is what 'store' writes, not 'swiglu'
    with pytest.raises(ValueError, match=r"swiglu.*N = 128"):
        _build_args(a, b, full, o, i, s, epilogue="swiglu")


def test_gather_on_load_takes_a_of_any_row_count():
    _, b, out, o, i, s = moe_problem(m=40, n=64, k=128)
    tokens = torch_like((7, 128), "bfloat16")  # 7 tokens, 40 sorted (token, slot) rows read from them
    index = torch_like((40,), "int32")
    built = _build_args(tokens, b, out, o, i, s, a_row_index=index)
    x = built.args
    assert (x.a, x.a_row_index, x.a_rows, x.m) == (tokens.ptr, index.ptr, 7, 40)
    plain = _build_args(*moe_problem(m=40, n=64, k=128)).args
    assert not plain.a_row_index and plain.a_rows == 0  # no gather: the library reads a as [M, K]
    with pytest.raises(ValueError, match="a: has 7 rows"):
        _build_args(tokens, b, out, o, i, s)  # without the index, a must have M rows


def test_gather_index_is_checked():
    _, b, out, o, i, s = moe_problem(m=40, n=64, k=128)
    tokens = torch_like((7, 128), "bfloat16")
    with pytest.raises(TypeError, match="a_row_index"):
        _build_args(tokens, b, out, o, i, s, a_row_index=torch_like((40,), "int64"))
    with pytest.raises(ValueError, match="a_row_index: has 39 entries, M is 40"):
        _build_args(tokens, b, out, o, i, s, a_row_index=torch_like((39,), "int32"))
    with pytest.raises(ValueError, match="plane_splits"):
        _build_args(tokens, b, out, o, i, s, a_row_index=torch_like((40,), "int32"), plane_splits=(16, 32))


def test_gather_and_swiglu_together_as_the_moe_gate_up():
    # x [T, H] in token order, w_gate_up [E, 2I, H], h [R, I]: the MoE layer's first product.
    x = torch_like((5, 256), "float16")
    w = torch_like((8, 2 * 96, 256), "float16")
    h = torch_like((40, 96), "float16")
    o, i, s = torch_like((9,), "int32"), torch_like((8,), "int32"), torch_like((2,), "int32")
    x_args = _build_args(x, w, h, o, i, s, epilogue="swiglu", a_row_index=torch_like((40,), "int32")).args
    assert (x_args.m, x_args.n, x_args.k, x_args.num_experts, x_args.a_rows) == (40, 192, 256, 8, 5)
    assert x_args.a_dtype == x_args.c_dtype == ggemm.Dtype.FP16
