#!/usr/bin/env bash
# Thread hand-offs per write. Runs Benchmark.Write on a local 3-member
# cluster with metrics on, scrapes every member while it runs, and prints per
# member, per applied entry: passes of the I/O loop, wake-ups of the apply
# thread, log fsyncs and AppendEntries messages (sent by the leader, received
# by a follower), from the last scrape before the cluster stopped.
#
#   scripts/handoffs.sh [REQUESTS] [INFLIGHT]      (defaults 60000 256)
# Environment: RAFTKV_BIN_DIR (default build), METRICS_PORT_BASE (19100),
# SERVER_FLAGS (passed to every member, e.g. --peer_append_stream=false).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${RAFTKV_BIN_DIR:-build}
base=${METRICS_PORT_BASE:-19100}
requests=${1:-60000}
inflight=${2:-256}
command -v curl >/dev/null || { echo "handoffs.sh: needs curl" >&2; exit 2; }
[[ -x $bin/raftkv-bench ]] || { echo "handoffs.sh: no $bin/raftkv-bench (build first)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$bin/raftkv-bench" --gtest_filter=Benchmark.Write --requests="$requests" --inflight="$inflight" \
  --followers=2 --metrics_port_base="$base" ${SERVER_FLAGS:+--server_flags="$SERVER_FLAGS"} >"$out/bench.txt" 2>&1 &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  for i in 1 2 3; do
    if curl -s -m 1 "http://127.0.0.1:$((base + i))/metrics" >"$out/m$i.tmp" 2>/dev/null &&
       grep -q '^raftkv_applied_entries_total' "$out/m$i.tmp"; then
      mv "$out/m$i.tmp" "$out/m$i.txt"
    fi
  done
  sleep 0.3
done
wait "$pid" || { cat "$out/bench.txt"; echo "handoffs.sh: the benchmark failed" >&2; exit 1; }
grep -E '^\| *Write|ops/s' "$out/bench.txt" | head -3 || true

value() {  # value FILE METRIC [LABEL-FILTER]
  awk -v m="$2" -v f="${3:-}" '$1 ~ "^"m"({|$)" && (f == "" || index($1, f) > 0) {print $2; exit}' "$1"
}
printf '%-8s %-9s %10s %12s %14s %12s %16s\n' member role applied io_cycles/w apply_wakes/w fsyncs/w appends_msgs/w
for i in 1 2 3; do
  f=$out/m$i.txt
  [[ -s $f ]] || { echo "member $i: no scrape"; continue; }
  role=$(awk '$1 ~ /^raftkv_role\{/ && $2 == 1 {match($1, /role="[a-z]+"/); print substr($1, RSTART + 6, RLENGTH - 7)}' "$f")
  applied=$(value "$f" raftkv_applied_entries_total)
  io=$(value "$f" raftkv_io_loop_cycles_total)
  wakes=$(value "$f" raftkv_apply_wakeups_total)
  syncs=$(value "$f" raftkv_log_fsync_duration_seconds_count)
  if [[ $role == leader ]]; then
    msgs=$(value "$f" raftkv_append_entries_batch_entries_count 'direction="sent"')
  else
    msgs=$(value "$f" raftkv_append_entries_batch_entries_count 'direction="received"')
  fi
  awk -v m="$i" -v r="$role" -v a="$applied" -v io="$io" -v w="$wakes" -v s="$syncs" -v x="$msgs" \
    'BEGIN {printf "%-8s %-9s %10d %12.3f %14.3f %12.3f %16.3f\n", m, r, a, io/a, w/a, s/a, x/a}'
done
