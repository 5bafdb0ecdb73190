#!/usr/bin/env bash
# Where raftkv's leader spends its CPU under one configuration of etcd's
# benchmark tool: starts a fresh 3-member raftkv cluster (cluster.sh, default
# flags), runs `benchmark --endpoints=<leader> ARGS...` against it, samples
# the leader with perf for SECONDS once the run is under way, and prints the
# leader's share of samples by thread and its top symbols, then the
# benchmark's summary. Run it with the build lock held, as every measurement:
#
#   flock /tmp/raftkv-build.lock scripts/etcd_benchmark_profile.sh 5 \
#       lease-keepalive --conns=16 --clients=256 --total=200000
#
# Environment: RAFTKV_BIN_DIR (default build), BENCH (default
# ../shared/tools/etcd-compare/bin/benchmark). Call graphs are not usable
# (the libraries have no frame pointers): read threads and self symbols.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
seconds=${1:?usage: etcd_benchmark_profile.sh SECONDS BENCHMARK-ARGS...}
shift
BENCH=${BENCH:-$REPO_ROOT/../shared/tools/etcd-compare/bin/benchmark}
export RAFTKV_BIN_DIR=${RAFTKV_BIN_DIR:-$REPO_ROOT/build}
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 2; }
start_test_cluster 3 etcdbench-profile
export ETCDCTL_API=3
leader=$(etcdctl --endpoints="$ENDPOINTS" endpoint status -w simple |
  awk -F', ' '$5 == "true" { print $1; exit }')
[ -n "$leader" ] || fail "no leader"
for i in 1 2 3; do
  if [ "${EP[$((i - 1))]}" = "$leader" ]; then pid=$(cat "$RAFTKV_DATA/node$i/pid"); fi
done
if [ "$1" = range ]; then etcdctl --endpoints="$leader" put "$2" "$(head -c 64 /dev/zero | tr '\0' v)" >/dev/null; fi
out=$RAFTKV_DATA/profile
mkdir -p "$out"
"$BENCH" --endpoints="$leader" "$@" --precise >"$out/bench.txt" 2>&1 &
bench=$!
sleep 1
perf record -F 999 -g -p "$pid" -o "$out/perf.data" -- sleep "$seconds" >/dev/null 2>&1
wait "$bench" || true
echo "== leader $leader (pid $pid): samples by thread"
perf report -i "$out/perf.data" --no-children --sort comm --stdio 2>/dev/null | grep -E '^ +[0-9]' | sed -n '1,12p'
echo "== leader: top symbols (self)"
perf report -i "$out/perf.data" --no-children --sort dso,sym --stdio -g none 2>/dev/null |
  grep -E '^ +[0-9]' | sed -n '1,30p'
echo "== benchmark"
tr '\r' '\n' <"$out/bench.txt" | awk '/^Summary:/ { p = 1 } p' | sed -n '1,8p;/Latency distribution/,/99.9%/p;/Error/,$p'
echo "== leader log lines during the run (warnings and errors)"
cat "$RAFTKV_DATA"/node*/logs/*.WARNING 2>/dev/null | grep -E '^[WE][0-9]{4}' | tail -n 10 || true
