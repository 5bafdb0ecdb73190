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
#   compaction-bench.sh stall [STATE_MB] [REPEATS] [WRITES]
#       loads STATE_MB (default 256) of 16 B keys with 256 B values
#       (Benchmark.Batch), then REPEATS times (default 3), interleaved: a run
#       of WRITES (default 150000) 64 B writes at 256 in flight without a
#       snapshot, and the same run with a snapshot taken on every member half
#       a second after it starts (SNAPSHOT_ON: the endpoints that take one,
#       default all). Automatic snapshots are off. Prints each
#       run's ops/s, p99, p99.9 and max, then a line
#       `stall: p999_ratio=R max_ratio=M` (medians, snapshot / none).
#
# Environment: RAFTKV_BIN_DIR (default <repo>/build), RAFTKV_SERVER_FLAGS
# (e.g. --snapshot_entries=0 to compare without compaction by count),
# RAFTKV_DATA (default a new temporary directory, removed at the end unless
# KEEP=1), RAFTKV_BASE_PORT (default 7300).
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# on_exit, stop_cluster_at_exit
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
export RAFTKV_BIN_DIR=${RAFTKV_BIN_DIR:-$REPO_ROOT/build}
export RAFTKV_BASE_PORT=${RAFTKV_BASE_PORT:-7300}
export RAFTKV_START_TIMEOUT_S=${RAFTKV_START_TIMEOUT_S:-300}
export RAFTKV_DATA=${RAFTKV_DATA:-$(mktemp -d /tmp/raftkv-compaction.XXXXXX)}
CLUSTER=$REPO_ROOT/scripts/cluster.sh
CTL=$RAFTKV_BIN_DIR/raftkvctl
BENCH=$RAFTKV_BIN_DIR/raftkv-bench

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 1 ]] || usage
mode=$1
if [[ $mode == stall ]]; then
  state_mb=${2:-256}
  repeats=${3:-3}
  writes=${4:-150000}
  [[ $state_mb =~ ^[1-9][0-9]*$ && $repeats =~ ^[1-9][0-9]*$ && $writes =~ ^[1-9][0-9]*$ ]] || usage
  # Snapshots only when this script asks for one.
  export RAFTKV_SERVER_FLAGS="--snapshot_entries=0 --snapshot_log_bytes=0 ${RAFTKV_SERVER_FLAGS:-}"
else
  [[ $# -ge 2 ]] || usage
  count=$2
  value_len=${3:-64}
  keys=${4:-$count}
  [[ $count =~ ^[0-9]+$ && $value_len =~ ^[0-9]+$ && $keys =~ ^[1-9][0-9]*$ ]] || usage
  ((count % keys == 0)) || { echo "compaction-bench.sh: N must be a multiple of KEYS" >&2; exit 2; }
  [[ $mode == writes || $mode == catchup ]] || usage
fi

[[ ${KEEP:-0} == 1 ]] || on_exit rm -rf "$RAFTKV_DATA"
stop_cluster_at_exit "$RAFTKV_DATA"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }

endpoints=$("$CLUSTER" start 3 | sed -n 's/^ENDPOINTS=//p')
echo "cluster: $endpoints  data: $RAFTKV_DATA  server flags: ${RAFTKV_SERVER_FLAGS:-(defaults)}"

if [[ $mode == stall ]]; then
  keys=$((state_mb * 1048576 / 272))
  echo "loading $keys keys of 16 B with 256 B values (~$state_mb MiB)"
  "$BENCH" --gtest_filter=Benchmark.Batch --target="$endpoints" --requests="$keys" --batch_ops=1000 \
    --inflight=8 --key_len=16 --value_len=256 --seed=7 --verify_sample=1000 2>&1 |
    grep -E "^Benchmark.Batch +[0-9]|FAILED" || true
  # One Benchmark.Write run; with $1 = snap, every member takes a snapshot
  # half a second in. Prints "ops p99 p999 max" (µs).
  run() {
    local snap_pids=()
    if [[ $1 == snap ]]; then
      (sleep 0.5; for ep in ${SNAPSHOT_ON:-${endpoints//,/ }}; do
         "$CTL" --endpoints="$endpoints" --target="$ep" --timeout_ms=120000 snapshot >/dev/null &
       done; wait) &
      snap_pids+=($!)
    fi
    "$BENCH" --gtest_filter=Benchmark.Write --target="$endpoints" --requests="$writes" \
      --value_len=64 --key_len=16 --inflight=256 --seed=$RANDOM --verify_sample=1000 2>&1 |
      awk '/^Benchmark.Write +[0-9]/ { print $9, $14, $15, $16 }'
    for p in "${snap_pids[@]}"; do wait "$p"; done
  }
  printf "%-9s %3s %9s %9s %9s %9s\n" run rep ops/s p99_us p999_us max_us
  : >"$RAFTKV_DATA/stall.txt"
  for ((rep = 1; rep <= repeats; ++rep)); do
    for kind in none snap; do
      read -r ops p99 p999 max < <(run "$kind")
      printf "%-9s %3d %9s %9s %9s %9s\n" "$kind" "$rep" "$ops" "$p99" "$p999" "$max"
      echo "$kind $p999 $max" >>"$RAFTKV_DATA/stall.txt"
    done
  done
  grep -h -o -E "member [0-9]+ took snapshot.*" "$RAFTKV_DATA"/node*/logs/raftkv-server.*.log.INFO.* |
    sed -E 's/ took snapshot [^:]*:/ took a snapshot:/' || true
  median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
  p999_none=$(awk '$1 == "none" { print $2 }' "$RAFTKV_DATA/stall.txt" | median)
  p999_snap=$(awk '$1 == "snap" { print $2 }' "$RAFTKV_DATA/stall.txt" | median)
  max_none=$(awk '$1 == "none" { print $3 }' "$RAFTKV_DATA/stall.txt" | median)
  max_snap=$(awk '$1 == "snap" { print $3 }' "$RAFTKV_DATA/stall.txt" | median)
  awk -v a="$p999_snap" -v b="$p999_none" -v c="$max_snap" -v d="$max_none" \
    'BEGIN { printf "stall: p999_ratio=%.2f max_ratio=%.2f\n", a / b, c / d }'
  exit 0
fi

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
  echo "node 4 reads compaction-bench-probe locally: $("$CTL" --endpoints="127.0.0.1:$((RAFTKV_BASE_PORT + 4))" get --consistency=s --print-value-only compaction-bench-probe)"
  "$CLUSTER" members
  sizes 4
  "$CLUSTER" stop >/dev/null 2>&1 || true
  echo "from the server logs (leader changes, the transfer, the installation):"
  grep -h -E "became leader|to member 4|installed the leader" \
    "$RAFTKV_DATA"/node*/logs/raftkv-server.*.log.INFO.* | cut -c1-260 || true
fi
