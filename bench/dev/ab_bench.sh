#!/usr/bin/env bash
# Same-run A/B of changes on the H200: builds the tree as it is (A) and one
# copy per patch (B, C, ...), then runs the benchmarks matching a filter
# alternately A, B, C, A, B, C (clock and power drift hit all alike), and
# prints each benchmark's medians side by side. One device call; the builds
# compile in parallel on the device's cores.
#
#   git diff > /tmp/b.patch; git stash        # B = the change, A = without it
#   bench/dev/run.sh ab /tmp/b.patch 'lora_.*ggemm_graph' [rounds]
#   bench/dev/run.sh ab /tmp/b.patch,/tmp/c.patch 'lora_' 3   # B and C against A
#   bench/dev/run.sh ab /path/to/other/source/tree '/ggemm/'   # B = another source tree as it is
#
# Env: OUT (logs; default ./h200_out).
# --dry-run: apply the patches and configure every tree, build and run
# nothing (for checking patches on a machine without a GPU).
# --tests: afterwards also build and run build/tests/ggemm_tests (every GPU
# and ABI test) in each patched tree, so a winner can land from this call.
set -euo pipefail
lib=$(cd "$(dirname "$0")" && pwd)/lib
cd "$(dirname "$0")/../.."
dry=0 tests=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    --tests) tests=1; shift ;;
    *) break ;;
  esac
done
patches=${1:?usage: bench/dev/run.sh ab [--dry-run] [--tests] PATCH[,PATCH...] FILTER [ROUNDS]}
filter=${2:?usage: bench/dev/run.sh ab [--dry-run] [--tests] PATCH[,PATCH...] FILTER [ROUNDS]}
rounds=${3:-2}
out=${OUT:-$PWD/h200_out}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH

labels=(A)
builds=("$(mktemp -d /tmp/ggemm_ab_A.XXXXXX)")
sources=("$PWD")
letters=(B C D E F)
IFS=',' read -r -a patch_list <<< "$patches"
[ ${#patch_list[@]} -le ${#letters[@]} ] || { echo "at most ${#letters[@]} patches"; exit 1; }
for i in "${!patch_list[@]}"; do
  label=${letters[$i]}
  if [ -d "${patch_list[$i]}" ]; then  # a source tree: built as it is, in a folder of its own
    tree=$(realpath "${patch_list[$i]}")
    labels+=("$label"); sources+=("$tree"); builds+=("$(mktemp -d /tmp/ggemm_ab_$label.XXXXXX)")
    echo "$label: the source tree $tree"
    continue
  fi
  tree=$(mktemp -d /tmp/ggemm_ab_$label.XXXXXX)
  # The tracked and untracked source files, without build outputs (nor
  # tracked files this tree has deleted or renamed).
  git ls-files -co --exclude-standard -z |
    xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh | xargs -0 cp --parents -t "$tree"
  (cd "$tree" && patch -p1 --quiet < "$(realpath "${patch_list[$i]}")") || { echo "$label: patch does not apply"; exit 1; }
  labels+=("$label"); sources+=("$tree"); builds+=("$tree/build")
  echo "$label: ${patch_list[$i]} applied in $tree"
done
echo "A: this tree, built in ${builds[0]}"

# A copy of Abseil's headers and archives beside this tree (.absl/, for a
# machine without libabsl-dev) serves every tree that needs one.
absl=()
[ -d "$PWD/.absl" ] && absl=(-DGGEMM_ABSL_PREFIX="$PWD/.absl")
for i in "${!labels[@]}"; do
  cmake -S "${sources[$i]}" -B "${builds[$i]}" -G Ninja -DCMAKE_BUILD_TYPE=Release "${absl[@]}" \
    > "$out/ab_configure_${labels[$i]}.log" 2>&1
done
[ $dry -eq 1 ] && { echo "dry run: every tree configured"; exit 0; }

pids=()
for i in "${!labels[@]}"; do
  cmake --build "${builds[$i]}" --target ggemm_bench > "$out/ab_build_${labels[$i]}.log" 2>&1 &
  pids+=($!)
done
for i in "${!labels[@]}"; do
  wait "${pids[$i]}" || { echo "${labels[$i]}: build failed"; tail -20 "$out/ab_build_${labels[$i]}.log"; exit 1; }
done

run() {  # $1 = label, $2 = binary
  local log="$out/ab_run_$1.txt"
  "$2" --benchmark_filter="$filter" --benchmark_min_time=0.1s > "$log" 2>&1 ||
    echo "$1: the benchmark binary exited with $? (see $log)" >&2
  awk -v l="$1" -f "$lib/median_rows.awk" "$log"
}
for r in $(seq "$rounds"); do
  for i in "${!labels[@]}"; do run "${labels[$i]}" "${builds[$i]}/bench/ggemm_bench"; done
done > "$out/ab_medians.txt"

# One line per benchmark: the medians of each variant in turn.
awk -f "$lib/median_table.awk" "$out/ab_medians.txt"

if [ $tests -eq 1 ]; then
  for i in "${!labels[@]}"; do
    [ "$i" -eq 0 ] && continue  # A is the tree as it is
    log="$out/ab_tests_${labels[$i]}.txt"
    if cmake --build "${builds[$i]}" --target ggemm_tests > "$log" 2>&1 &&
       timeout 300 "${builds[$i]}/tests/ggemm_tests" --gtest_brief=1 >> "$log" 2>&1; then
      echo "${labels[$i]}: ggemm_tests $(grep -E '^\[  PASSED' "$log")"
    else
      echo "${labels[$i]}: ggemm_tests FAILED (see $log)"; grep -E '^\[  FAILED' "$log" | head -5  || true
    fi
  done
fi
