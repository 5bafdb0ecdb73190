#!/usr/bin/env bash
# Builds the libFuzzer targets of src/fuzz (clang, ASan + UBSan) and runs each
# one for a bounded time, starting from a copy of its checked-in seed corpus
# (src/fuzz/corpus/<target>). Prints one line per target and exits non-zero
# if any target crashed (a crash, sanitizer report, leak, timeout or broken
# invariant); the crashing input is kept in the build directory and the
# command that reproduces it is printed. See doc/fuzzing.md.
#
#   scripts/fuzz.sh [--seconds N] [--build-dir DIR] [target ...]
#     --seconds N      fuzzing time per target (default 20)
#     --build-dir DIR  build directory (default build-fuzz, relative to the repo)
#     target ...       only these targets (default: all)
#   RAFTKV_WERROR=ON   warnings as errors (scripts/test.sh sets it; default OFF)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ALL_TARGETS=(fuzz_log_recovery fuzz_hard_state fuzz_state_machine fuzz_kv_requests fuzz_raft_step
             fuzz_etcd_import)

seconds=20
build_dir=build-fuzz
targets=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    --build-dir) build_dir=$2; shift 2 ;;
    --build-dir=*) build_dir=${1#*=}; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL_TARGETS[@]}")
if ! [[ $seconds =~ ^[0-9]+$ ]] || [[ $seconds -lt 1 ]]; then
  echo "fuzz.sh: --seconds needs a positive integer" >&2
  exit 2
fi
[[ $build_dir = /* ]] || build_dir=$REPO_ROOT/$build_dir

for tool in clang clang++ cmake ninja; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "fuzz.sh: $tool not found; run scripts/install-deps.sh" >&2
    exit 1
  fi
done

echo "fuzz.sh: building the fuzz targets in $build_dir"
CC=clang CXX=clang++ cmake -S "$REPO_ROOT" -B "$build_dir" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRAFTKV_FUZZ=ON -DRAFTKV_BUILD_TESTS=OFF \
  -DRAFTKV_WITH_ROCKSDB=OFF \
  -DRAFTKV_WERROR="${RAFTKV_WERROR:-OFF}" >/dev/null
ninja -C "$build_dir" -j"${RAFTKV_FUZZ_JOBS:-2}" "${targets[@]}"

failed=0
for t in "${targets[@]}"; do
  bin=$build_dir/src/fuzz/$t
  work=$build_dir/fuzz-run/$t
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$REPO_ROOT/src/fuzz/corpus/$t/"* "$work/corpus/"
  rc=0
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$work/artifacts/" "$work/corpus" >"$work/log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
  artifacts=("$work"/artifacts/*)
  [[ -e ${artifacts[0]} ]] || artifacts=()
  if [[ $rc -eq 0 && ${#artifacts[@]} -eq 0 ]]; then
    echo "fuzz $t: runs=${runs:-?} crashes=0 ok"
  else
    failed=1
    echo "fuzz $t: runs=${runs:-?} crashes=${#artifacts[@]} FAILED (exit $rc; log: $work/log)"
    grep -m 3 -E 'ERROR|FUZZ_ASSERT|Check failed|runtime error' "$work/log" | sed 's/^/  /' || true
    for a in "${artifacts[@]}"; do
      echo "  reproduce: $bin $a"
    done
  fi
done
exit "$failed"
