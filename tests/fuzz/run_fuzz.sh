#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang++ (-fsanitize=fuzzer,address,
# undefined) into BUILD_DIR and runs each for a bounded time over a copy of
# the corpus kept in the repo (tests/fuzz/corpus/<name>/). Fails on any
# finding; exits 77 (ctest: skipped) when clang++ or its sanitizer/libFuzzer
# runtimes are missing.
#
#   run_fuzz.sh SOURCE_DIR BUILD_DIR CLANGXX CUDA_INCLUDE_DIRS [SECONDS]
#
# SECONDS (default 60; env GGEMM_FUZZ_SECONDS overrides) is each fuzzer's
# -max_total_time; the fuzzers run side by side when the machine has 2+ cores.
# GGEMM_FUZZ_NO_SUPPRESSIONS=1 ignores tests/fuzz/ubsan_known_findings.supp.
#
# To grow the kept corpus after a longer run (keeps it small):
#   BUILD_DIR/fuzz_<name> -merge=1 tests/fuzz/corpus/<name> BUILD_DIR/corpus-<name>
set -uo pipefail

if (($# < 4)); then
  echo "usage: $0 SOURCE_DIR BUILD_DIR CLANGXX CUDA_INCLUDE_DIRS [SECONDS]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$2
cxx=$3
cuda_inc=$4
seconds=${GGEMM_FUZZ_SECONDS:-${5:-60}}
fuzz=$src/tests/fuzz

skip() {
  echo "SKIP: $*"
  echo "      (Debian/Ubuntu: apt-get install clang libclang-rt-dev; scripts/setup.sh installs them)"
  exit 77
}

if [[ -z "$cxx" || "$cxx" == *NOTFOUND* ]] || ! command -v "$cxx" >/dev/null 2>&1; then
  skip "no clang++ found (CMake looked for clang++, clang++-14..19); the fuzzers need clang's libFuzzer"
fi
if ! "$cxx" --version 2>/dev/null | grep -qi clang; then
  skip "$cxx is not clang; the fuzzers need clang's -fsanitize=fuzzer"
fi

mkdir -p "$build"
build=$(cd "$build" && pwd)

# Same sanitizer set for the harness and the library code under test. Every
# check aborts (-fno-sanitize-recover) except 'enum', which is recoverable so
# that ubsan_known_findings.supp can name single files; halt_on_error=1 still
# stops on any enum report that the file does not suppress.
san=(-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fsanitize-recover=enum)
cflags=(-g -O1 -fno-omit-frame-pointer "${san[@]}")

# 1. Can this clang link a sanitized fuzzer? (libclang-rt-*-dev holds the runtimes.)
probe=$build/probe
cat >"$probe.cpp" <<'EOF'
#include <cstddef>
#include <cstdint>
extern "C" int LLVMFuzzerTestOneInput(const uint8_t *, size_t) { return 0; }
EOF
if ! "$cxx" "${cflags[@]}" "$probe.cpp" -o "$probe" >"$probe.log" 2>&1; then
  sed 's/^/      /' "$probe.log" | head -5
  skip "$cxx cannot link -fsanitize=fuzzer,address,undefined (libFuzzer/ASan/UBSan runtimes missing)"
fi

# LeakSanitizer cannot run where ptrace-like thread suspension is refused
# (some containers); then leaks are not checked, and the log says so.
asan_opts="abort_on_error=0:detect_leaks=1:allocator_may_return_null=0"
if ! ASAN_OPTIONS=$asan_opts "$probe" -runs=2 >"$probe.run.log" 2>&1; then
  if grep -q "LeakSanitizer has encountered a fatal error" "$probe.run.log"; then
    echo "NOTE: LeakSanitizer cannot run here; leaks are not checked"
    asan_opts="abort_on_error=0:detect_leaks=0:allocator_may_return_null=0"
  else
    cat "$probe.run.log"
    echo "FAIL: a trivial fuzzer does not run" >&2
    exit 1
  fi
fi

# 2. Build the harnesses. The library's objects are compiled from source with
#    the sanitizers; the embedded kernels are replaced by an empty fatbin table
#    (nothing launches: fuzz_validate passes a NULL handle).
inc=(-I"$src" -I"$src/api/include" -I"$src/reference")
IFS=';' read -r -a cuda_dirs <<<"$cuda_inc"
for d in "${cuda_dirs[@]}"; do [[ -n "$d" ]] && inc+=(-I"$d"); done
cat >"$build/fatbin_stub.cpp" <<'EOF'
// The kernel fatbins, absent: the fuzzers never create a device.
#include <cstdint>
extern "C" const void *const ggemm_fatbin_table[] = {nullptr};
extern "C" const uint32_t ggemm_fatbin_arch[] = {0};
extern "C" const uint32_t ggemm_fatbin_count = 0;
EOF

build_log=$build/build.log
: >"$build_log"
build_one() {  # name, sources...
  local name=$1
  shift
  "$cxx" -std=c++17 "${cflags[@]}" "${inc[@]}" -pthread "$@" -ldl -o "$build/fuzz_$name" >>"$build_log.$name" 2>&1
}
compile_c() {  # C99 source -> object
  "$cxx" -x c -std=c99 -c "${cflags[@]}" "${inc[@]}" "$1" -o "$2" >>"$build_log.validate" 2>&1
}
t0=$(date +%s)
rm -f "$build_log".*
(compile_c "$fuzz/c_caller.c" "$build/c_caller.o" &&
  build_one validate "$fuzz/fuzz_validate.cpp" "$build/c_caller.o" "$src"/api/src/*.cpp "$src"/runtime/*.cpp \
    "$build/fatbin_stub.cpp") &
pid_v=$!
build_one reference "$fuzz/fuzz_reference.cpp" "$src"/reference/*.cpp &
pid_r=$!
ok=1
wait $pid_v || ok=0
wait $pid_r || ok=0
cat "$build_log".* >"$build_log" 2>/dev/null
if ((!ok)); then
  cat "$build_log"
  echo "FAIL: building the fuzzers" >&2
  exit 1
fi
echo "== built fuzz_validate and fuzz_reference with $("$cxx" --version | head -1) in $(($(date +%s) - t0)) s"

# 3. Run each over a fresh copy of its corpus.
ubsan_opts="halt_on_error=1:print_stacktrace=1:report_error_type=1"
supp=$fuzz/ubsan_known_findings.supp
if [[ "${GGEMM_FUZZ_NO_SUPPRESSIONS:-0}" != 1 && -f "$supp" ]] && grep -qv '^\s*\(#\|$\)' "$supp"; then
  ubsan_opts+=":suppressions=$supp"
  echo "NOTE: known findings suppressed (tests/fuzz/ubsan_known_findings.supp):"
  grep -v '^\s*\(#\|$\)' "$supp" | sed 's/^/        /'
fi

parallel=1
(($(nproc 2>/dev/null || echo 1) >= 2)) && parallel=2

run_one() {  # name
  local name=$1 corpus=$build/corpus-$1 art=$build/artifacts-$1
  rm -rf "$corpus" "$art"
  mkdir -p "$corpus" "$art"
  cp "$fuzz/corpus/$name"/* "$corpus"/ 2>/dev/null || true
  # libFuzzer's own exit codes default to 77 (error) and 70 (timeout): both
  # are mapped to 1 so a finding can never read as ctest's 'skipped'.
  ASAN_OPTIONS=$asan_opts UBSAN_OPTIONS=$ubsan_opts \
    timeout $((seconds + 300)) "$build/fuzz_$name" "$corpus" \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=1024 \
    -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
    -artifact_prefix="$art/" >"$build/fuzz_$name.log" 2>&1
}

declare -A rc
echo "== fuzzing ${seconds} s each: validate (public C ABI, NULL handle), reference (CPU reference)"
if ((parallel == 2)); then
  run_one validate &
  pv=$!
  run_one reference &
  pr=$!
  wait $pv
  rc[validate]=$?
  wait $pr
  rc[reference]=$?
else
  run_one validate
  rc[validate]=$?
  run_one reference
  rc[reference]=$?
fi

status=0
for name in validate reference; do
  log=$build/fuzz_$name.log
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || true)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  start=$(ls "$fuzz/corpus/$name" 2>/dev/null | wc -l)
  now=$(ls "$build/corpus-$name" 2>/dev/null | wc -l)
  if [[ ${rc[$name]} -eq 0 ]]; then
    echo "   fuzz_$name: ok, ${runs:-?} inputs, ${cov:-cov: ?} edges, corpus $start -> $now (log: $log)"
  else
    status=1
    echo "FAIL fuzz_$name: exit ${rc[$name]}. What it reports:"
    grep -A5 -E '^\*\*\* fuzz_|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:' "$log" |
      head -40 | sed 's/^/    /'
    echo "  the last lines of $log:"
    grep -v '^#[0-9]' "$log" | tail -25 | sed 's/^/    /'
    for f in "$build/artifacts-$name"/*; do
      [[ -e "$f" ]] || continue
      echo "    input: $f  (re-run: $build/fuzz_$name $f)"
      echo "    base64: $(base64 -w0 "$f")"
    done
  fi
done
exit $status
