#!/usr/bin/env bash
# The installed package, as a user meets it: `cmake --install` of this build
# into a temporary prefix, which is then moved (the package must be
# relocatable); examples/cpp is built with find_package(ggemm) and examples/c
# with pkg-config against the moved copy, and both are run. Without a GPU they
# print why and exit 0; with one they check their results.
#
#   check_install.sh BUILD_DIR SOURCE_DIR CMAKE GENERATOR MAKE_PROGRAM CC CXX \
#                    CUDA_INCLUDE_DIR CUDA_LIBRARY_DIR VERSION
set -euo pipefail
build=$1 src=$2 cmake=$3 generator=$4 make_program=$5 cc=$6 cxx=$7 cuda_inc=$8 cuda_lib=$9 version=${10}
nvcc=${11}
major=${version%%.*}
# The toolkit's root is where nvcc's bin/ is: the include and library
# directories can sit deeper (targets/x86_64-linux/ on some images).
cuda_root=$(dirname "$(dirname "$nvcc")")

fail() { echo "FAIL: $*" >&2; exit 1; }
command -v pkg-config >/dev/null || fail "pkg-config not found (scripts/setup.sh installs it)"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ggemm-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "== cmake --install $build --prefix $tmp/prefix"
"$cmake" --install "$build" --prefix "$tmp/prefix"

# Exactly the library with its SONAME links, the header, and the package files.
cd "$tmp/prefix"
unexpected=$(find . \( -type f -o -type l \) | sed 's|^\./||' | grep -Ev \
  -e '^include/ggemm\.h$' \
  -e "^lib(64)?(/[^/]+)?/libggemm\.so(\.$major(\.[0-9]+\.[0-9]+)?)?$" \
  -e '^lib(64)?(/[^/]+)?/cmake/ggemm/ggemm(Config|ConfigVersion|Targets|Targets-[a-z]+)\.cmake$' \
  -e '^lib(64)?(/[^/]+)?/pkgconfig/ggemm\.pc$' || true)
[[ -z "$unexpected" ]] || fail "installed files that are not the package's: $unexpected"
real=$(find . -type f -name "libggemm.so.$version")
[[ -n "$real" ]] || fail "lib*/libggemm.so.$version is missing"
libdir=$(dirname "$real")
[[ "$(readlink "$libdir/libggemm.so")" == "libggemm.so.$major" ]] || fail "libggemm.so does not link to libggemm.so.$major"
[[ "$(readlink "$libdir/libggemm.so.$major")" == "libggemm.so.$version" ]] || fail "libggemm.so.$major does not link to libggemm.so.$version"
soname=$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == "libggemm.so.$major" ]] || fail "SONAME is '$soname', expected libggemm.so.$major"
grep -rqs -- "$tmp/prefix" lib* include && fail "an installed file names the install prefix: it would not relocate"
echo "installed: $(find . \( -type f -o -type l \) | sed 's|^\./||' | sort | tr '\n' ' ')"
echo "SONAME: $soname"

# Move the tree: everything must be found from where it now is.
mv "$tmp/prefix" "$tmp/moved"
prefix=$tmp/moved
libdir=$prefix/${libdir#./}

echo "== examples/cpp: find_package(ggemm) from the moved prefix"
"$cmake" -S "$src/examples/cpp" -B "$tmp/cpp-build" -G "$generator" -DCMAKE_MAKE_PROGRAM="$make_program" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCUDAToolkit_ROOT="$cuda_root" -DCMAKE_CXX_FLAGS="-Wall -Wextra -Werror"
found=$(sed -n 's/^ggemm_DIR:PATH=//p' "$tmp/cpp-build/CMakeCache.txt")
[[ "$found" == "$libdir/cmake/ggemm" ]] || fail "find_package found ggemm in '$found', not in the moved prefix"
"$cmake" --build "$tmp/cpp-build"
# (ldd's output in a variable first: `ldd | grep -q` can fail under pipefail when grep exits early.)
loaded=$(ldd "$tmp/cpp-build/moe_grouped_cpp")
grep -q "libggemm.so.$major => $libdir/" <<<"$loaded" \
  || fail "moe_grouped_cpp does not load libggemm from the moved prefix: $(grep ggemm <<<"$loaded")"

echo "== examples/c: pkg-config from the moved prefix"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
[[ "$(pkg-config --modversion ggemm)" == "$version" ]] || fail "pkg-config --modversion ggemm is not $version"
pc_libdir=$(cd "$(pkg-config --variable=libdir ggemm)" && pwd -P)
[[ "$pc_libdir" == "$(cd "$libdir" && pwd -P)" ]] || fail "pkg-config libdir is $pc_libdir, not the moved prefix's"
echo "pkg-config: $(pkg-config --cflags --libs ggemm)"
# CUDA's headers are not -pedantic C99 clean: -isystem keeps their warnings out of ours.
"$cc" -std=c99 -Wall -Wextra -pedantic -Werror "$src/examples/c/moe_grouped.c" -o "$tmp/moe_grouped_c" \
  $(pkg-config --cflags ggemm) -isystem "$cuda_inc" $(pkg-config --libs ggemm) -L"$cuda_lib" -lcudart -lm \
  -Wl,-rpath,"$(pkg-config --variable=libdir ggemm)" -Wl,-rpath,"$cuda_lib"

status=0
for exe in "$tmp/cpp-build/moe_grouped_cpp" "$tmp/moe_grouped_c"; do
  echo "== running $(basename "$exe")"
  if out=$("$exe" 2>&1); then rc=0; else rc=$?; fi
  echo "$out"
  if [[ $rc -ne 0 ]]; then echo "FAIL: $(basename "$exe") exited $rc"; status=1; continue; fi
  grep -Eq '^(OK|SKIPPED): ' <<<"$out" || { echo "FAIL: $(basename "$exe") printed neither OK nor SKIPPED"; status=1; }
done
[[ $status -eq 0 ]] && echo PASS
exit $status
