#!/usr/bin/env bash
# The test command: installs the dependencies, builds everything and runs the
# whole suite (unit tests per module, simulated-network consensus tests,
# real-process integration and fault tests, and the cluster.sh acceptance
# test) through ctest. Exits non-zero on any failure.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$REPO_ROOT/scripts/install-deps.sh"
"$REPO_ROOT/scripts/build.sh"
BUILD_DIR=${RAFTKV_BUILD_DIR:-$REPO_ROOT/build}
cd "$BUILD_DIR"
# Real-process tests are timing-sensitive on a 2-core machine: run serially.
ctest --output-on-failure --timeout 600 "$@"
