#!/usr/bin/env bash
# Configures and builds raftkv into ./build (the README's default build
# directory). Extra arguments are passed to `cmake --build` (e.g. --target X).
#   RAFTKV_BUILD_DIR   build directory (default <repo>/build)
#   RAFTKV_BUILD_TYPE  CMAKE_BUILD_TYPE (default RelWithDebInfo)
#   RAFTKV_WERROR      ON/OFF: warnings as errors (unset: keep the cache's
#                      setting, OFF for a new build; scripts/test.sh sets ON)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${RAFTKV_BUILD_DIR:-$REPO_ROOT/build}
GENERATOR=()
command -v ninja >/dev/null 2>&1 && GENERATOR=(-G Ninja)
OPTIONS=()
[ -n "${RAFTKV_WERROR:-}" ] && OPTIONS+=(-DRAFTKV_WERROR="$RAFTKV_WERROR")
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S "$REPO_ROOT" -B "$BUILD_DIR" "${GENERATOR[@]}" \
    -DCMAKE_BUILD_TYPE="${RAFTKV_BUILD_TYPE:-RelWithDebInfo}" "${OPTIONS[@]}"
elif [ ${#OPTIONS[@]} -gt 0 ]; then
  cmake -S "$REPO_ROOT" -B "$BUILD_DIR" "${OPTIONS[@]}" >/dev/null
fi
JOBS=$( (nproc || sysctl -n hw.ncpu || echo 2) 2>/dev/null | head -1)
cmake --build "$BUILD_DIR" -j "$JOBS" "$@"
