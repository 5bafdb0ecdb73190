#!/usr/bin/env bash
# etcd's own CLI against raftkv: the etcdctl (Debian's etcd-client, API v3)
# commands a user runs -- put, get, del, txn, member list, endpoint status and
# health, lease, watch, move-leader, compaction, lock, elect, member add /
# promote / update / remove -- first against
# a real 3-member etcd (Debian's etcd-server) and then, the same checks,
# against a 3-member raftkv cluster started by scripts/cluster.sh, through
# every member (followers forward to the leader): raftkv prints what etcd
# prints (revisions counted from the first write, member ids aside).
# Run by ctest with RAFTKV_BIN_DIR set; skipped (77) without etcdctl or etcd.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
: "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory}"
# shellcheck source-path=SCRIPTDIR source=lib/ports.sh
source "$REPO_ROOT/scripts/lib/ports.sh"
# shellcheck source-path=SCRIPTDIR source=lib/etcd.sh
source "$REPO_ROOT/scripts/lib/etcd.sh"
command -v etcdctl >/dev/null 2>&1 || skip "etcdctl not installed (Debian: etcd-client; scripts/install-deps.sh)"
command -v etcd >/dev/null 2>&1 || skip "etcd not installed (Debian: etcd-server; scripts/install-deps.sh)"
export ETCDCTL_API=3
WORK=$(mktemp -d "${TMPDIR:-/tmp}/raftkv-etcdctl.XXXXXX")
remove_at_exit "$WORK" "etcdctl_test: etcd's data and logs kept in $WORK"
ctl() { etcdctl --dial-timeout=5s --command-timeout=10s "$@"; }
# The store's revision as an answer's header gives it (etcdctl -w json).
revision_of() { sed -n 's/.*"revision":\([0-9]*\).*/\1/p' | head -1; }

# The checks, against the cluster at ENDPOINTS (EP); $1: a scratch directory.
suite() {
  step "put and get through every member"
  for i in 0 1 2; do
    out=$(ctl --endpoints="${EP[$i]}" put "via$i" "value$i") || fail "put via ${EP[$i]}"
    [ "$out" = OK ] || fail "put via ${EP[$i]} printed '$out', expected OK"
  done
  for i in 0 1 2; do
    out=$(ctl --endpoints="${EP[$(( (i + 1) % 3 ))]}" get "via$i") || fail "get via$i"
    [ "$out" = "$(printf 'via%s\nvalue%s' "$i" "$i")" ] || fail "get via$i printed '$out'"
  done
  out=$(ctl --endpoints="$ENDPOINTS" get no-such-key) || fail "get of an absent key"
  [ -z "$out" ] || fail "get of an absent key printed '$out'"

  step "prefix, keys only, limit, count and more (-w json), print-value-only, from-key"
  out=$(ctl --endpoints="$ENDPOINTS" get via --prefix --keys-only) || fail "get --prefix --keys-only"
  [ "$out" = "$(printf 'via0\n\nvia1\n\nvia2\n')" ] || fail "get via --prefix --keys-only printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" get via --prefix --print-value-only --limit=2) || fail "get --limit"
  [ "$out" = "$(printf 'value0\nvalue1')" ] || fail "get --limit=2 printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" get via --prefix --limit=1 -w json) || fail "get -w json"
  grep -q '"count":3' <<<"$out" || fail "get via --prefix --limit=1 -w json: no count 3 in '$out'"
  grep -q '"more":true' <<<"$out" || fail "get via --prefix --limit=1 -w json: no more in '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" get "" --from-key --keys-only) || fail "get --from-key"
  [ "$(grep -c . <<<"$out")" = 3 ] || fail "get '' --from-key listed '$out'"

  step "revisions: one per write, as etcd counts them"
  first=$(ctl --endpoints="$ENDPOINTS" put rev-key a -w json | revision_of)
  [ -n "$first" ] || fail "put -w json gave no revision"
  second=$(ctl --endpoints="$ENDPOINTS" put rev-key b -w json | revision_of)
  [ "$second" = $((first + 1)) ] || fail "second put at revision $second, expected $((first + 1))"
  out=$(ctl --endpoints="$ENDPOINTS" get rev-key --rev="$first" --print-value-only) || fail "get --rev"
  [ "$out" = a ] || fail "get rev-key --rev=$first printed '$out', expected a"
  out=$(ctl --endpoints="$ENDPOINTS" get rev-key -w json) || fail "get -w json"
  grep -q "\"mod_revision\":$second" <<<"$out" || fail "get -w json: no mod_revision $second in '$out'"
  grep -q '"version":2' <<<"$out" || fail "get -w json: version is not 2 in '$out'"
  out=$(ctl --endpoints="${EP[2]}" put rev-key c --prev-kv) || fail "put --prev-kv"
  [ "$out" = "$(printf 'OK\nrev-key\nb')" ] || fail "put --prev-kv printed '$out'"

  step "del, del --prefix --prev-kv"
  out=$(ctl --endpoints="$ENDPOINTS" del via0) || fail "del via0"
  [ "$out" = 1 ] || fail "del via0 printed '$out', expected 1"
  out=$(ctl --endpoints="$ENDPOINTS" del via --prefix --prev-kv) || fail "del --prefix --prev-kv"
  [ "$out" = "$(printf '2\nvia1\nvalue1\nvia2\nvalue2')" ] || fail "del --prefix --prev-kv printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" del via --prefix) || fail "del of nothing"
  [ "$out" = 0 ] || fail "del of nothing printed '$out', expected 0"

  step "txn"
  out=$(printf 'value("rev-key") = "c"\n\nput txn-key yes\nget rev-key\n\nput txn-key no\n\n' |
    ctl --endpoints="${EP[1]}" txn) || fail "txn"
  [ "$out" = "$(printf 'SUCCESS\n\nOK\n\nrev-key\nc')" ] || fail "txn printed '$out'"
  out=$(printf 'mod("rev-key") < "1"\n\nput txn-key yes\n\nput txn-key no\n\n' |
    ctl --endpoints="$ENDPOINTS" txn) || fail "txn (failure branch)"
  [ "$out" = "$(printf 'FAILURE\n\nOK')" ] || fail "txn (failure branch) printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" get txn-key --print-value-only) || fail "get txn-key"
  [ "$out" = no ] || fail "txn-key is '$out', expected no"

  step "member list, endpoint status and health"
  out=$(ctl --endpoints="$ENDPOINTS" member list) || fail "member list"
  [ "$(grep -c ', started, ' <<<"$out")" = 3 ] || fail "member list printed '$out'"
  for ep in "${EP[@]}"; do
    grep -q "http://$ep, false$" <<<"$out" || fail "member list lacks client URL $ep: '$out'"
  done
  out=$(ctl --endpoints="$ENDPOINTS" endpoint status) || fail "endpoint status"
  [ "$(grep -c ', true, false, ' <<<"$out")" = 1 ] || fail "endpoint status shows no single leader: '$out'"
  leader_ep=$(awk -F', ' '$5 == "true" {print $1}' <<<"$out")
  # One cluster id, not 0, in every member's answers.
  out=$(ctl --endpoints="$ENDPOINTS" endpoint status -w json) || fail "endpoint status -w json"
  CLUSTER_ID=$(grep -o '"cluster_id":[0-9]*' <<<"$out" | sort -u)
  [ "$(grep -c . <<<"$CLUSTER_ID")" = 1 ] && [ "$CLUSTER_ID" != '"cluster_id":0' ] ||
    fail "endpoint status -w json shows cluster ids '$CLUSTER_ID': '$out'"
  CLUSTER_ID=$(printf '%x' "${CLUSTER_ID#*:}")
  ctl --endpoints="$ENDPOINTS" endpoint health >/dev/null 2>&1 || fail "endpoint health"

  step "lease grant, put --lease, timetolive --keys, keep-alive --once, list, revoke"
  out=$(ctl --endpoints="${EP[0]}" lease grant 60) || fail "lease grant"
  lease=$(sed -n 's/^lease \([0-9a-f]*\) granted with TTL(60s)$/\1/p' <<<"$out")
  [ -n "$lease" ] || fail "lease grant printed '$out'"
  ctl --endpoints="${EP[1]}" put --lease="$lease" leased-key v >/dev/null || fail "put --lease"
  out=$(ctl --endpoints="${EP[2]}" lease timetolive "$lease" --keys) || fail "lease timetolive"
  grep -q "granted with TTL(60s), remaining([0-9]*s), attached keys(\[leased-key\])" <<<"$out" ||
    fail "lease timetolive printed '$out'"
  out=$(ctl --endpoints="${EP[1]}" lease keep-alive --once "$lease") || fail "lease keep-alive --once"
  [ "$out" = "lease $lease keepalived with TTL(60)" ] || fail "lease keep-alive --once printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" lease list) || fail "lease list"
  [ "$out" = "$(printf 'found 1 leases\n%s' "$lease")" ] || fail "lease list printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" lease revoke "$lease") || fail "lease revoke"
  [ "$out" = "lease $lease revoked" ] || fail "lease revoke printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" get leased-key) || fail "get leased-key"
  [ -z "$out" ] || fail "the revoked lease's key is still there: '$out'"

  step "watch --prefix from a revision, on a follower"
  from=$(ctl --endpoints="$ENDPOINTS" put w/1 a -w json | revision_of)
  ctl --endpoints="$ENDPOINTS" del w/1 >/dev/null || fail "del w/1"
  ctl --endpoints="$ENDPOINTS" put w/2 b >/dev/null || fail "put w/2"
  follower=${EP[0]}
  [ "$follower" != "$leader_ep" ] || follower=${EP[1]}
  out=$(timeout 5 etcdctl --endpoints="$follower" watch w/ --prefix --rev="$from" 2>&1 || true)
  [ "$out" = "$(printf 'PUT\nw/1\na\nDELETE\nw/1\n\nPUT\nw/2\nb')" ] || fail "watch printed '$out'"

  step "move-leader"
  target=$(ctl --endpoints="$ENDPOINTS" member list | awk -F', ' -v l="http://$leader_ep" '$5 != l {print $1; exit}')
  out=$(ctl --endpoints="$leader_ep" move-leader "$target") || fail "move-leader $target"
  grep -q "^Leadership transferred from [0-9a-f]* to $target$" <<<"$out" || fail "move-leader printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" endpoint status) || fail "endpoint status after move-leader"
  [ "$(awk -F', ' '$5 == "true" {print $2}' <<<"$out")" = "$target" ] || fail "member $target does not lead: '$out'"

  step "sorted gets: by modification and by creation"
  for k in sort/b sort/a sort/c sort/b; do
    ctl --endpoints="$ENDPOINTS" put "$k" "$k" >/dev/null || fail "put $k"
  done
  out=$(ctl --endpoints="$ENDPOINTS" get sort/ --prefix --sort-by=MODIFY --order=DESCEND --keys-only) ||
    fail "get --sort-by=MODIFY --order=DESCEND"
  [ "$out" = "$(printf 'sort/b\n\nsort/c\n\nsort/a\n')" ] || fail "get --sort-by=MODIFY --order=DESCEND printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" get sort/ --prefix --sort-by=CREATE --order=ASCEND --keys-only) ||
    fail "get --sort-by=CREATE --order=ASCEND"
  [ "$out" = "$(printf 'sort/b\n\nsort/a\n\nsort/c\n')" ] || fail "get --sort-by=CREATE --order=ASCEND printed '$out'"

  step "snapshot save (one endpoint)"
  out=$(ctl --endpoints="${EP[1]}" snapshot save "$1/snap.db") || fail "snapshot save"
  grep -q "^Snapshot saved at $1/snap.db$" <<<"$out" || fail "snapshot save printed '$out'"
  [ -s "$1/snap.db" ] || fail "snapshot save left no file"

  step "compaction"
  rev=$(ctl --endpoints="$ENDPOINTS" put cmp a -w json | revision_of)
  ctl --endpoints="$ENDPOINTS" put cmp b >/dev/null || fail "put cmp b"
  out=$(ctl --endpoints="$ENDPOINTS" compaction "$((rev + 1))") || fail "compaction"
  [ "$out" = "compacted revision $((rev + 1))" ] || fail "compaction printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" get cmp --rev="$((rev + 1))" --print-value-only) || fail "get at the compact revision"
  [ "$out" = b ] || fail "get cmp at the compact revision printed '$out'"
  if out=$(ctl --endpoints="$ENDPOINTS" get cmp --rev="$rev" 2>&1); then fail "a compacted read succeeded: '$out'"; fi
  grep -q "etcdserver: mvcc: required revision has been compacted" <<<"$out" || fail "compacted read: '$out'"

  step "lock and elect (clientv3's concurrency recipes)"
  out=$(ctl --endpoints="$ENDPOINTS" lock etcdctl-lock echo held) || fail "lock"
  [ "$out" = held ] || fail "lock printed '$out'"
  timeout 10 etcdctl --endpoints="${EP[0]}" elect etcdctl-election first >"$1/elect.out" 2>&1 &
  campaign=$!
  wait_for 8 grep -q first "$1/elect.out" || fail "elect: no leader proclaimed: $(cat "$1/elect.out")"
  out=$(timeout 3 etcdctl --endpoints="${EP[1]}" elect -l etcdctl-election 2>/dev/null || true)
  if ! grep -q "^etcdctl-election/[0-9a-f]*$" <<<"$out" || ! grep -q "^first$" <<<"$out"; then
    fail "elect -l printed '$out'"
  fi
  kill "$campaign" 2>/dev/null || true
  wait "$campaign" 2>/dev/null || true

  step "member add --learner, member promote, member update, member remove"
  local ports peer id initial
  ports=$(free_base_port 2)
  peer=http://127.0.0.1:$((ports + 1))
  out=$(ctl --endpoints="$ENDPOINTS" member add extra --learner --peer-urls="$peer") || fail "member add"
  # etcdctl prints ids as %16x: padded with spaces when small.
  id=$(sed -n "s/^Member  *\([0-9a-f]*\) added to cluster  *$CLUSTER_ID\$/\1/p" <<<"$out")
  initial=$(sed -n 's/^ETCD_INITIAL_CLUSTER="\(.*\)"$/\1/p' <<<"$out")
  [ -n "$id" ] && grep -q "extra=$peer" <<<"$initial" || fail "member add printed '$out'"
  grep -q '^ETCD_INITIAL_CLUSTER_STATE="existing"$' <<<"$out" || fail "member add printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" member list) || fail "member list"
  grep -q "^$id, .*, $peer, .*, true$" <<<"$out" || fail "member list lacks learner $id: '$out'"
  start_extra_member "$1" "$id" "$initial" "$((ports + 1))" "$((ports + 2))"
  wait_for 30 promote_member "$id" || fail "member promote $id: '$(promote_member "$id" 2>&1)'"
  out=$(ctl --endpoints="$ENDPOINTS" member list) || fail "member list"
  grep -q "^$id, .*, $peer, .*, false$" <<<"$out" || fail "member $id is not a voter: '$out'"
  # The new member learnt the cluster's id.
  out=$(ctl --endpoints="$EXTRA_CLIENT" endpoint status -w json) || fail "endpoint status of $id"
  [ "$(grep -o '"cluster_id":[0-9]*' <<<"$out" | sed 's/.*://' | xargs printf '%x')" = "$CLUSTER_ID" ] ||
    fail "member $id answers with another cluster id than $CLUSTER_ID: '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" member update "$id" --peer-urls="$peer") || fail "member update"
  grep -q "^Member  *$id updated in cluster  *[0-9a-f]*$" <<<"$out" || fail "member update printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" member remove "$id") || fail "member remove"
  grep -q "^Member  *$id removed from cluster  *[0-9a-f]*$" <<<"$out" || fail "member remove printed '$out'"
  kill_wait TERM "$EXTRA_PID"
  out=$(ctl --endpoints="$ENDPOINTS" member list) || fail "member list"
  [ "$(grep -c . <<<"$out")" = 3 ] && ! grep -q "^$id, " <<<"$out" || fail "member list after remove: '$out'"
  ctl --endpoints="$ENDPOINTS" put after-remove ok >/dev/null || fail "put after member remove"
}

# The learner added by the suite, on TARGET's server: $1 the scratch
# directory, $2 its id (hex, as etcdctl prints it), $3 the initial cluster
# etcdctl printed, $4 its peer port, $5 (etcd) its client port. Sets EXTRA_PID.
start_extra_member() {
  if [ "$TARGET" = etcd ]; then
    etcd --name extra --data-dir "$1/extra" \
      --listen-client-urls "http://127.0.0.1:$5" --advertise-client-urls "http://127.0.0.1:$5" \
      --listen-peer-urls "http://127.0.0.1:$4" --initial-advertise-peer-urls "http://127.0.0.1:$4" \
      --initial-cluster "$3" --initial-cluster-state existing --logger zap >"$1/extra.log" 2>&1 &
    EXTRA_CLIENT=127.0.0.1:$5
  else
    mkdir -p "$1/extra/logs"
    "$RAFTKV_BIN_DIR/raftkv-server" --id="$((16#$2))" --join --listen_address="127.0.0.1:$4" \
      --cluster_file="$RAFTKV_DATA/cluster.conf" --data_dir="$1/extra/data" --log_dir="$1/extra/logs" \
      >"$1/extra.log" 2>&1 &
    EXTRA_CLIENT=127.0.0.1:$4
  fi
  EXTRA_PID=$!
  on_exit kill -9 "$EXTRA_PID"
}
# The space quota (both clusters run with QUOTA bytes): puts of 512 KiB
# until one is refused with etcd's error, which raises the NOSPACE alarm;
# while it is raised a put is refused; deleting, compacting, defragmenting
# (nothing to do on raftkv) and disarming let writes in again.
QUOTA=$((8 << 20))
nospace_raised() { ctl --endpoints="$ENDPOINTS" alarm list | grep -q "^memberID:[0-9]* alarm:NOSPACE *$"; }
quota_suite() {
  step "the space quota: database space exceeded, alarm list, del, compact, defrag, alarm disarm"
  head -c $((512 << 10)) /dev/zero | tr '\0' v >"$1/value"
  local i out rev
  for i in $(seq 1 40); do
    out=$(ctl --endpoints="$ENDPOINTS" put "quota/$i" <"$1/value" 2>&1) || break
  done
  grep -q "etcdserver: mvcc: database space exceeded" <<<"$out" ||
    fail "put $i of 512 KiB under a quota of $QUOTA bytes printed '$out'"
  wait_for 10 nospace_raised ||
    fail "alarm list printed '$(ctl --endpoints="$ENDPOINTS" alarm list 2>&1)'"
  out=$(ctl --endpoints="${EP[1]}" put quota/small v 2>&1) && fail "a put was accepted under the NOSPACE alarm"
  grep -q "database space exceeded" <<<"$out" || fail "a put under the NOSPACE alarm printed '$out'"
  ctl --endpoints="$ENDPOINTS" del --prefix quota/ >/dev/null || fail "del under the NOSPACE alarm"
  rev=$(ctl --endpoints="$ENDPOINTS" get quota/ -w json | revision_of)
  ctl --endpoints="$ENDPOINTS" compact "$rev" >/dev/null || fail "compact under the NOSPACE alarm"
  ctl --endpoints="$ENDPOINTS" defrag >/dev/null || fail "defrag under the NOSPACE alarm"
  out=$(ctl --endpoints="$ENDPOINTS" alarm disarm) || fail "alarm disarm"
  grep -q "^memberID:[0-9]* alarm:NOSPACE *$" <<<"$out" || fail "alarm disarm printed '$out'"
  out=$(ctl --endpoints="$ENDPOINTS" alarm list) || fail "alarm list"
  [ -z "$out" ] || fail "alarm list after disarm printed '$out'"
  ctl --endpoints="$ENDPOINTS" put quota/small v >/dev/null || fail "put after alarm disarm"
  ctl --endpoints="$ENDPOINTS" del quota/small >/dev/null || fail "del quota/small"
}

# Succeeds once the learner $1 is promoted (it must catch up first).
promote_member() {
  local out
  out=$(ctl --endpoints="$ENDPOINTS" member promote "$1" 2>&1) || { echo "$out" >&2; return 1; }
  grep -q "^Member  *$1 promoted in cluster  *[0-9a-f]*$" <<<"$out"
}

step "etcd $(etcd --version | sed -n 's/^etcd Version: //p'): starting 3 members"
start_etcd_cluster "$WORK" --quota-backend-bytes="$QUOTA"
mkdir -p "$WORK/on-etcd" "$WORK/on-raftkv"
TARGET=etcd
suite "$WORK/on-etcd"
quota_suite "$WORK/on-etcd"
# All the keys with their revisions and the header's revision (etcdctl -w json).
dump() { ctl --endpoints="$1" get "" --prefix -w json; }
step "etcd: a lease with a key, then etcdctl snapshot save (bracketed by identical dumps)"
out=$(ctl --endpoints="${EP[0]}" lease grant 600) || fail "lease grant on etcd"
etcd_lease=$(sed -n 's/^lease \([0-9a-f]*\) granted with TTL(600s)$/\1/p' <<<"$out")
[ -n "$etcd_lease" ] || fail "lease grant printed '$out'"
ctl --endpoints="$ENDPOINTS" put --lease="$etcd_lease" import/leased held >/dev/null || fail "put --lease"
for attempt in 1 2 3; do
  dump "${EP[0]}" >"$WORK/etcd-before.json" || fail "get -w json on etcd"
  ctl --endpoints="${EP[0]}" snapshot save "$WORK/on-etcd/final.db" >/dev/null || fail "snapshot save on etcd"
  dump "${EP[0]}" >"$WORK/etcd-after.json" || fail "get -w json on etcd"
  ! cmp -s "$WORK/etcd-before.json" "$WORK/etcd-after.json" || break
  [ "$attempt" -lt 3 ] || fail "etcd's keys kept changing around snapshot save"
done
# A read at the revision before the last (history above the compaction).
past_rev=$(( $(revision_of <"$WORK/etcd-before.json") - 1 ))
ctl --endpoints="${EP[0]}" get "" --prefix --rev="$past_rev" -w json >"$WORK/etcd-past.json" ||
  fail "get --rev=$past_rev on etcd"
_stop_etcd
step "raftkv: starting 3 members"
RAFTKV_SERVER_FLAGS="${RAFTKV_SERVER_FLAGS:-} --quota_backend_bytes=$QUOTA" start_test_cluster 3 etcdctl
TARGET=raftkv
suite "$WORK/on-raftkv"
quota_suite "$WORK/on-raftkv"
step "raftkv: etcdctl's snapshot file restores a member (raftkvctl snapshot restore)"
printf '1 127.0.0.1:1\n' >"$WORK/restore.conf"
"$RAFTKV_BIN_DIR/raftkvctl" snapshot restore "$WORK/on-raftkv/snap.db" --data-dir="$WORK/restored" --id=1 \
  --cluster_file="$WORK/restore.conf" || fail "raftkvctl snapshot restore of etcdctl's file"

step "raftkv: etcd's own snapshot (a bbolt file) restores a new member with etcd's keys, revisions and lease"
IMPORTED="$WORK/imported"
stop_cluster_at_exit "$IMPORTED"
IMPORT_PORT=$(free_base_port 3)
printf '1 127.0.0.1:%s\n' "$((IMPORT_PORT + 1))" >"$WORK/imported.conf"
out=$("$RAFTKV_BIN_DIR/raftkvctl" snapshot restore "$WORK/on-etcd/final.db" --data-dir="$IMPORTED/node1/data" \
  --id=1 --cluster_file="$WORK/imported.conf") || fail "raftkvctl snapshot restore of etcd's snapshot: $out"
echo "$out"
grep -q "^Imported etcd database $WORK/on-etcd/final.db: revision " <<<"$out" || fail "restore printed '$out'"
IMPORT_EPS=$(RAFTKV_DATA="$IMPORTED" RAFTKV_BASE_PORT="$IMPORT_PORT" bash "$REPO_ROOT/scripts/cluster.sh" start 1 |
  sed -n 's/^ENDPOINTS=//p')
[ -n "$IMPORT_EPS" ] || fail "the member restored from etcd's snapshot did not start"
dump "$IMPORT_EPS" >"$WORK/imported.json" || fail "get -w json on the restored member"
ctl --endpoints="$IMPORT_EPS" get "" --prefix --rev="$past_rev" -w json >"$WORK/imported-past.json" ||
  fail "get --rev=$past_rev on the restored member"
# compare_dumps ETCD RAFTKV: the same keys, values, revisions, versions and
# leases, and the same header revision.
compare_dumps() {
  python3 - "$1" "$2" <<'PY'
import json, sys
etcd, raftkv = (json.load(open(p)) for p in sys.argv[1:3])
fields = ("key", "value", "create_revision", "mod_revision", "version", "lease")
def keys(answer):
    return {kv["key"]: {f: kv.get(f, 0) for f in fields} for kv in answer.get("kvs", [])}
problems = []
if etcd["header"]["revision"] != raftkv["header"]["revision"]:
    problems.append("header revision %s, etcd's %s" % (raftkv["header"]["revision"], etcd["header"]["revision"]))
was, now = keys(etcd), keys(raftkv)
problems += ["missing key %r" % k for k in sorted(was.keys() - now.keys())]
problems += ["unexpected key %r" % k for k in sorted(now.keys() - was.keys())]
problems += ["key %r: %s, etcd's %s" % (k, now[k], was[k]) for k in sorted(was.keys() & now.keys()) if now[k] != was[k]]
if len(was) < 5:
    problems.append("etcd had only %d keys" % len(was))
if not problems:
    print("%d keys and revision %s as in etcd" % (len(was), etcd["header"]["revision"]))
print("\n".join(problems), file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}
compare_dumps "$WORK/etcd-before.json" "$WORK/imported.json" || fail "the restored member differs from etcd"
compare_dumps "$WORK/etcd-past.json" "$WORK/imported-past.json" ||
  fail "the restored member differs from etcd at revision $past_rev"
out=$(ctl --endpoints="$IMPORT_EPS" lease timetolive "$etcd_lease" --keys) || fail "lease timetolive on the restored member"
grep -q "granted with TTL(600s), remaining([0-9]*s), attached keys(\[import/leased\])" <<<"$out" ||
  fail "lease timetolive on the restored member printed '$out'"
echo "etcdctl_test: OK (etcdctl $(etcdctl version | sed -n 's/^etcdctl version: //p') against etcd $(etcd --version | sed -n 's/^etcd Version: //p') and raftkv)"
