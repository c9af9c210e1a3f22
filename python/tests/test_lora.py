"""lora_shrink_qkv and lora_expand_qkv without a GPU: the ctypes structs built
from fake tensors (ggemm._lora._build_lora_*_args), the shape checks made
before the library is called, and the library's own validation reached
through a NULL handle (the arguments are checked before the handle)."""

from __future__ import annotations

import ctypes
from ctypes import byref

import pytest

import ggemm
from ggemm._core import check
from ggemm._lora import _build_lora_expand_args, _build_lora_shrink_args
from ggemm_fakes import FakeDLPack, lora_expand_problem, lora_shrink_problem, torch_like

# ---- shrink: argument building -------------------------------------------------------


def test_shrink_struct_fields_from_tensors():
    x, lora_a, p, offsets, ids, stats = lora_shrink_problem(m=40, k=128, rank=16, adapters=4, groups=5)
    built = _build_lora_shrink_args(x, lora_a, p, offsets, ids, stats, max_rows_per_group=17)
    a = built.args
    assert isinstance(a, ggemm.LoraShrinkQkvArgs)
    assert a.struct_size == ctypes.sizeof(ggemm.LoraShrinkQkvArgs)
    assert (a.x_dtype, a.p_dtype) == (ggemm.Dtype.BF16, ggemm.Dtype.BF16)
    assert (a.m, a.k, a.rank, a.num_adapters) == (40, 128, 16, 4)
    assert (a.x, a.lora_a, a.p) == (x.ptr, lora_a.ptr, p.ptr)
    assert (a.a_offsets, a.adapter_ids, a.expert_usage_stats) == (offsets.ptr, ids.ptr, stats.ptr)
    assert (a.num_groups, a.max_rows_per_group) == (5, 17)
    assert (a.scale, a.accumulate) == (1.0, 0)
    assert not a.config
    assert built.device is None


def test_shrink_scale_accumulate_dtypes_and_config():
    built = _build_lora_shrink_args(
        *lora_shrink_problem(dtype="float16", p_dtype="float32"), scale=0.5, accumulate=True, num_groups=3,
        config={"tile_m": 64},
    )
    a = built.args
    assert (a.x_dtype, a.p_dtype) == (ggemm.Dtype.FP16, ggemm.Dtype.FP32)
    assert (a.scale, a.accumulate, a.num_groups) == (0.5, 1, 3)
    assert a.config.contents.tile_m == 64 and a.config.contents.struct_size == ctypes.sizeof(ggemm.Config)
    assert any(isinstance(k, ggemm.Config) for k in built.keepalive)
    # The scale goes to a C float; a value past its range becomes inf, which the library refuses.
    assert _build_lora_shrink_args(*lora_shrink_problem(), scale=2).args.scale == 2.0
    with pytest.raises(TypeError, match="scale"):
        _build_lora_shrink_args(*lora_shrink_problem(), scale="big")
    with pytest.raises(TypeError, match="scale"):
        _build_lora_shrink_args(*lora_shrink_problem(), scale=True)


def test_shrink_rank_is_read_from_p_and_checked_against_lora_a():
    x, _, p, o, i, s = lora_shrink_problem(m=40, k=128, rank=16)
    lora_a_rank8 = torch_like((4, 24, 128), "bfloat16")  # 3 * 8 rows: another rank than p's 16
    with pytest.raises(ValueError, match=r"lora_a: .*R = 16.*3 \* R = 48"):
        _build_lora_shrink_args(x, lora_a_rank8, p, o, i, s)
    # The same lora_a with a p of rank 8 is fine.
    p8 = torch_like((3, 40, 8), "bfloat16")
    assert _build_lora_shrink_args(x, lora_a_rank8, p8, o, i, s).args.rank == 8


@pytest.mark.parametrize(
    "which, shape, words",
    [
        ("lora_a", (4, 48, 96), r"lora_a: .*K = 96.*K = 128"),
        ("p", (2, 40, 16), r"p: .*2 planes"),
        ("p", (3, 39, 16), r"p: .*39 rows per plane.*M = 40"),
        ("p", (120, 16), r"p: expected 3-D"),
        ("x", (40, 128, 1), r"x: expected 2-D"),
        ("lora_a", (48, 128), r"lora_a: expected 3-D"),
    ],
)
def test_shrink_shape_mismatches_name_the_argument(which, shape, words):
    x, lora_a, p, o, i, s = lora_shrink_problem(m=40, k=128, rank=16)
    args = {"x": x, "lora_a": lora_a, "p": p}
    args[which] = torch_like(shape, "bfloat16")
    with pytest.raises(ValueError, match=words):
        _build_lora_shrink_args(args["x"], args["lora_a"], args["p"], o, i, s)


def test_shrink_dtypes_routing_and_devices():
    x, lora_a, p, o, i, s = lora_shrink_problem(m=40, k=128, rank=16, groups=5)
    with pytest.raises(TypeError, match="lora_a: dtype float16 differs from x's bfloat16"):
        _build_lora_shrink_args(x, torch_like((4, 48, 128), "float16"), p, o, i, s)
    with pytest.raises(TypeError, match="x: dtype float32"):
        _build_lora_shrink_args(torch_like((40, 128), "float32"), lora_a, p, o, i, s)
    with pytest.raises(TypeError, match="adapter_ids"):
        _build_lora_shrink_args(x, lora_a, p, o, torch_like((5,), "uint32"), s)
    with pytest.raises(TypeError, match="a_offsets"):
        _build_lora_shrink_args(x, lora_a, p, torch_like((6,), "int64"), i, s)
    with pytest.raises(ValueError, match="adapter_ids: has 4 entries, num_groups is 5"):
        _build_lora_shrink_args(x, lora_a, p, o, torch_like((4,), "int32"), s)
    with pytest.raises(ValueError, match="holds only 5 groups"):
        _build_lora_shrink_args(x, lora_a, p, o, i, s, num_groups=6)
    with pytest.raises(ValueError, match="usage_stats"):
        _build_lora_shrink_args(x, lora_a, p, o, i, torch_like((1,), "int32"))
    with pytest.raises(ValueError, match="p: the array is read-only"):
        _build_lora_shrink_args(x, lora_a, torch_like((3, 40, 16), "bfloat16", readonly=True), o, i, s)
    with pytest.raises(ValueError, match="C-contiguous"):
        _build_lora_shrink_args(torch_like((40, 128), "bfloat16", strides=(2, 80)), lora_a, p, o, i, s)
    on1 = lora_shrink_problem(device=1)
    assert _build_lora_shrink_args(*on1).device == 1
    with pytest.raises(ValueError, match="different devices"):
        _build_lora_shrink_args(on1[0], on1[1], torch_like((3, 40, 16), "bfloat16", device=0), *on1[3:])


def test_shrink_through_dlpack_gets_the_stream():
    x, lora_a, p, o, i, s = lora_shrink_problem(m=40, k=128)
    x_dl = FakeDLPack((40, 128), code=4, bits=16)
    built = _build_lora_shrink_args(x_dl, lora_a, p, o, i, s, stream=9)
    assert built.args.x == x_dl.ptr and x_dl.streams_seen == [9] and built.keepalive


def test_shrink_empty_m_is_passed_through():
    assert _build_lora_shrink_args(*lora_shrink_problem(m=0)).args.m == 0


# ---- expand: argument building -------------------------------------------------------


def test_expand_struct_fields_from_tensors():
    p, lora_b, q_out, kv_out, offsets, ids, stats = lora_expand_problem(m=40, rank=16, q_dim=128, kv_dim=32)
    built = _build_lora_expand_args(p, lora_b, q_out, kv_out, offsets, ids, stats, scale=2.0, accumulate=True,
                                    max_rows_per_group=9)
    a = built.args
    assert isinstance(a, ggemm.LoraExpandQkvArgs)
    assert a.struct_size == ctypes.sizeof(ggemm.LoraExpandQkvArgs)
    assert (a.p_dtype, a.out_dtype) == (ggemm.Dtype.BF16, ggemm.Dtype.BF16)
    assert (a.m, a.rank, a.q_dim, a.kv_dim, a.num_adapters) == (40, 16, 128, 32, 4)
    assert (a.p, a.lora_b, a.q_out, a.kv_out) == (p.ptr, lora_b.ptr, q_out.ptr, kv_out.ptr)
    assert (a.a_offsets, a.adapter_ids, a.expert_usage_stats) == (offsets.ptr, ids.ptr, stats.ptr)
    assert (a.num_groups, a.max_rows_per_group, a.scale, a.accumulate) == (5, 9, 2.0, 1)
    assert not a.config


def test_expand_gqa_dims_are_inferred():
    # Llama-style grouped-query attention: q 4096, kv 1024.
    built = _build_lora_expand_args(*lora_expand_problem(m=8, rank=16, q_dim=4096, kv_dim=1024, out_dtype="float32"))
    a = built.args
    assert (a.q_dim, a.kv_dim, a.rank, a.out_dtype) == (4096, 1024, 16, ggemm.Dtype.FP32)


@pytest.mark.parametrize(
    "which, shape, words",
    [
        ("kv_out", (40, 32), r"kv_out: .*40 rows.*2 \* M = 80"),
        ("lora_b", (4, 128 + 32, 16), r"lora_b: .*q_dim \+ 2 \* kv_dim.*\(4, 192, 16\)"),
        ("lora_b", (4, 192, 8), r"lora_b: .*R = 16 from p"),
        ("p", (3, 39, 16), r"p: .*39 rows per plane.*M = 40"),
        ("p", (1, 40, 16), r"p: .*1 planes"),
        ("q_out", (40, 128, 1), r"q_out: expected 2-D"),
        ("kv_out", (2, 40, 32), r"kv_out: expected 2-D"),
    ],
)
def test_expand_shape_mismatches_name_the_argument(which, shape, words):
    p, lora_b, q_out, kv_out, o, i, s = lora_expand_problem(m=40, rank=16, q_dim=128, kv_dim=32)
    args = {"p": p, "lora_b": lora_b, "q_out": q_out, "kv_out": kv_out}
    args[which] = torch_like(shape, "bfloat16")
    with pytest.raises(ValueError, match=words):
        _build_lora_expand_args(args["p"], args["lora_b"], args["q_out"], args["kv_out"], o, i, s)


def test_expand_dtypes():
    p, lora_b, q_out, kv_out, o, i, s = lora_expand_problem(m=40, rank=16, q_dim=128, kv_dim=32)
    with pytest.raises(TypeError, match="lora_b: dtype float16 differs from p's bfloat16"):
        _build_lora_expand_args(p, torch_like((4, 192, 16), "float16"), q_out, kv_out, o, i, s)
    with pytest.raises(TypeError, match="kv_out: dtype float32 differs from q_out's bfloat16"):
        _build_lora_expand_args(p, lora_b, q_out, torch_like((80, 32), "float32"), o, i, s)
    with pytest.raises(TypeError, match="p: dtype float32"):  # P must be an MMA operand: bf16/fp16
        _build_lora_expand_args(torch_like((3, 40, 16), "float32"), lora_b, q_out, kv_out, o, i, s)
    with pytest.raises(ValueError, match="kv_out: the array is read-only"):
        _build_lora_expand_args(p, lora_b, q_out, torch_like((80, 32), "bfloat16", readonly=True), o, i, s)
    fp32 = _build_lora_expand_args(*lora_expand_problem(dtype="float16", out_dtype="float32"))
    assert (fp32.args.p_dtype, fp32.args.out_dtype) == (ggemm.Dtype.FP16, ggemm.Dtype.FP32)


def test_shape_errors_come_before_the_library():
    # The public calls raise ValueError with no library or GPU in play: the
    # shapes are checked before a handle is made or the library is called.
    x, _, p, o, i, s = lora_shrink_problem(m=40, k=128, rank=16)
    with pytest.raises(ValueError, match="lora_a"):
        ggemm.lora_shrink_qkv(x, torch_like((4, 40, 128), "bfloat16"), p, o, i, s)
    pe, lb, q, _, o, i, s = lora_expand_problem(m=40)
    with pytest.raises(ValueError, match="kv_out"):
        ggemm.lora_expand_qkv(pe, lb, q, torch_like((41, 32), "bfloat16"), o, i, s)


# ---- the library's validation, through a NULL handle ---------------------------------


def _shrink(lib, built) -> int:
    return lib.ggemm_lora_shrink_qkv(None, byref(built.args), None)


def _expand(lib, built) -> int:
    return lib.ggemm_lora_expand_qkv(None, byref(built.args), None)


def test_valid_lora_args_reach_the_handle_check(lib):
    # Every field as the library reads it passes its checks; only the NULL
    # handle is refused. This holds only if the ctypes structs match the C ones.
    for built, call in (
        (_build_lora_shrink_args(*lora_shrink_problem(), scale=0.25, accumulate=True, max_rows_per_group=16), _shrink),
        (_build_lora_expand_args(*lora_expand_problem(q_dim=4096, kv_dim=1024), scale=2.0, accumulate=True), _expand),
    ):
        status = call(lib, built)
        assert status == ggemm.Status.INVALID_HANDLE, ggemm.last_error_message()
        with pytest.raises(ggemm.GgemmError) as info:
            check(status)
        assert "handle" in info.value.message


def _expect_library_refuses(call, built, field, value, status, words):
    """Sets one field of the built struct to `value`; the library, called on it
    through `call`, must refuse it with `status` and a message holding `words`."""
    setattr(built.args, field, value)
    with pytest.raises(ggemm.GgemmError) as info:
        check(call(built))
    assert info.value.status == status
    assert words in info.value.message, info.value.message


@pytest.mark.parametrize(
    "field, value, status, words",
    [
        ("k", 20, ggemm.Status.INVALID_DIMENSION, "k = 20"),
        ("rank", 12, ggemm.Status.INVALID_DIMENSION, "rank = 12"),
        ("x", 0x1000_0002, ggemm.Status.MISALIGNED_POINTER, "x = "),
        ("p", None, ggemm.Status.NULL_POINTER, "p is NULL"),
        ("struct_size", 8, ggemm.Status.INVALID_VALUE, "struct_size"),
        ("num_groups", 0, ggemm.Status.INVALID_GROUP_COUNT, "num_groups = 0"),
        ("scale", float("inf"), ggemm.Status.INVALID_VALUE, "scale = inf"),
        ("accumulate", 2, ggemm.Status.INVALID_VALUE, "accumulate = 2"),
        ("p_dtype", 9, ggemm.Status.INVALID_DTYPE, "p_dtype = 9"),
        ("x_dtype", 3, ggemm.Status.INVALID_DTYPE, "x_dtype = 3"),
        ("adapter_ids", 0x1000_0002, ggemm.Status.MISALIGNED_POINTER, "adapter_ids"),
        ("max_rows_per_group", -1, ggemm.Status.INVALID_DIMENSION, "max_rows_per_group"),
    ],
)
def test_shrink_library_checks_become_ggemm_errors(lib, field, value, status, words):
    built = _build_lora_shrink_args(*lora_shrink_problem())
    _expect_library_refuses(lambda b: _shrink(lib, b), built, field, value, status, words)


@pytest.mark.parametrize(
    "field, value, status, words",
    [
        ("q_dim", 100, ggemm.Status.INVALID_DIMENSION, "q_dim = 100"),
        ("kv_dim", 4, ggemm.Status.INVALID_DIMENSION, "kv_dim = 4"),
        ("rank", 0, ggemm.Status.INVALID_DIMENSION, "rank = 0"),
        ("kv_out", 0x1000_0008, ggemm.Status.MISALIGNED_POINTER, "kv_out = "),
        ("lora_b", None, ggemm.Status.NULL_POINTER, "lora_b is NULL"),
        ("struct_size", 8, ggemm.Status.INVALID_VALUE, "struct_size"),
        ("num_groups", ggemm.MAX_GROUPS + 1, ggemm.Status.INVALID_GROUP_COUNT, "num_groups"),
        ("scale", float("nan"), ggemm.Status.INVALID_VALUE, "scale = nan"),
        ("out_dtype", 0, ggemm.Status.INVALID_DTYPE, "out_dtype = 0"),
        ("p_dtype", 3, ggemm.Status.INVALID_DTYPE, "p_dtype = 3"),
    ],
)
def test_expand_library_checks_become_ggemm_errors(lib, field, value, status, words):
    built = _build_lora_expand_args(*lora_expand_problem())
    _expect_library_refuses(lambda b: _expand(lib, b), built, field, value, status, words)


def test_rank_not_a_multiple_of_8_is_the_librarys_message(lib):
    # The Python side infers R = 12 and passes it; the library explains why it is refused.
    x, lora_a, p, o, i, s = lora_shrink_problem(rank=12)
    built = _build_lora_shrink_args(x, lora_a, p, o, i, s)
    with pytest.raises(ggemm.GgemmError) as info:
        check(_shrink(lib, built))
    assert info.value.status == ggemm.Status.INVALID_DIMENSION and "rank = 12" in info.value.message


def test_public_calls_raise_the_librarys_status_without_a_gpu(no_gpu):
    # Valid arguments, no GPU: making the default handle is what fails.
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.lora_shrink_qkv(*lora_shrink_problem())
    assert info.value.status == no_gpu.status
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.lora_expand_qkv(*lora_expand_problem(), accumulate=True)
    assert info.value.status == no_gpu.status


def test_handle_methods_exist():
    assert callable(ggemm.Handle.lora_shrink_qkv) and callable(ggemm.Handle.lora_expand_qkv)
