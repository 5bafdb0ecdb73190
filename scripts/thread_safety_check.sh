#!/usr/bin/env bash
# Clang's thread-safety analysis over the server (all of src/ but the tests):
# every member marked GUARDED_BY(mu) is touched only with mu held, every
# function marked REQUIRES(mu) is called with it held (src/common/mutex.h).
# Builds everything but the tests with clang at -O0 into ./build-tsa (or $1);
# exits non-zero on any warning of the analysis.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${1:-$REPO_ROOT/build-tsa}
CC=clang CXX=clang++ cmake -S "$REPO_ROOT" -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O0 \
  -DRAFTKV_THREAD_SAFETY=ON -DRAFTKV_BUILD_TESTS=OFF -DRAFTKV_TCMALLOC=OFF >/dev/null
LOG="$BUILD_DIR/thread_safety.log"
status=0
cmake --build "$BUILD_DIR" -j"${RAFTKV_JOBS:-2}" >"$LOG" 2>&1 ||
  status=$?
# Clang ends each finding with its flag: [-Werror,-Wthread-safety-analysis].
warnings=$(grep -cE -- '\[(-Werror,)?-Wthread-safety' "$LOG" || true)
if [[ $status != 0 || $warnings != 0 ]]; then
  grep -B2 -A6 -- 'error\|warning' "$LOG" | head -200 >&2 || tail -50 "$LOG" >&2
  echo "thread safety: FAILED ($warnings findings of the analysis; build log: $LOG)"
  exit 1
fi
echo "thread safety: clean (clang -Wthread-safety over the libraries, raftkv-server and raftkvctl)"
