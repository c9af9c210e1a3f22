#!/usr/bin/env bash
# The Python package as pip installs it: `pip install --no-deps --target` of a
# copy of python/ (so that the build leaves nothing in the source tree), then
# `import ggemm` from there, outside the source tree: without the library,
# with GGEMM_LIBRARY, and with the library shipped inside the package.
#   check_python_install.sh PYTHON SOURCE_DIR LIBGGEMM
set -euo pipefail
py=$1 src=$2 lib=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ggemm-pip.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cp -r "$src/python" "$tmp/src"
find "$tmp/src" \( -name __pycache__ -o -name '*.egg-info' -o -name build \) -prune -exec rm -rf {} +
rm -f "$tmp/src/ggemm/_lib/"*.so*

# pip builds in an isolated environment with setuptools from PyPI, unless this
# Python already has setuptools >= 61 and wheel: then it builds offline.
opts=()
if "$py" -c 'import sys, setuptools, wheel; sys.exit(int(setuptools.__version__.split(".")[0]) < 61)' 2>/dev/null; then
  opts=(--no-build-isolation --no-index)
fi
echo "== pip install --no-deps --target $tmp/site ${opts[*]} python/"
PIP_ROOT_USER_ACTION=ignore "$py" -m pip install --disable-pip-version-check --no-deps --target "$tmp/site" \
  "${opts[@]}" "$tmp/src"
installed=$(cd "$tmp/site" && ls | sort | tr '\n' ' ')
echo "installed: $installed"
[[ -f "$tmp/site/ggemm/__init__.py" && -f "$tmp/site/ggemm/_capi.py" ]] || fail "the ggemm package is not in $tmp/site"
[[ ! -e "$tmp/site/tests" ]] || fail "the tests were installed as a package"

cd "$tmp"  # nothing of the source tree on the path
run() { env -u GGEMM_LIBRARY PYTHONPATH="$tmp/site" PYTHONDONTWRITEBYTECODE=1 "$@"; }

echo "== import ggemm (no library needed to import)"
run "$py" - "$tmp/site" <<'PY'
import sys, ggemm
assert ggemm.__file__.startswith(sys.argv[1]), ggemm.__file__
print("ggemm", ggemm.__version__, "from", ggemm.__file__)
PY

echo "== with GGEMM_LIBRARY"
run env GGEMM_LIBRARY="$lib" "$py" - <<'PY'
import ggemm
assert ggemm.version() == ggemm.HEADER_VERSION, (ggemm.version(), ggemm.HEADER_VERSION)
print("libggemm", ggemm.version(), "from", ggemm.library_path())
try:
    with ggemm.Handle(0):
        print("handle on GPU 0: created")
except ggemm.GgemmError as e:
    print("no usable GPU:", e)
PY

echo "== with the library inside the package (ggemm/_lib/)"
cp "$(readlink -f "$lib")" "$tmp/site/ggemm/_lib/libggemm.so"
run "$py" - "$tmp/site" <<'PY'
import sys, ggemm
assert ggemm.library_path().startswith(sys.argv[1]), ggemm.library_path()
print("libggemm", ggemm.version(), "from", ggemm.library_path())
PY
echo PASS
