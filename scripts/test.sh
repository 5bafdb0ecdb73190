#!/usr/bin/env bash
# The test command: installs the dependencies, builds everything and runs the
# whole suite through ctest (unit tests per module, simulated-network
# consensus tests, real-process integration and fault tests including the
# crash-durability loops, a ~2-minute linearizability-checked chaos run, the
# cluster.sh acceptance test), then the libFuzzer targets for a bounded time
# (clang build in ./build-fuzz). Exits non-zero on any failure.
# Both builds (GCC and the clang fuzz build) treat warnings as errors.
#   RAFTKV_FUZZ_SECONDS  fuzzing time per target (default 20; 0 skips fuzzing)
#   RAFTKV_WERROR        warnings as errors (default ON here; OFF to relax)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export RAFTKV_WERROR=${RAFTKV_WERROR:-ON}
"$REPO_ROOT/scripts/install-deps.sh"
"$REPO_ROOT/scripts/build.sh"
BUILD_DIR=${RAFTKV_BUILD_DIR:-$REPO_ROOT/build}
# Real-process tests are timing-sensitive on a 2-core machine: run serially.
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 600 "$@")
"$REPO_ROOT/scripts/thread_safety_check.sh"
FUZZ_SECONDS=${RAFTKV_FUZZ_SECONDS:-20}
if [[ "$FUZZ_SECONDS" != 0 ]]; then
  "$REPO_ROOT/scripts/fuzz.sh" --seconds "$FUZZ_SECONDS"
fi
