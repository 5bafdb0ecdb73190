#!/usr/bin/env bash
# A full disk, end to end, with real servers: member 3's data directory is a
# small tmpfs that the test fills (a filler file leaves a few hundred KiB).
# Member 3 is made the leader, then writes of 64 KiB values run the disk out
# of space: member 3 must not crash and must not acknowledge, its metrics say
# it is stalled, the other two elect a leader and go on taking writes. Then
# the filler is removed: member 3 writes what it held, catches up, and every
# acknowledged write is on every member with its value.
# Needs root (mount); exits 77 (SKIP) without it. Run by ctest (full_disk)
# with RAFTKV_BIN_DIR set.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
: "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory}"
[[ $(id -u) == 0 ]] || skip "needs root to mount a small tmpfs (running as uid $(id -u))"
CTL="$RAFTKV_BIN_DIR/raftkvctl"
CLUSTER="$REPO_ROOT/scripts/cluster.sh"

RAFTKV_DATA=$(mktemp -d /tmp/raftkv-fulldisk.XXXXXX)
export RAFTKV_DATA RAFTKV_BIN_DIR
remove_at_exit "$RAFTKV_DATA" "data kept in $RAFTKV_DATA (member 3's data directory was a tmpfs: gone)"
DISK=$RAFTKV_DATA/node3/data
mkdir -p "$DISK"
mount -t tmpfs -o size=16m raftkv-full-disk "$DISK" || skip "cannot mount a tmpfs on $DISK"
on_exit umount -l "$DISK"
stop_cluster_at_exit "$RAFTKV_DATA"
# shellcheck source-path=SCRIPTDIR source=lib/ports.sh
. "$REPO_ROOT/scripts/lib/ports.sh"
# One block: members on B+1..3, their metrics on B+11..13.
RAFTKV_BASE_PORT=${RAFTKV_BASE_PORT:-$(free_base_port 14)}
RAFTKV_METRICS_BASE_PORT=$((RAFTKV_BASE_PORT + 10))
export RAFTKV_BASE_PORT RAFTKV_METRICS_BASE_PORT
# RAFTKV_FULL_DISK_FLAGS: more server flags (ctest full_disk passes
# "--storage_engine=rocksdb --snapshot_entries=8" when RocksDB is built:
# checkpoints flushed onto the full disk).
export RAFTKV_SERVER_FLAGS="--snapshot_entries=0 --snapshot_log_bytes=0 ${RAFTKV_FULL_DISK_FLAGS:-}"

step "a cluster of 3 (ports $((RAFTKV_BASE_PORT + 1))-$((RAFTKV_BASE_PORT + 3))), member 3's data on a 16 MiB tmpfs"
ENDPOINTS=$(bash "$CLUSTER" start 3 | sed -n 's/^ENDPOINTS=//p')
[ -n "$ENDPOINTS" ] || fail "cluster.sh start printed no ENDPOINTS line"
IFS=, read -r -a EP <<<"$ENDPOINTS"
ctl() { "$CTL" --endpoints="$ENDPOINTS" --command-timeout=5s "$@"; }
metric() {  # MEMBER NAME: the value of an unlabelled metric
  python3 - "http://127.0.0.1:$((RAFTKV_METRICS_BASE_PORT + $1))/metrics" "$2" <<'EOF'
import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().splitlines():
    if line.startswith(sys.argv[2] + " "):
        print(line.split()[1])
EOF
}
leader_id() {  # as member 1 sees it
  "$CTL" --endpoints="${EP[0]}" --command-timeout=5s status 2>/dev/null | awk 'NR == 2 {print $NF}'
}
# Values of 64 KiB, one per key. COUNT of them outgrow the free space plus
# the log segment's preallocated 4 MiB (--segment_preallocate_bytes), which
# takes writes without asking the disk for room.
COUNT=100
value_of() { python3 -c "import sys; print(sys.argv[1] * 8192)" "$(printf 'v%07d' "$1")"; }

for i in $(seq 1 5); do ctl put "before-$i" "$(value_of "$i")" >/dev/null || fail "put before-$i"; done
step "member 3 leads"
leads_3() { "$CTL" --endpoints="$ENDPOINTS" move-leader 3 >/dev/null 2>&1; [ "$(leader_id)" = 3 ]; }
wait_for 30 leads_3 || fail "member 3 never became the leader: $(ctl status 2>&1)"

step "filling member 3's disk"
free_kib=$(df -k --output=avail "$DISK" | tail -1)
dd if=/dev/zero of="$DISK/filler" bs=1K count=$((free_kib - 256)) status=none 2>/dev/null || true
say "member 3's disk: $(df -k --output=avail "$DISK" | tail -1) KiB free"

step "writing $COUNT values of 64 KiB: member 3 runs out of space"
ACKED=()
for i in $(seq 1 "$COUNT"); do
  if ctl put "k-$i" "$(value_of "$i")" >/dev/null 2>&1; then ACKED+=("$i"); fi
done
say "${#ACKED[@]} of $COUNT writes acknowledged"
pgrep -F "$RAFTKV_DATA/node3/pid" >/dev/null || fail "member 3 exited on a full disk: $(tail -5 "$RAFTKV_DATA/node3/server.out")"
[ "$(metric 3 raftkv_storage_stalled)" = 1 ] || fail "member 3 is not stalled (raftkv_storage_stalled $(metric 3 raftkv_storage_stalled))"
errors=$(metric 3 raftkv_storage_errors_total)
[ "${errors%.*}" -gt 0 ] || fail "member 3 counted no storage errors"
# The others took over and went on.
((${#ACKED[@]} >= COUNT * 3 / 4)) || fail "only ${#ACKED[@]} of $COUNT writes were acknowledged while member 3 was stalled"
[ "$(leader_id)" != 3 ] || fail "member 3 still leads with a full disk"
grep -q "cannot persist .*No space left on device" "$RAFTKV_DATA"/node3/logs/raftkv-server.*ERROR* 2>/dev/null ||
  grep -rq "cannot persist .*No space left on device" "$RAFTKV_DATA/node3" ||
  fail "member 3 did not log why it stalled"

step "room again: member 3 catches up"
rm -f "$DISK/filler"
not_stalled() { [ "$(metric 3 raftkv_storage_stalled)" = 0 ]; }
wait_for 30 not_stalled || fail "member 3 is still stalled after the filler was removed"
ctl put after "$(value_of 999)" >/dev/null || fail "put after the disk has room again"
has_after() { [ -n "$("$CTL" --endpoints="${EP[2]}" get after --consistency=s --print-value-only 2>/dev/null)" ]; }
wait_for 30 has_after || fail "member 3 never caught up"
for m in 0 1 2; do
  for i in "${ACKED[@]}"; do
    got=$("$CTL" --endpoints="${EP[$m]}" get "k-$i" --consistency=s --print-value-only) || fail "get k-$i from ${EP[$m]}"
    [ "$got" = "$(value_of "$i")" ] || fail "acknowledged k-$i is missing or wrong on ${EP[$m]}"
  done
done
pgrep -F "$RAFTKV_DATA/node3/pid" >/dev/null || fail "member 3 exited"
echo "full disk: member 3 stalled without crashing, ${#ACKED[@]}/$COUNT writes acknowledged meanwhile, all on every member after"
