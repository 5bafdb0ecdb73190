#!/usr/bin/env bash
# Loads a 3-member cluster on the RocksDB engine with --data_gib GiB of
# values, then measures what a store larger than memory costs a member:
#   - write throughput over the whole load, chunk by chunk (a plot);
#   - leader and follower RSS after each chunk (the largest seen);
#   - the bytes on disk of each member against the data written;
#   - restart_s: a follower killed with SIGKILL, until it answers again;
#   - catchup_s: a new member added, until it is promoted to voter (it has
#     caught up from a snapshot), and write p99.9 while that goes on.
# The last line is
#   bigdata: keys=N data_gib=G leader_rss_mib=R follower_rss_mib=F restart_s=S catchup_s=C write_ops=W
#
# Usage: scripts/bigdata_bench.sh [--data_gib G] [--value_len B] [--chunks K]
#            [--out DIR] [--plot FILE] [--keep]
#   --data_gib   values to load, in GiB (default 4; fractions allowed)
#   --value_len  bytes per value (default 1024); keys are 16 bytes
#   --chunks     load steps, one throughput and RSS sample each (default 16)
#   --out        work directory: cluster, JSON reports, bigdata.tsv
#                (default /tmp/raftkv-bigdata; removed first)
#   --plot       the plot (default OUT/bigdata.png)
#   --keep       leave the cluster's directories (they are removed otherwise)
# Environment: RAFTKV_BIN_DIR (default <repo>/build), RAFTKV_BASE_PORT
# (default: a free range). Needs free disk for about 3.5 copies of the data
# for each of the four members.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${RAFTKV_BIN_DIR:-$REPO/build}
DATA_GIB=4 VALUE_LEN=1024 CHUNKS=16 OUT=/tmp/raftkv-bigdata PLOT= KEEP=0
while [[ $# -gt 0 ]]; do
  case $1 in
    --data_gib) DATA_GIB=$2; shift 2 ;;
    --value_len) VALUE_LEN=$2; shift 2 ;;
    --chunks) CHUNKS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --plot) PLOT=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "bigdata_bench.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
say() { echo "bigdata_bench: $*" >&2; }
die() { say "$*"; exit 1; }
[[ $VALUE_LEN =~ ^[0-9]+$ && $VALUE_LEN -ge 16 ]] || die "--value_len must be an integer >= 16"
[[ $CHUNKS =~ ^[0-9]+$ && $CHUNKS -ge 1 ]] || die "--chunks must be a positive integer"
KEYS=$(python3 -c "import sys; print(int(float(sys.argv[1]) * 2**30 // int(sys.argv[2])))" \
  "$DATA_GIB" "$VALUE_LEN") || die "--data_gib must be a number"
[[ $KEYS -ge $CHUNKS ]] || die "--data_gib is too small for $CHUNKS chunks"
PLOT=${PLOT:-$OUT/bigdata.png}
for b in raftkv-server raftkv-bench raftkvctl; do
  [[ -x $BIN/$b ]] || die "$BIN/$b is missing: build first (scripts/build.sh)"
done
help=$("$BIN/raftkv-server" --helpfull 2>&1 || true)
[[ $help == *-storage_engine* ]] || die "this raftkv-server has no --storage_engine"

rm -rf "$OUT"
mkdir -p "$OUT"
# Each of the four members: the store, up to two whole-state snapshot
# files, the log (3.1 copies of the data were measured).
need_kib=$(python3 -c "print(int(float('$DATA_GIB') * 3.5 * 4 * 2**20 + 2 * 2**20))")
free_kib=$(df -Pk "$OUT" | awk 'NR==2 {print $4}')
[[ $free_kib -ge $need_kib ]] ||
  die "$OUT has $((free_kib >> 20)) GiB free; $DATA_GIB GiB of data needs about $((need_kib >> 20)) GiB"

# shellcheck source-path=SCRIPTDIR source=lib/ports.sh
source "$REPO/scripts/lib/ports.sh"
export RAFTKV_DATA=$OUT/cluster RAFTKV_BIN_DIR=$BIN
export RAFTKV_BASE_PORT=${RAFTKV_BASE_PORT:-$(free_base_port 5)}
quota=$(python3 -c "print(int(float('$DATA_GIB') * 3 * 2**30) + 2**31)")
# Snapshots are whole-state files on this engine: fewer of them during the
# load (the log between two, kept in memory, grows to 250,000 entries).
export RAFTKV_SERVER_FLAGS="--storage_engine=rocksdb --quota_backend_bytes=$quota \
  --snapshot_entries=250000"
export RAFTKV_CATCHUP_TIMEOUT_S=${RAFTKV_CATCHUP_TIMEOUT_S:-3600}
CLUSTER="bash $REPO/scripts/cluster.sh"
cleanup() {
  $CLUSTER stop >/dev/null 2>&1 || true
  [[ $KEEP == 1 ]] || rm -rf "$OUT/cluster"
}
trap cleanup EXIT
endpoints=$($CLUSTER start 3 | sed -n 's/^ENDPOINTS=//p')
[[ -n $endpoints ]] || die "the cluster did not start (see $OUT/cluster/node*/server.out)"

# The id of the member in role $1 (leader or follower), from raftkvctl status.
member() {
  $CLUSTER status --json 2>/dev/null | python3 -c "
import json, sys
for m in json.load(sys.stdin):
    if m.get('role') == sys.argv[1]:
        print(m['id']); break" "$1"
}
rss_mib() { awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$(cat "$OUT/cluster/node$1/pid")/status"; }
disk_mib() { du -sm "$OUT/cluster/node$1/data" | awk '{print $1}'; }

per_chunk=$((KEYS / CHUNKS))
say "loading $KEYS keys of $VALUE_LEN B ($DATA_GIB GiB) in $CHUNKS chunks into $endpoints"
printf 'chunk\tkeys\tops_per_sec\tp99_ms\tleader_rss_mib\tfollower_rss_mib\tleader_disk_mib\n' \
  >"$OUT/bigdata.tsv"
loaded=0 seconds=0 leader_rss=0 follower_rss=0
for ((c = 1; c <= CHUNKS; c++)); do
  n=$per_chunk
  [[ $c -eq $CHUNKS ]] && n=$((KEYS - loaded))
  # A request that fails without an answer (an election under the load
  # answers UNAVAILABLE) is not counted, up to 5% of a chunk; a wrong answer
  # or a lost write ends the run.
  "$BIN/raftkv-bench" --target="$endpoints" --gtest_filter=Benchmark.Write --requests="$n" \
    --value_len="$VALUE_LEN" --verify_sample=200 --write_timeout_ms=30000 \
    --json_out="$OUT/chunk-$c.json" >"$OUT/chunk-$c.log" 2>&1 || true
  acked=$(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))[0]
v = r.get('verified') or {}
ok = r['wrong_answer'] == 0 and v.get('wrong', 0) == 0 and v.get('missing', 0) == 0
print(r['acknowledged'] if ok and r['acknowledged'] >= 0.95 * r['requests'] else -1)" \
    "$OUT/chunk-$c.json" 2>/dev/null || echo -1)
  if [[ $acked -lt 0 ]]; then
    KEEP=1
    die "chunk $c failed (see $OUT/chunk-$c.log and the servers' logs in $OUT/cluster)"
  fi
  [[ $acked -lt $n ]] && say "chunk $c: $((n - acked)) of $n writes failed unanswered ($(grep -o 'failed ([^)]*)' "$OUT/chunk-$c.log" | head -1))"
  loaded=$((loaded + acked))
  leader=$(member leader)
  [[ -n $leader ]] || die "no leader after chunk $c"
  lr=$(rss_mib "$leader")
  fr=0
  for i in 1 2 3; do [[ $i != "$leader" ]] && fr=$((fr > $(rss_mib $i) ? fr : $(rss_mib $i))); done
  leader_rss=$((lr > leader_rss ? lr : leader_rss))
  follower_rss=$((fr > follower_rss ? fr : follower_rss))
  read -r secs ops p99 < <(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))[0]
print(r['seconds'], r['ops_per_sec'], r['latency_us']['p99'] / 1000)" "$OUT/chunk-$c.json")
  seconds=$(python3 -c "print($seconds + $secs)")
  printf '%d\t%d\t%s\t%.1f\t%d\t%d\t%d\n' "$c" "$loaded" "$ops" "$p99" "$lr" "$fr" \
    "$(disk_mib "$leader")" >>"$OUT/bigdata.tsv"
  say "chunk $c/$CHUNKS: $loaded keys, $ops writes/s, leader RSS $lr MiB, followers $fr MiB"
done
write_ops=$(python3 -c "print(round($loaded / $seconds))")
for i in 1 2 3; do say "node $i: $(disk_mib $i) MiB on disk ($(du -sm "$OUT/cluster/node$i/data"/kv-* 2>/dev/null | awk '{s += $1} END {print s + 0}') MiB in the store)"; done

follower=$(member follower)
say "restarting follower $follower after SIGKILL"
$CLUSTER kill "$follower"
start=$(date +%s.%N)
$CLUSTER restart "$follower" >/dev/null
restart_s=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")

say "adding member 4 while writes go on"
"$BIN/raftkv-bench" --target="$endpoints" --gtest_filter=Benchmark.Write \
  --requests=$((per_chunk / 2)) --value_len="$VALUE_LEN" --verify_sample=200 --inflight=16 \
  --write_timeout_ms=30000 --json_out="$OUT/during-catchup.json" >"$OUT/during-catchup.log" 2>&1 &
load_pid=$!
start=$(date +%s.%N)
if ! $CLUSTER add 4 >"$OUT/add.log" 2>&1; then
  KEEP=1
  die "member 4 did not catch up (see $OUT/add.log and $OUT/cluster)"
fi
catchup_s=$(python3 -c "print(round($(date +%s.%N) - $start, 1))")
wait "$load_pid" || say "the write load during the catch-up failed (see $OUT/during-catchup.log)"
p999=$(python3 -c "
import json
r = json.load(open('$OUT/during-catchup.json'))[0]
print(round(r['latency_us']['p999'] / 1000, 1))" 2>/dev/null || echo "?")
say "writes during the catch-up: p99.9 ${p999} ms"

# apt's python3-matplotlib is for /usr/bin/python3 (another python3 may come first).
plot_python=python3
python3 -c 'import matplotlib' 2>/dev/null || plot_python=/usr/bin/python3
"$plot_python" - "$OUT/bigdata.tsv" "$PLOT" <<'PY' || say "no plot (python3-matplotlib missing?)"
import csv, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
keys = [int(r["keys"]) / 1e6 for r in rows]
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(keys, [float(r["ops_per_sec"]) for r in rows], "o-", label="writes/s")
ax.set_xlabel("keys loaded (millions)")
ax.set_ylabel("writes/s")
ax.set_ylim(bottom=0)
ax2 = ax.twinx()
ax2.plot(keys, [int(r["leader_rss_mib"]) for r in rows], "s--", color="tab:red", label="leader RSS")
ax2.plot(keys, [int(r["follower_rss_mib"]) for r in rows], "^--", color="tab:green", label="follower RSS")
ax2.set_ylabel("RSS (MiB)")
ax2.set_ylim(bottom=0)
fig.legend(loc="lower center", ncol=3, bbox_to_anchor=(0.5, 0.15))
ax.set_title("Loading the RocksDB engine: throughput and memory")
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
PY
echo "bigdata: keys=$loaded data_gib=$DATA_GIB leader_rss_mib=$leader_rss follower_rss_mib=$follower_rss restart_s=$restart_s catchup_s=$catchup_s write_ops=$write_ops"
