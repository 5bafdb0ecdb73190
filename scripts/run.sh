#!/usr/bin/env bash
# The main job: installs the dependencies, builds raftkv, starts a local
# 3-node cluster, shows it working (writes, reads, status, a leader crash and
# recovery), and stops it. Data and logs go to ${RAFTKV_DATA:-./data/demo}.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# stop_cluster_at_exit
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
# Only what this job needs: scripts/test.sh installs the rest.
"$REPO_ROOT/scripts/install-deps.sh" --main
"$REPO_ROOT/scripts/build.sh" --target raftkv-server raftkvctl raftkv-bench

export RAFTKV_BIN_DIR=${RAFTKV_BIN_DIR:-$REPO_ROOT/build}
export RAFTKV_DATA=${RAFTKV_DATA:-$REPO_ROOT/data/demo}
CLUSTER="$REPO_ROOT/scripts/cluster.sh"
CTL="$RAFTKV_BIN_DIR/raftkvctl"

"$CLUSTER" stop >/dev/null 2>&1 || true
rm -rf "$RAFTKV_DATA"
stop_cluster_at_exit "$RAFTKV_DATA"

# A heading per part of the demonstration (not the tests' "--- " lines).
step() { printf '\n== %s\n' "$*"; }

step "start a 3-node cluster"
ENDPOINTS=$("$CLUSTER" start 3 | sed -n 's/^ENDPOINTS=//p')
echo "ENDPOINTS=$ENDPOINTS"
ctl() { echo "\$ raftkvctl $*"; "$CTL" --endpoints="$ENDPOINTS" "$@"; }

step "writes and reads (any endpoint works: clients follow the leader hint)"
ctl put greeting "hello, raft"
ctl put answer 42
ctl get greeting
ctl get answer --print-value-only
ctl del answer
ctl get answer
echo "(nothing printed: the key is gone)"
ctl get key --prefix --count-only
for i in $(seq 1 100); do "$CTL" --endpoints="$ENDPOINTS" put "key$i" "value$i" >/dev/null; done
echo "(100 more writes acknowledged)"

step "cluster status"
ctl status

leader=$("$CTL" --endpoints="$ENDPOINTS" status --json |
  python3 -c 'import json,sys; print(next(n["id"] for n in json.load(sys.stdin) if n["role"]=="leader"))')
step "SIGKILL the leader (member $leader) and keep writing"
"$CLUSTER" kill "$leader"
start=$(date +%s%N)
ctl put after-crash "still here"
echo "first write after the crash acknowledged in $(( ($(date +%s%N) - start) / 1000000 )) ms"
ctl get key100
ctl status || true

step "restart member $leader: it catches up from the new leader"
"$CLUSTER" restart "$leader"
sleep 1
ctl status
echo "\$ raftkvctl --endpoints=<member $leader> get after-crash --consistency=s"
"$CTL" --endpoints="$(echo "$ENDPOINTS" | cut -d, -f"$leader")" get after-crash --consistency=s

step "stop"
"$CLUSTER" stop

step "benchmark: async writes and the gRPC echo ceiling (local cluster: leader + 2 followers)"
echo "\$ raftkv-bench --gtest_filter=Benchmark.Write:Benchmark.Echo --requests=20000"
"$RAFTKV_BIN_DIR/raftkv-bench" --gtest_filter=Benchmark.Write:Benchmark.Echo --requests=20000 \
  --gtest_brief=1

step "benchmark: one write in flight, against its floor (two round trips and an fdatasync)"
echo "\$ raftkv-bench --gtest_filter=Benchmark.Write --requests=3000 --inflight=1"
"$RAFTKV_BIN_DIR/raftkv-bench" --gtest_filter=Benchmark.Write --requests=3000 --inflight=1 \
  --gtest_brief=1

step "benchmark: batched writes (KV.Batch: 1000 Puts per call, each call one log entry)"
echo "\$ raftkv-bench --gtest_filter=Benchmark.Batch --requests=500000 --batch_ops=1000 --inflight=8 --verify_sample=10000"
"$RAFTKV_BIN_DIR/raftkv-bench" --gtest_filter=Benchmark.Batch --requests=500000 --batch_ops=1000 \
  --inflight=8 --verify_sample=10000 --gtest_brief=1
