"""The ctypes mirror against the C header, compiled: every struct size and
field offset, every enum value and constant. Skips without a C compiler."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess

import pytest

import ggemm
from ggemm import _capi
from conftest import header_path

# Every argument struct of the header, with its ctypes mirror.
STRUCTS = [
    ("ggemm_grouped_matmul_args", ggemm.GroupedMatmulArgs),
    ("ggemm_lora_shrink_qkv_args", ggemm.LoraShrinkQkvArgs),
    ("ggemm_lora_expand_qkv_args", ggemm.LoraExpandQkvArgs),
    ("ggemm_moe_route_args", ggemm.MoeRouteArgs),
    ("ggemm_moe_combine_args", ggemm.MoeCombineArgs),
    ("ggemm_moe_ffn_args", ggemm.MoeFfnArgs),
    ("ggemm_config", ggemm.Config),
]


def _compiler():
    for cc in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if cc and shutil.which(cc):
            return cc
    return None


@pytest.fixture(scope="module")
def c_values(tmp_path_factory):
    cc = _compiler()
    if cc is None:
        pytest.skip("no C compiler (cc, gcc, clang or $CC) to compile the header with")
    header = header_path()
    if not header.exists():
        pytest.skip(f"{header} not found (set GGEMM_INCLUDE_DIR)")
    lines = []
    for struct, py in STRUCTS:
        lines.append(f'printf("sizeof {struct} %zu\\n", sizeof({struct}));')
        for name, _ in py._fields_:
            lines.append(f'printf("offsetof {struct}.{name} %zu\\n", offsetof({struct}, {name}));')
    for enum_cls, prefix in ((ggemm.Status, "GGEMM_STATUS_"), (ggemm.Dtype, "GGEMM_DTYPE_"), (ggemm.Epilogue, "GGEMM_EPILOGUE_")):
        for member in enum_cls:
            lines.append(f'printf("enum {prefix}{member.name} %d\\n", (int){prefix}{member.name});')
    for member in ggemm.DeviceFault:
        lines.append(f'printf("const GGEMM_DEVICE_FAULT_{member.name} %d\\n", (int)GGEMM_DEVICE_FAULT_{member.name});')
    lines.append('printf("const GGEMM_MAX_GROUPS %d\\n", (int)GGEMM_MAX_GROUPS);')
    lines.append('printf("const GGEMM_VERSION %d\\n", (int)GGEMM_VERSION);')
    lines.append('printf("sizeof enum %zu\\n", sizeof(ggemm_status));')
    src = "#include <stddef.h>\n#include <stdio.h>\n#include <ggemm.h>\nint main(void) {\n  " + "\n  ".join(lines) + "\n  return 0;\n}\n"
    d = tmp_path_factory.mktemp("layout")
    (d / "layout.c").write_text(src)
    build = subprocess.run(
        [cc, "-std=c99", "-Wall", "-Werror", f"-I{header.parent}", str(d / "layout.c"), "-o", str(d / "layout")],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    out = subprocess.run([str(d / "layout")], capture_output=True, text=True, check=True).stdout
    values = {}
    for line in out.splitlines():
        kind, key, value = line.split()
        values[(kind, key)] = int(value)
    return values


@pytest.mark.parametrize("struct, py", STRUCTS)
def test_struct_layout(c_values, struct, py):
    assert ctypes.sizeof(py) == c_values[("sizeof", struct)]
    for name, _ in py._fields_:
        assert getattr(py, name).offset == c_values[("offsetof", f"{struct}.{name}")], name


def test_enums_and_constants(c_values):
    assert c_values[("sizeof", "enum")] == ctypes.sizeof(ctypes.c_int)
    for enum_cls, prefix in ((ggemm.Status, "GGEMM_STATUS_"), (ggemm.Dtype, "GGEMM_DTYPE_"), (ggemm.Epilogue, "GGEMM_EPILOGUE_")):
        for member in enum_cls:
            assert c_values[("enum", prefix + member.name)] == int(member)
    for member in ggemm.DeviceFault:
        assert c_values[("const", f"GGEMM_DEVICE_FAULT_{member.name}")] == int(member)
    assert c_values[("const", "GGEMM_MAX_GROUPS")] == ggemm.MAX_GROUPS
    assert c_values[("const", "GGEMM_VERSION")] == ggemm.HEADER_VERSION


def test_every_struct_and_field_of_the_header_is_mirrored():
    # The fields in the header's order: a field added to the header and not
    # here (or renamed) fails this test even where the offsets still agree.
    header = header_path()
    if not header.exists():
        pytest.skip(f"{header} not found")
    text = re.sub(r"/\*.*?\*/", "", header.read_text(), flags=re.S)
    bodies = dict((name, body) for body, name in re.findall(r"typedef struct \w+ \{(.*?)\} (\w+);", text, re.S))
    assert set(bodies) == {struct for struct, _ in STRUCTS}
    for struct, py in STRUCTS:
        fields = re.findall(r"(\w+)\s*;", bodies[struct])
        assert fields == [name for name, _ in py._fields_], struct


def test_every_status_of_the_header_is_mirrored():
    header = header_path()
    if not header.exists():
        pytest.skip(f"{header} not found")
    in_header = set(re.findall(r"^\s*GGEMM_STATUS_([A-Z_]+)\s*=", header.read_text(), re.M))
    assert in_header == {s.name for s in ggemm.Status}


def test_every_device_fault_and_function_of_the_header_is_mirrored():
    header = header_path()
    if not header.exists():
        pytest.skip(f"{header} not found")
    text = header.read_text()
    faults = set(re.findall(r"#define GGEMM_DEVICE_FAULT_([A-Z_]+)\s", text))
    assert faults == {f.name for f in ggemm.DeviceFault}
    # Every MoE function of the header is declared by the bindings (with its struct).
    moe = set(re.findall(r"GGEMM_API ggemm_status (ggemm_moe_\w+)\(", text))
    assert moe == set(_capi.MOE_FUNCTIONS)
    for name, (struct, _) in _capi.MOE_FUNCTIONS.items():
        c_struct = re.search(rf"{name}\(\s*(?:ggemm_handle_t handle,\s*)?const (\w+) \*", text).group(1)
        assert dict((py, c) for c, py in STRUCTS)[struct] == c_struct, name
