#!/usr/bin/env bash
# python/tests with pytest, against the library of this build:
#   run_python_tests.sh PYTHON SOURCE_DIR LIBGGEMM
# pytest comes from the interpreter, or from .tools/py where scripts/setup.sh
# installs it. GPU tests skip, with the reason, without PyTorch or a GPU.
set -euo pipefail
py=$1 src=$2 lib=$3
if ! "$py" -c 'import pytest' >/dev/null 2>&1; then
  if [[ -d "$src/.tools/py/pytest" ]]; then
    export PYTHONPATH="$src/.tools/py${PYTHONPATH:+:$PYTHONPATH}"
  else
    echo "FAIL: pytest is not installed for $py; scripts/setup.sh installs it into .tools/py" >&2
    exit 1
  fi
fi
export GGEMM_LIBRARY=$lib
export GGEMM_INCLUDE_DIR=$src/api/include
export PYTHONDONTWRITEBYTECODE=1
cd "$src"
exec "$py" -m pytest -q -rs python/tests
