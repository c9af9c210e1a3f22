"""Finding and loading libggemm.so; the bindings' constants against the library."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import ggemm
from ggemm import _capi
from conftest import header_path

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(ggemm.__file__)))


def run_python(code: str, env_update: dict, cwd: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GGEMM_LIBRARY"}
    env.update(env_update)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], env=env, cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_import_needs_no_library(tmp_path):
    # `import ggemm` never loads the library; the first call that needs it says what is wrong.
    r = run_python(
        """
        import ggemm
        try:
            ggemm.version()
        except ggemm.LibraryNotFoundError as e:
            print("ERR", e)
        """,
        {"GGEMM_LIBRARY": str(tmp_path / "nowhere" / "libggemm.so"), "PYTHONPATH": PYTHON_DIR},
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ERR GGEMM_LIBRARY="), r.stdout
    assert "nowhere" in r.stdout


def test_candidates_env_wins_and_is_exclusive(tmp_path):
    lib = tmp_path / "libggemm.so"
    lib.write_bytes(b"")
    assert _capi.library_candidates(env=str(lib), package_dir=str(tmp_path)) == [("GGEMM_LIBRARY", str(lib))]
    # A directory means the libggemm.so inside it.
    assert _capi.library_candidates(env=str(tmp_path), package_dir="/nonexistent") == [
        ("GGEMM_LIBRARY", str(tmp_path / "libggemm.so"))
    ]


def test_candidates_package_dir_then_system(tmp_path):
    (tmp_path / "libggemm.so.0").write_bytes(b"")
    found = _capi.library_candidates(env="", package_dir=str(tmp_path))
    assert found[0] == ("package", str(tmp_path / "libggemm.so.0"))
    assert [origin for origin, _ in found[1:]] == ["system"] * (len(found) - 1)
    assert ("system", "libggemm.so.0") in found and ("system", "libggemm.so") in found
    # With no file in the package, the system loader comes first.
    assert _capi.library_candidates(env="", package_dir=str(tmp_path / "empty"))[0] == ("system", "libggemm.so.0")


def test_not_libggemm_is_refused(tmp_path):
    libc = "libc.so.6"
    with pytest.raises(ggemm.LibraryNotFoundError, match="is not libggemm"):
        _capi.open_library(libc)


def test_loaded_library_version_matches_header(lib):
    assert ggemm.version() == ggemm.HEADER_VERSION
    text = header_path().read_text() if header_path().exists() else ""
    if text:
        parts = [int(re.search(rf"#define GGEMM_VERSION_{p} (\d+)", text).group(1)) for p in ("MAJOR", "MINOR", "PATCH")]
        assert ggemm.HEADER_VERSION == parts[0] * 10000 + parts[1] * 100 + parts[2]
    assert os.path.basename(ggemm.library_path()).startswith("libggemm.so")


def test_status_names_match_library(lib):
    for s in ggemm.Status:
        assert ggemm.status_string(s) == "GGEMM_STATUS_" + s.name
    assert ggemm.status_string(999) == "GGEMM_STATUS_<unknown>"


def test_library_in_package_dir_is_found(lib, tmp_path):
    # A copy of the package with the library in ggemm/_lib/, and no GGEMM_LIBRARY.
    if not os.path.isfile(ggemm.library_path()):
        pytest.skip(f"the library was loaded by soname ({ggemm.library_path()}), not from a file to copy")
    pkg = tmp_path / "site" / "ggemm"
    shutil.copytree(os.path.dirname(ggemm.__file__), pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    shutil.copy2(os.path.realpath(ggemm.library_path()), pkg / "_lib" / "libggemm.so.0")
    r = run_python(
        """
        import ggemm
        print(ggemm.version(), ggemm.library_path())
        """,
        {"PYTHONPATH": str(tmp_path / "site")},
        str(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    version, path = r.stdout.split()
    assert int(version) == ggemm.HEADER_VERSION
    assert path == str(pkg / "_lib" / "libggemm.so.0")
