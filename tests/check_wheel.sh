#!/usr/bin/env bash
# The wheel as a user meets it: scripts/build_wheel.py packs the package with
# libggemm.so inside; a fresh virtual environment installs it offline (no
# build tools, no CUDA), and `import ggemm` outside the source tree finds its
# own library without GGEMM_LIBRARY. The tag must be a platform tag.
#   check_wheel.sh PYTHON SOURCE_DIR LIBGGEMM
set -euo pipefail
py=$1 src=$2 lib=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ggemm-wheel.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

wheel=$("$py" "$src/scripts/build_wheel.py" --library "$lib" --out "$tmp/dist")
echo "built $(basename "$wheel")"
[[ $(basename "$wheel") =~ ^ggemm-[0-9.]+-py3-none-manylinux_2_[0-9]+_x86_64\.whl$ ]] ||
  fail "$(basename "$wheel") is not tagged py3-none-manylinux_2_N_x86_64"

if ! "$py" -m venv "$tmp/venv" > "$tmp/venv.log" 2>&1; then
  cat "$tmp/venv.log"; fail "$py -m venv failed (Debian: apt-get install python3-venv)"
fi
PIP_ROOT_USER_ACTION=ignore "$tmp/venv/bin/python" -m pip install --disable-pip-version-check --no-index --no-deps \
  -q "$wheel" || fail "pip refused the wheel"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
[[ -f "$site/ggemm/_lib/libggemm.so" ]] || fail "the library is not at $site/ggemm/_lib/libggemm.so"

cd "$tmp"  # nothing of the source tree on the path
env -u GGEMM_LIBRARY -u PYTHONPATH -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 "$tmp/venv/bin/python" - "$site" <<'PY'
import sys
import ggemm
site = sys.argv[1]
assert ggemm.__file__.startswith(site), ggemm.__file__
path = ggemm.library_path()
assert path.startswith(site + "/ggemm/_lib/"), f"loaded {path}, not the wheel's own library"
v = ggemm.version()
assert v == ggemm.HEADER_VERSION, (v, ggemm.HEADER_VERSION)
print(f"import ggemm {ggemm.__version__}: library {path}, version {v}")
PY
echo PASS
