#!/usr/bin/env bash
# Sustained-write soak: memory and disk of a 3-member cluster over time.
#
#   soak.sh [DURATION_S] [KEYS] [VALUE_LEN] [OUT_DIR]
#       starts 3 members with scripts/cluster.sh (127.0.0.1, fsync on), then
#       runs raftkv-bench Benchmark.Write rounds back to back, every round over
#       the same KEYS keys (overwrites; 16 B keys, VALUE_LEN-byte values, 256 in
#       flight, a sample of 1000 read back), until DURATION_S seconds have
#       passed. Meanwhile a sampler records every SAMPLE_S seconds each
#       member's RSS (VmRSS) and data directory size (du -sb).
#       Defaults: 600 s, 100000 keys, 64 B, OUT_DIR a new /tmp/raftkv-soak.* dir.
#
# Output in OUT_DIR: soak.csv (t_s,node,rss_kib,data_bytes,writes; t_s counts
# from the start of the first round, writes = acknowledged by the rounds
# finished by then), rounds.txt (raftkv-bench's summary line of every round),
# round-N.out (the whole output of a failed round); a summary on stdout.
# Plot it with scripts/plot_soak.py OUT_DIR/soak.csv PNG.
# Exit status 1 if any round failed or a member was not running at the end.
#
# Environment: RAFTKV_BIN_DIR (default <repo>/build), RAFTKV_SERVER_FLAGS,
# RAFTKV_BASE_PORT (default 7400), RAFTKV_DATA (default a new temporary
# directory, removed at the end unless KEEP=1 or something failed),
# SAMPLE_S (default 5).
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# remove_at_exit, stop_cluster_at_exit, on_exit, kill_wait
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
export RAFTKV_BIN_DIR=${RAFTKV_BIN_DIR:-$REPO_ROOT/build}
export RAFTKV_BASE_PORT=${RAFTKV_BASE_PORT:-7400}
export RAFTKV_DATA=${RAFTKV_DATA:-$(mktemp -d /tmp/raftkv-soak-data.XXXXXX)}
CLUSTER=$REPO_ROOT/scripts/cluster.sh
BENCH=$RAFTKV_BIN_DIR/raftkv-bench
SAMPLE_S=${SAMPLE_S:-5}

usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ ${1:-} == -h || ${1:-} == --help ]] && usage
duration=${1:-600}
keys=${2:-100000}
value_len=${3:-64}
out=${4:-$(mktemp -d /tmp/raftkv-soak.XXXXXX)}
[[ $duration =~ ^[1-9][0-9]*$ && $keys =~ ^[1-9][0-9]*$ && $value_len =~ ^[0-9]+$ ]] || usage
[[ $SAMPLE_S =~ ^[1-9][0-9]*$ ]] || usage
[[ -x $BENCH ]] || { echo "soak.sh: $BENCH not found (set RAFTKV_BIN_DIR)" >&2; exit 2; }
mkdir -p "$out"
csv=$out/soak.csv
rounds=$out/rounds.txt
writes_file=$RAFTKV_DATA/soak-writes
stop_file=$RAFTKV_DATA/soak-stop
bad=0
sampler=""

remove_at_exit "$RAFTKV_DATA" "cluster directory kept: $RAFTKV_DATA" "${KEEP:-0}"
stop_cluster_at_exit "$RAFTKV_DATA"
stop_sampler() {
  kill_wait TERM "$sampler"
  sampler=""
}
on_exit stop_sampler

now() { date +%s.%N; }
elapsed() { awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
set_writes() { echo "$1" >"$writes_file.tmp" && mv "$writes_file.tmp" "$writes_file"; }
node_pid() { cat "$RAFTKV_DATA/node$1/pid" 2>/dev/null || true; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null || true; }

# One CSV line per member; an empty rss_kib means the member was not running.
sample() {
  local t w i rss bytes
  t=$(elapsed)
  w=$(cat "$writes_file" 2>/dev/null || echo 0)
  for i in 1 2 3; do
    rss=$(rss_kib "$(node_pid "$i")")
    bytes=$(du -sb "$RAFTKV_DATA/node$i/data" 2>/dev/null | cut -f1 || true)
    echo "$t,$i,$rss,$bytes,$w"
  done >>"$csv"
}

endpoints=$("$CLUSTER" start 3 | sed -n 's/^ENDPOINTS=//p')
echo "soak: $duration s of writes over $keys keys of $value_len B; cluster $endpoints," \
  "data $RAFTKV_DATA, server flags: ${RAFTKV_SERVER_FLAGS:-(defaults)}; output in $out"

echo "t_s,node,rss_kib,data_bytes,writes" >"$csv"
: >"$rounds"
set_writes 0
t0=$(now)
(while [[ ! -e $stop_file ]]; do sample; sleep "$SAMPLE_S"; done) &
sampler=$!

round=0
total=0
failed_rounds=()
round_out=$RAFTKV_DATA/round.out
while awk -v e="$(elapsed)" -v d="$duration" 'BEGIN { exit !(e < d) }'; do
  round=$((round + 1))
  rc=0
  "$BENCH" --gtest_filter=Benchmark.Write --target="$endpoints" --requests="$keys" --seed=1 \
    --value_len="$value_len" --key_len=16 --inflight=256 --verify_sample=1000 \
    >"$round_out" 2>&1 || rc=$?
  line=$(grep -E '^Benchmark.Write +[0-9]' "$round_out" | tail -1 || true)
  acked=$(awk '{ print $7 }' <<<"$line")
  total=$((total + ${acked:-0}))
  set_writes "$total"
  t=$(elapsed)
  if [[ ! -s $rounds ]]; then
    echo "round end_t_s $(grep -m1 -E '^scenario ' "$round_out" || echo '(raftkv-bench summary)')" >>"$rounds"
  fi
  echo "$round $t ${line:-(no summary line)}" >>"$rounds"
  if ((rc != 0)) || [[ -z $line ]]; then
    failed_rounds+=("$round")
    cp "$round_out" "$out/round-$round.out"
    echo "round $round at $t s FAILED (exit $rc): $(grep -m3 -E 'FAILED|wrong|missing' "$round_out" | tr '\n' ' ')" >&2
    sleep 1
  else
    echo "round $round done at $t s: $(awk '{ print $9 }' <<<"$line") writes/s, $total writes in total"
  fi
done
t_end=$(elapsed)
touch "$stop_file"
wait "$sampler" || true
sampler=""
sample

dead=()
for i in 1 2 3; do [[ -n $(rss_kib "$(node_pid "$i")") ]] || dead+=("$i"); done

echo
echo "soak: $round rounds, $total writes acknowledged in $t_end s:" \
  "$(awk -v w="$total" -v s="$t_end" 'BEGIN { printf "%.0f", w / s }') writes/s;" \
  "${#failed_rounds[@]} failed round(s)${failed_rounds[*]:+: ${failed_rounds[*]}}"
# Per member: RSS at the first sample after the first round, its maximum and
# last value; data directory maximum and last value; and, as a boundedness
# check, the maximum over the last third of the run against the middle third.
awk -F, -v T="$t_end" '
  NR == 1 { next }
  {
    n = $2; t = $1
    if ($3 != "") {
      if (!(n in first) && $5 > 0) first[n] = $3
      if ($3 > rmax[n]) rmax[n] = $3
      if (t >= T / 3 && t < 2 * T / 3 && $3 > rmid[n]) rmid[n] = $3
      if (t >= 2 * T / 3 && $3 > rlast[n]) rlast[n] = $3
    }
    rend[n] = $3
    if ($4 != "") {
      if ($4 > dmax[n]) dmax[n] = $4
      if (t >= T / 3 && t < 2 * T / 3 && $4 > dmid[n]) dmid[n] = $4
      if (t >= 2 * T / 3 && $4 > dlast[n]) dlast[n] = $4
      dend[n] = $4
    }
  }
  function verdict(last, mid) {
    if (mid == 0) return "n/a"
    return sprintf("%s (last/middle third max %.2f)", last <= 1.1 * mid ? "bounded" : "GROWING", last / mid)
  }
  END {
    for (n = 1; n <= 3; n++) {
      printf "node %d: RSS MiB first %.1f, max %.1f, end %s; data dir MiB max %.1f, end %.1f\n",
        n, first[n] / 1024, rmax[n] / 1024,
        rend[n] == "" ? "(not running)" : sprintf("%.1f", rend[n] / 1024),
        dmax[n] / 1048576, dend[n] / 1048576
      printf "        RSS %s; data dir %s\n", verdict(rlast[n], rmid[n]), verdict(dlast[n], dmid[n])
    }
  }' "$csv"
echo "samples: $csv; rounds: $rounds"

if ((${#dead[@]} > 0)); then
  echo "soak: member(s) ${dead[*]} not running at the end (see $RAFTKV_DATA/node*/server.out)" >&2
  bad=1
fi
if ((${#failed_rounds[@]} > 0)); then
  echo "soak: FAILED rounds: ${failed_rounds[*]} (output in $out/round-N.out)" >&2
  bad=1
fi
exit "$bad"
