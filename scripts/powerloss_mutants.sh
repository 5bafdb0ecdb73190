#!/usr/bin/env bash
# Proof that the power-loss tests can fail: for each kind of sync the server
# makes, runs the PowerLoss* tests (storage_tests, then node_tests) with
# that kind dropped -- FaultFs lets such syncs return OK but makes nothing
# durable, as deleting the call from the code would -- and expects at least
# one test to fail. Prints one line per kind; exits 1 if any kind goes
# unnoticed. The kinds are FaultFs::SyncKinds() (src/gtest/common/fault_fs.h).
#
#   scripts/powerloss_mutants.sh [BUILD_DIR]     (default: ./build, or $RAFTKV_BIN_DIR)
set -uo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${1:-${RAFTKV_BIN_DIR:-$REPO_ROOT/build}}
KINDS=(log-data log-dir hardstate-file data-dir snapshot-file snapshot-dir parent-dir)

for bin in storage_tests node_tests; do
  if [[ ! -x $BUILD_DIR/$bin ]]; then
    echo "powerloss_mutants: $BUILD_DIR/$bin not found (build first: scripts/build.sh)" >&2
    exit 2
  fi
done
# RocksDB's syncs, in a build with the RocksDB engine (PowerLossRocksDb).
if "$BUILD_DIR/storage_tests" --gtest_list_tests --gtest_filter='PowerLossRocksDb.*' |
  grep -q FlushAtEveryStep; then
  KINDS+=(rocksdb-sst rocksdb-manifest rocksdb-dir)
fi

# Prints the first failing PowerLoss test of one run ("" if all passed).
first_failure() {
  local log=$1
  grep -m1 -E '^\[  FAILED  \] PowerLoss[A-Za-z]*\.[A-Za-z]+' "$log" | sed -E 's/^\[  FAILED  \] ([^ ]+).*/\1/'
}

survivors=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for kind in "${KINDS[@]}"; do
  caught=""
  for bin in storage_tests node_tests; do
    RAFTKV_FAULTFS_DROP_SYNC=$kind "$BUILD_DIR/$bin" --gtest_filter='PowerLoss*' \
      --gtest_fail_fast >"$tmp/$kind-$bin.log" 2>&1
    rc=$?
    if [[ $rc -ne 0 ]]; then
      caught=$(first_failure "$tmp/$kind-$bin.log")
      [[ -n $caught ]] || caught="$bin exited $rc"
      break
    fi
  done
  if [[ -n $caught ]]; then
    printf 'sync dropped: %-16s caught by %s\n' "$kind" "$caught"
  else
    printf 'sync dropped: %-16s NOT CAUGHT: every PowerLoss test passed\n' "$kind"
    survivors=$((survivors + 1))
  fi
done
if [[ $survivors -gt 0 ]]; then
  echo "powerloss_mutants: $survivors kind(s) of sync can be removed without a PowerLoss test failing"
  exit 1
fi
echo "powerloss_mutants: every kind of sync is needed by at least one PowerLoss test"
