#!/usr/bin/env bash
# The metrics an operator relies on, end to end: cluster.sh starts 3 members
# with their own metrics ports (RAFTKV_METRICS_BASE_PORT); raftkvctl puts,
# gets, a transaction, a lease and a watch; every member is scraped and
#  - `promtool check metrics` finds nothing to say about any scrape;
#  - the values are sane (scripts/lib/metrics_check.py members): one leader
#    that every member knows, the leader counted at least the Puts sent,
#    every member holds the keys and the lease written, one watcher, the
#    process metrics plausible, ...;
#  - the watch, once ended, is counted and no watcher is left;
#  - `promtool check rules` accepts deploy/prometheus/raftkv-alerts.yml;
#  - deploy/grafana/raftkv-dashboard.json is a Grafana dashboard whose
#    queries, like the alert rules, use only metrics the scrapes export.
# Then it shows that the checks can fail: a scrape without raftkv_keys, a
# dashboard query of an unknown metric and a counter not named *_total must
# each be refused. Run by ctest (metrics_check) with RAFTKV_BIN_DIR set;
# promtool comes with Debian's prometheus package (scripts/install-deps.sh).
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# fail, step, remove_at_exit, stop_cluster_at_exit, on_exit, kill_wait, wait_for
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
: "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory}"
CLUSTER="$REPO_ROOT/scripts/cluster.sh"
CHECK=(python3 "$REPO_ROOT/scripts/lib/metrics_check.py")
CTL="$RAFTKV_BIN_DIR/raftkvctl"
RULES="$REPO_ROOT/deploy/prometheus/raftkv-alerts.yml"
DASHBOARD="$REPO_ROOT/deploy/grafana/raftkv-dashboard.json"
WORK=$(mktemp -d /tmp/raftkv-metrics.XXXXXX)
remove_at_exit "$WORK"
. "$REPO_ROOT/scripts/lib/ports.sh"
BASE_PORT=${RAFTKV_BASE_PORT:-$(free_base_port 103)}  # gRPC B+1..3, metrics B+101..103
export RAFTKV_BIN_DIR RAFTKV_DATA="$WORK/data" RAFTKV_BASE_PORT="$BASE_PORT"
export RAFTKV_METRICS_BASE_PORT=$((BASE_PORT + 100))
stop_cluster_at_exit "$RAFTKV_DATA"
watch_pid=""
stop_watch() {
  kill_wait TERM "$watch_pid"
  watch_pid=""
}
on_exit stop_watch

command -v promtool >/dev/null 2>&1 ||
  fail "promtool not found: install Debian's prometheus package (bash scripts/install-deps.sh)"
promtool --version 2>&1 | head -n1

# ---- 1. the cluster ----
step "starting 3 members (gRPC ports $((BASE_PORT + 1))-$((BASE_PORT + 3)), metrics ports" \
  "$((RAFTKV_METRICS_BASE_PORT + 1))-$((RAFTKV_METRICS_BASE_PORT + 3)))"
out=$("$CLUSTER" start 3) || fail "cluster.sh start"
echo "$out"
EPS=$(sed -n 's/^ENDPOINTS=//p' <<<"$out")
METRICS=$(sed -n 's/^METRICS=//p' <<<"$out")
[ -n "$EPS" ] || fail "cluster.sh start printed no ENDPOINTS line"
IFS=, read -r -a URLS <<<"$METRICS"
[ "${#URLS[@]}" = 3 ] || fail "expected 3 metrics URLs in a METRICS line, got '$METRICS'"
for i in 1 2 3; do
  want="http://127.0.0.1:$((RAFTKV_METRICS_BASE_PORT + i))/metrics"
  [ "${URLS[$((i - 1))]}" = "$want" ] || fail "metrics URL of member $i is '${URLS[$((i - 1))]}', expected $want"
done
ctl() { "$CTL" --endpoints="$EPS" "$@"; }

# Scrapes every member into $WORK/<tag>.<i>.txt, the files' names into SCRAPED.
SCRAPED=()
scrape() {
  local tag=$1 i f
  SCRAPED=()
  for i in 1 2 3; do
    f="$WORK/$tag.$i.txt"
    python3 -c 'import sys, urllib.request
sys.stdout.buffer.write(urllib.request.urlopen(sys.argv[1], timeout=5).read())' \
      "${URLS[$((i - 1))]}" >"$f" || fail "cannot scrape ${URLS[$((i - 1))]}"
    SCRAPED+=("$f")
  done
}

# ---- 2. traffic ----
step "a watch on m/, then puts, gets, a transaction and a lease"
"$CTL" --endpoints="$EPS" watch m/ --prefix >"$WORK/watch.out" 2>&1 &
watch_pid=$!
PUTS=20
for i in $(seq 1 $PUTS); do
  ctl put "m/$i" "v$i" >/dev/null || fail "put m/$i"
done
for i in 1 2 3; do
  [ "$(ctl get --print-value-only "m/$i")" = "v$i" ] || fail "get m/$i"
done
out=$(printf 'value("m/1") = "v1"\n\nput txn/a yes\nput txn/b also\n\nput txn/c no\n' | ctl txn) ||
  fail "txn"
[ "$(head -1 <<<"$out")" = SUCCESS ] || fail "txn printed '$out'"
out=$(ctl lease grant 600) || fail "lease grant"
[[ $out =~ ^lease\ ([0-9a-f]+)\ granted ]] || fail "lease grant printed '$out'"
ctl put --lease="${BASH_REMATCH[1]}" leased/1 x >/dev/null || fail "put leased/1"
PUTS=$((PUTS + 1))
KEYS=$((20 + 2 + 1))  # m/1..20, txn/a and txn/b, leased/1
# The watch is up once it has seen the puts.
wait_for 10 grep -q '^m/20$' "$WORK/watch.out" || fail "the watch printed no event for m/20: $(cat "$WORK/watch.out")"

# ---- 3. scrapes: lint and values ----
step "scraping every member: promtool check metrics, then the values"
# The followers apply the last entries a moment after the leader: retry.
for attempt in $(seq 1 20); do
  scrape values
  FILES=("${SCRAPED[@]}")
  if "${CHECK[@]}" members --puts "$PUTS" --keys "$KEYS" --leases 1 --watchers 1 "${FILES[@]}" \
    >"$WORK/members.out"; then
    break
  fi
  ((attempt < 20)) || { cat "$WORK/members.out" >&2; fail "the members' metrics are not as expected"; }
  sleep 0.5
done
for f in "${FILES[@]}"; do
  lint=$(promtool check metrics <"$f" 2>&1) || fail "promtool check metrics $f: $lint"
  [ -z "$lint" ] || fail "promtool check metrics $f: $lint"
  echo "promtool check metrics $(basename "$f"): no problems ($(grep -vc '^#' "$f") samples)"
done
echo "values: every member sane (keys $KEYS, leases 1, one watcher, >= $PUTS Puts on the leader)"
leader=$(grep -l '^raftkv_is_leader 1$' "${FILES[@]}")
grep -E '^raftkv_grpc_requests_total\{service="KV",method="(Put|Txn|Range)",|^raftkv_(keys|leases|watchers|has_leader|is_leader|log_bytes|snapshot_bytes|revision) |^process_(open_fds|max_fds|resident_memory_bytes|cpu_seconds_total) |^raftkv_build_info' \
  "$leader" | sed 's/^/  leader: /'

step "ending the watch: counted, no watcher left"
stop_watch
for attempt in $(seq 1 20); do
  scrape ended
  ENDED=("${SCRAPED[@]}")
  "${CHECK[@]}" watch-ended "${ENDED[@]}" >"$WORK/ended.out" && break
  ((attempt < 20)) || { cat "$WORK/ended.out" >&2; fail "the ended watch is not counted"; }
  sleep 0.5
done
grep -h '^raftkv_grpc_requests_total{service="Watch"' "${ENDED[@]}" | sed 's/^/  /'

# ---- 4. the rules and the dashboard ----
step "promtool check rules $(basename "$RULES")"
promtool check rules "$RULES" || fail "promtool check rules $RULES"
step "the dashboard and the rules use exported metrics only"
"${CHECK[@]}" names "$DASHBOARD" "$RULES" "${FILES[@]}" || fail "$DASHBOARD or $RULES"

# ---- 5. the checks can fail ----
step "the checks refuse a missing metric, an unknown metric and a badly named counter"
sed '/^raftkv_keys /d; /^# [A-Z]* raftkv_keys /d' "${FILES[0]}" >"$WORK/broken.txt"
if "${CHECK[@]}" members --puts "$PUTS" --keys "$KEYS" --leases 1 --watchers 1 \
  "$WORK/broken.txt" "${FILES[1]}" "${FILES[2]}" >"$WORK/broken.out"; then
  fail "the members check accepted a scrape without raftkv_keys"
fi
grep -q 'no raftkv_keys' "$WORK/broken.out" || fail "the members check said: $(cat "$WORK/broken.out")"
python3 - "$DASHBOARD" "$WORK/dashboard.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
d["panels"][1]["targets"].append({"refId": "Z", "expr": "rate(raftkv_no_such_metric_total[5m])"})
json.dump(d, open(sys.argv[2], "w"))
EOF
if "${CHECK[@]}" names "$WORK/dashboard.json" "$RULES" "${FILES[@]}" >"$WORK/names.out"; then
  fail "the names check accepted a dashboard query of raftkv_no_such_metric_total"
fi
grep -q 'raftkv_no_such_metric_total is not exported' "$WORK/names.out" ||
  fail "the names check said: $(cat "$WORK/names.out")"
sed 's/raftkv_proposals_total/raftkv_proposals/g' "${FILES[0]}" >"$WORK/badname.txt"
if promtool check metrics <"$WORK/badname.txt" >"$WORK/badname.out" 2>&1 && [ ! -s "$WORK/badname.out" ]; then
  fail "promtool check metrics accepted a counter not named *_total"
fi
sed 's/^/  promtool: /' "$WORK/badname.out"

echo "metrics_check: OK"
