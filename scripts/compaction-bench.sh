#!/usr/bin/env bash
# Measures what log compaction buys on a real 3-node cluster (scripts/cluster.sh
# on 127.0.0.1, fsync on) and how long a new member takes to catch up:
#
#   compaction-bench.sh writes N [VALUE_LEN] [KEYS]
#       writes N keys (raftkv-bench Benchmark.Write, 256 in flight): N distinct
#       ones, or with KEYS, N / KEYS rounds over the same KEYS keys (overwrites),
#       prints each member's data directory size (log, snapshots), then
#       SIGKILLs all three, restarts them one by one (time until each answers)
#       and times the first write acknowledged after the restart.
#   compaction-bench.sh catchup N VALUE_LEN
#       writes N keys of VALUE_LEN bytes, takes a snapshot on every member, then
#       times `cluster.sh add 4` (new empty node 4: InstallSnapshot of the whole
#       state, the log after it, promotion to voter) and reads a key from it.
#
# Environment: RAFTKV_BIN_DIR (default <repo>/build), RAFTKV_SERVER_FLAGS
# (e.g. --snapshot_entries=0 to compare without compaction by count),
# RAFTKV_DATA (default a new temporary directory, removed at the end unless
# KEEP=1), RAFTKV_BASE_PORT (default 7300).
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export RAFTKV_BIN_DIR=${RAFTKV_BIN_DIR:-$REPO_ROOT/build}
export RAFTKV_BASE_PORT=${RAFTKV_BASE_PORT:-7300}
export RAFTKV_START_TIMEOUT_S=${RAFTKV_START_TIMEOUT_S:-300}
export RAFTKV_DATA=${RAFTKV_DATA:-$(mktemp -d /tmp/raftkv-compaction.XXXXXX)}
CLUSTER=$REPO_ROOT/scripts/cluster.sh
CTL=$RAFTKV_BIN_DIR/raftkvctl
BENCH=$RAFTKV_BIN_DIR/raftkv-bench

usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
mode=$1
count=$2
value_len=${3:-64}
keys=${4:-$count}
[[ $count =~ ^[0-9]+$ && $value_len =~ ^[0-9]+$ && $keys =~ ^[1-9][0-9]*$ ]] || usage
((count % keys == 0)) || { echo "compaction-bench.sh: N must be a multiple of KEYS" >&2; exit 2; }
[[ $mode == writes || $mode == catchup ]] || usage

cleanup() {
  "$CLUSTER" stop >/dev/null 2>&1 || true
  [[ ${KEEP:-0} == 1 ]] || rm -rf "$RAFTKV_DATA"
}
trap cleanup EXIT

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

endpoints=$("$CLUSTER" start 3 | sed -n 's/^ENDPOINTS=//p')
echo "cluster: $endpoints  data: $RAFTKV_DATA  server flags: ${RAFTKV_SERVER_FLAGS:-(defaults)}"

t0=$(now)
for ((round = 0; round < count / keys; ++round)); do
  # The same --seed every round: the same keys, overwritten.
  "$BENCH" --gtest_filter=Benchmark.Write --target="$endpoints" --requests="$keys" --seed=1 \
    --value_len="$value_len" --key_len=16 --inflight=256 --verify_sample=1000 2>&1 |
    grep -E "^Benchmark.Write +[0-9]|FAILED|verified" || true
done
echo "wrote $count values of $value_len B to $keys distinct keys in $(since "$t0") s"

sizes() {
  for i in "$@"; do
    local d=$RAFTKV_DATA/node$i/data
    echo "  node $i: data dir $(mib "$(du -sb "$d" | cut -f1)") (log $(mib "$(du -sb "$d/log" | cut -f1)"), snapshots $(mib "$(du -sb "$d/snap" | cut -f1)"): $(ls "$d/snap" | tr '\n' ' '))"
  done
}

# The recovery line of node $1's newest server log (glog flushes INFO lines
# lazily: call after the node stopped).
recovery() {
  local f
  f=$(ls -t "$RAFTKV_DATA/node$1/logs/"raftkv-server.*.log.INFO.* | head -1)
  echo "  $(grep -h -o 'member [0-9]* recovered term.*' "$f" | tail -1)"
}

if [[ $mode == writes ]]; then
  sleep 2  # let the followers apply the tail and finish a snapshot in progress
  echo "disk usage after $count writes:"
  sizes 1 2 3
  for i in 1 2 3; do "$CLUSTER" kill "$i" >/dev/null 2>&1; done
  echo "SIGKILLed all three; restarting:"
  t_all=$(now)
  for i in 1 2 3; do
    t=$(now)
    "$CLUSTER" restart "$i" >/dev/null 2>&1
    echo "  node $i answers after $(since "$t") s (cluster.sh restart, polling included)"
  done
  until "$CTL" --endpoints="$endpoints" --timeout_ms=2000 put compaction-bench-probe x >/dev/null 2>&1; do
    sleep 0.05
  done
  echo "first write acknowledged $(since "$t_all") s after the first restart began"
  "$CLUSTER" stop >/dev/null 2>&1
  echo "recovery, from the server logs:"
  for i in 1 2 3; do recovery "$i"; done
else
  "$CTL" --endpoints="$endpoints" put compaction-bench-probe written-before-add >/dev/null
  for ep in ${endpoints//,/ }; do "$CTL" --endpoints="$endpoints" --target="$ep" snapshot; done
  sleep 1
  echo "state after $count writes of $value_len B:"
  sizes 1 2 3
  t=$(now)
  "$CLUSTER" add 4 >/dev/null
  echo "node 4 added, caught up by snapshot and promoted in $(since "$t") s"
  echo "node 4 reads compaction-bench-probe locally: $("$CTL" --endpoints="127.0.0.1:$((RAFTKV_BASE_PORT + 4))" --stale get compaction-bench-probe)"
  "$CLUSTER" members
  sizes 4
  "$CLUSTER" stop >/dev/null 2>&1 || true
  echo "from the server logs (leader changes, the transfer, the installation):"
  grep -h -E "became leader|to member 4|installed the leader" \
    "$RAFTKV_DATA"/node*/logs/raftkv-server.*.log.INFO.* | cut -c1-260 || true
fi
