"""The error path: library statuses become GgemmError with the library's message.

None of this needs a GPU: ggemm_grouped_matmul checks its arguments before it
looks at the handle, so a NULL handle reaches every host-side check.
"""

from __future__ import annotations

import pickle
import threading
from ctypes import byref, sizeof

import pytest

import ggemm
from ggemm import _capi
from ggemm._core import _build_args, check
from ggemm_fakes import moe_problem


def call_without_handle(lib, built) -> int:
    return lib.ggemm_grouped_matmul(None, byref(built.args), None)


def test_create_without_gpu_raises(no_gpu):
    e = no_gpu
    assert isinstance(e, ggemm.GgemmError)
    assert e.status in (ggemm.Status.DRIVER_NOT_FOUND, ggemm.Status.NO_DEVICE)
    assert e.status_name == ggemm.status_string(e.status)
    assert e.message, "the library's message must come with the status"
    assert str(e).startswith(e.status_name + ": ")
    # Again, through the public class and the shared-handle path.
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.Handle(0)
    assert info.value.status == e.status
    with pytest.raises(ggemm.GgemmError):
        ggemm.default_handle(0)


def test_device_ordinal_out_of_range(lib):
    with pytest.raises(ggemm.GgemmError) as info:
        ggemm.Handle(1 << 20)
    assert info.value.status in (ggemm.Status.DRIVER_NOT_FOUND, ggemm.Status.NO_DEVICE)


def test_valid_args_reach_the_handle_check(lib):
    # Every field as the library reads it passes its checks; only the NULL
    # handle is refused. This holds only if the ctypes struct matches the C one.
    built = _build_args(*moe_problem(), max_rows_per_group=16)
    status = call_without_handle(lib, built)
    assert status == ggemm.Status.INVALID_HANDLE, ggemm.last_error_message()
    with pytest.raises(ggemm.GgemmError) as info:
        check(status)
    assert info.value.status == ggemm.Status.INVALID_HANDLE
    assert "handle" in info.value.message


@pytest.mark.parametrize(
    "change, status, words",
    [
        (dict(n=12), ggemm.Status.INVALID_DIMENSION, "n = 12"),
        (dict(k=20), ggemm.Status.INVALID_DIMENSION, "k = 20"),
        (dict(a_ptr=0x1000_0002), ggemm.Status.MISALIGNED_POINTER, "a = "),
        (dict(struct_size=8), ggemm.Status.INVALID_VALUE, "struct_size"),
        (dict(num_groups=0), ggemm.Status.INVALID_GROUP_COUNT, "num_groups = 0"),
        (dict(num_groups=ggemm.MAX_GROUPS + 1), ggemm.Status.INVALID_GROUP_COUNT, "num_groups"),
        (dict(epilogue=7), ggemm.Status.INVALID_VALUE, "epilogue = 7"),
        (dict(c_dtype=9), ggemm.Status.INVALID_DTYPE, "c_dtype = 9"),
        (dict(splits=(16, 8)), ggemm.Status.INVALID_VALUE, "a_plane_split0/1"),
        (dict(max_rows_per_group=-1), ggemm.Status.INVALID_DIMENSION, "max_rows_per_group"),
    ],
)
def test_library_checks_become_ggemm_errors(lib, change, status, words):
    n, k = change.get("n", 64), change.get("k", 128)
    built = _build_args(*moe_problem(n=n, k=k))
    args = built.args
    if "a_ptr" in change:
        args.a = change["a_ptr"]
    if "struct_size" in change:
        args.struct_size = change["struct_size"]
    if "num_groups" in change:
        args.num_groups = change["num_groups"]
    if "epilogue" in change:
        args.epilogue = change["epilogue"]
    if "c_dtype" in change:
        args.c_dtype = change["c_dtype"]
    if "splits" in change:
        args.a_plane_split0, args.a_plane_split1 = change["splits"]
    if "max_rows_per_group" in change:
        args.max_rows_per_group = change["max_rows_per_group"]
    with pytest.raises(ggemm.GgemmError) as info:
        check(call_without_handle(lib, built))
    assert info.value.status == status
    assert words in info.value.message, info.value.message
    assert str(info.value) == f"{info.value.status_name}: {info.value.message}"


def test_config_struct_size_is_checked_by_the_library(lib):
    # A config is read only at launch (it needs the device), so here the args pass.
    built = _build_args(*moe_problem(), config={"tile_m": 64})
    assert built.args.config.contents.struct_size == sizeof(ggemm.Config)
    assert call_without_handle(lib, built) == ggemm.Status.INVALID_HANDLE


def test_last_error_message_is_per_thread(lib):
    built = _build_args(*moe_problem())
    built.args.n = 12
    assert call_without_handle(lib, built) == ggemm.Status.INVALID_DIMENSION
    seen = []
    t = threading.Thread(target=lambda: seen.append(ggemm.last_error_message()))
    t.start()
    t.join()
    assert seen == [""]
    assert "n = 12" in ggemm.last_error_message()


def test_error_object():
    e = ggemm.GgemmError(ggemm.Status.NULL_POINTER, "a is NULL")
    assert e.status is ggemm.Status.NULL_POINTER and e.message == "a is NULL"
    assert str(e) == "GGEMM_STATUS_NULL_POINTER: a is NULL"
    assert isinstance(e, RuntimeError)
    back = pickle.loads(pickle.dumps(e))
    assert (back.status, back.message) == (e.status, e.message)
    unknown = ggemm.GgemmError(77)
    assert unknown.status == 77 and unknown.status_name == "GGEMM_STATUS_<unknown>"
    check(0)  # success raises nothing


def test_status_mirror_before_loading():
    assert _capi.status_string(ggemm.Status.NO_DEVICE) == "GGEMM_STATUS_NO_DEVICE"
