# The variants of a same-run A/B (sourced by ab_bench.sh and ab_layer.sh):
# A is the tree as it is; B, C, ... are one per comma-separated PATCH, each
# either a patch applied to a copy of this tree or another source tree built
# as it is. Fills the arrays labels, sources (source trees) and builds (their
# build folders); expects to run at this tree's root.
labels=(A)
sources=("$PWD")
builds=("$(mktemp -d /tmp/ggemm_ab_A.XXXXXX)")

ab_prepare_trees() {  # $1 = PATCH[,PATCH...]
  local letters=(B C D E F) patch_list tree label i
  IFS=',' read -r -a patch_list <<< "$1"
  [ ${#patch_list[@]} -le ${#letters[@]} ] || { echo "at most ${#letters[@]} patches"; return 1; }
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
    # (The patch's path is resolved here: a relative one names a file of this tree.)
    local patch_file
    patch_file=$(realpath "${patch_list[$i]}") || return 1
    (cd "$tree" && patch -p1 --quiet < "$patch_file") || { echo "$label: patch does not apply"; return 1; }
    labels+=("$label"); sources+=("$tree"); builds+=("$tree/build")
    echo "$label: ${patch_list[$i]} applied in $tree"
  done
  echo "A: this tree, built in ${builds[0]}"
}

# Configures every tree (extra cmake arguments after the log folder). A copy
# of Abseil's headers and archives beside this tree (.absl/, for a machine
# without libabsl-dev) serves every tree that needs one.
ab_configure_trees() {  # $1 = log folder, then cmake arguments
  local out=$1 absl=() i
  shift
  [ -d "$PWD/.absl" ] && absl=(-DGGEMM_ABSL_PREFIX="$PWD/.absl")
  for i in "${!labels[@]}"; do
    cmake -S "${sources[$i]}" -B "${builds[$i]}" -G Ninja -DCMAKE_BUILD_TYPE=Release "${absl[@]}" "$@" \
      > "$out/ab_configure_${labels[$i]}.log" 2>&1 || { echo "${labels[$i]}: configure failed"; return 1; }
  done
}

# Builds one target in every tree at once (the device's cores).
ab_build_trees() {  # $1 = log folder, $2 = target
  local out=$1 target=$2 pids=() i
  for i in "${!labels[@]}"; do
    cmake --build "${builds[$i]}" --target "$target" > "$out/ab_build_${labels[$i]}.log" 2>&1 &
    pids+=($!)
  done
  for i in "${!labels[@]}"; do
    wait "${pids[$i]}" || { echo "${labels[$i]}: build failed"; tail -20 "$out/ab_build_${labels[$i]}.log"; return 1; }
  done
}
