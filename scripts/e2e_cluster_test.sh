#!/usr/bin/env bash
# Acceptance test of the core issue through the user-facing tools: cluster.sh
# starts 3 nodes; raftkvctl put/get/del/txn/batch/watch/lease work against every node; after
# `cluster.sh kill` of the leader a new leader serves within 3 seconds (default
# timeouts) and every acknowledged write is there; the restarted node catches
# up; `cluster.sh add` / `remove` change the membership and raftkvctl
# `member list` / `snapshot` work. Run by ctest with RAFTKV_BIN_DIR set.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# fail, start_test_cluster
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
: "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory}"
CLUSTER="$REPO_ROOT/scripts/cluster.sh"
CTL="$RAFTKV_BIN_DIR/raftkvctl"

start_test_cluster 3 e2e

# put/get through each single endpoint (followers redirect to the leader).
for i in 0 1 2; do
  out=$("$CTL" --endpoints="${EP[$i]}" put "via$i" "value$i") || fail "put via ${EP[$i]}"
  [ "$out" = OK ] || fail "put printed '$out', expected OK"
done
for i in 0 1 2; do
  v=$("$CTL" --endpoints="${EP[$(( (i + 1) % 3 ))]}" get --print-value-only "via$i") || fail "get via$i"
  [ "$v" = "value$i" ] || fail "get via$i returned '$v'"
done
# get prints the key, then the value (etcdctl); nothing, exit 0, for an absent key.
out=$("$CTL" --endpoints="$ENDPOINTS" get via0) || fail "get via0"
[ "$out" = "$(printf 'via0\nvalue0')" ] || fail "get via0 printed '$out'"
out=$("$CTL" --endpoints="$ENDPOINTS" get no-such-key) || fail "get of an absent key failed"
[ -z "$out" ] || fail "get of an absent key printed '$out'"
out=$("$CTL" --endpoints="$ENDPOINTS" get via --prefix --keys-only) || fail "get --prefix"
[ "$out" = "$(printf 'via0\n\nvia1\n\nvia2\n')" ] || fail "get via --prefix --keys-only printed '$out'"
for i in $(seq 1 300); do
  "$CTL" --endpoints="$ENDPOINTS" put "k$i" "v$i" >/dev/null || fail "put k$i"
done
out=$("$CTL" --endpoints="$ENDPOINTS" del k300) || fail "del k300"
[ "$out" = 1 ] || fail "del k300 printed '$out', expected 1 (deleted)"
out=$("$CTL" --endpoints="$ENDPOINTS" get k --prefix --count-only) || fail "get --count-only"
[ "$out" = 299 ] || fail "get k --prefix --count-only printed '$out', expected 299"
# txn: etcdctl's format on stdin; SUCCESS and the responses.
out=$(printf 'value("k1") = "v1"\n\nput txn-key yes\nget k1\n\nput txn-key no\n' |
  "$CTL" --endpoints="$ENDPOINTS" txn) || fail "txn"
[ "$out" = "$(printf 'SUCCESS\n\nOK\n\nk1\nv1')" ] || fail "txn printed '$out'"

# etcdctl's habits: $ETCDCTL_ENDPOINTS (after --endpoints and
# $RAFTKV_ENDPOINTS), URL endpoints, --command-timeout / --dial-timeout,
# get --from-key, txn -i with etcdctl's prompts (the same output as etcdctl's
# when it is installed), "did you mean" for mistakes.
out=$(env -u RAFTKV_ENDPOINTS ETCDCTL_ENDPOINTS="http://${EP[2]},http://${EP[1]}" "$CTL" get --print-value-only k1) ||
  fail "get through \$ETCDCTL_ENDPOINTS"
[ "$out" = v1 ] || fail "get through \$ETCDCTL_ENDPOINTS printed '$out'"
out=$(RAFTKV_ENDPOINTS="$ENDPOINTS" ETCDCTL_ENDPOINTS="not an endpoint" "$CTL" get --print-value-only k1) ||
  fail "\$RAFTKV_ENDPOINTS does not win over \$ETCDCTL_ENDPOINTS"
out=$(RAFTKV_ENDPOINTS="bad:x" ETCDCTL_ENDPOINTS="bad:y" "$CTL" --endpoints="${EP[0]}" get --print-value-only k1) ||
  fail "--endpoints does not win over the environment"
rc=0; err=$(env -u RAFTKV_ENDPOINTS ETCDCTL_ENDPOINTS="https://${EP[0]}" "$CTL" get k1 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "an https endpoint without a CA exited $rc, expected 2"
grep -qF "ETCDCTL_ENDPOINTS: https://${EP[0]} is an https endpoint but no CA certificate was given: pass --cacert" <<<"$err" ||
  fail "an https endpoint without a CA printed '$err'"
out=$("$CTL" --endpoints="$ENDPOINTS" --command-timeout=3s --dial-timeout=2s get --print-value-only k1) ||
  fail "get with --command-timeout and --dial-timeout"
[ "$out" = v1 ] || fail "get with etcdctl's timeouts printed '$out'"
rc=0; err=$("$CTL" --endpoints=127.0.0.1:1 --dial-timeout=300ms get k1 2>&1) || rc=$?
[ "$rc" = 1 ] || fail "--dial-timeout to a closed port exited $rc, expected 1"
[ "$err" = "error: DEADLINE_EXCEEDED: no endpoint connected within --dial-timeout=300ms: 127.0.0.1:1 (connection failing)" ] ||
  fail "--dial-timeout to a closed port printed '$err'"
for bad in "--command-timeout=5" "--dial-timeout=-1s" "--command-timeout=3s --timeout_ms=100"; do
  rc=0; "$CTL" --endpoints="$ENDPOINTS" $bad get k1 >/dev/null 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "raftkvctl $bad exited $rc, expected 2"
done
"$CTL" --endpoints="$ENDPOINTS" put zz-1 a >/dev/null && "$CTL" --endpoints="$ENDPOINTS" put zz-2 b >/dev/null ||
  fail "put zz-*"
out=$("$CTL" --endpoints="$ENDPOINTS" get --from-key zz-1 --keys-only) || fail "get --from-key"
[ "$out" = "$(printf 'zz-1\n\nzz-2\n')" ] || fail "get --from-key zz-1 --keys-only printed '$out'"
txn_in='value("k1") = "v1"\nmod("k1") > "0"\n\nput txn-i yes\nget k1\n\nput txn-i no\n\nnot read\n'
out=$(printf "$txn_in" | "$CTL" --endpoints="$ENDPOINTS" txn -i) || fail "txn -i"
[ "$out" = "$(printf 'compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\nSUCCESS\n\nOK\n\nk1\nv1')" ] ||
  fail "txn -i printed '$out'"
txn_fail='version("k1") != "1"\ncreate("no-such-key") = "0"\n\nput never yes\n\ndel zz- --prefix\nget k1\n\n'
out=$(printf "$txn_fail" | "$CTL" --endpoints="$ENDPOINTS" txn --interactive) || fail "txn --interactive"
[ "$out" = "$(printf 'compares:\nsuccess requests (get, put, del):\nfailure requests (get, put, del):\nFAILURE\n\n2\n\nk1\nv1')" ] ||
  fail "txn --interactive (failure) printed '$out'"
if command -v etcdctl >/dev/null; then
  out=$(printf "$txn_in" | "$CTL" --endpoints="$ENDPOINTS" txn -i)
  want=$(printf "$txn_in" | ETCDCTL_API=3 etcdctl --endpoints="$ENDPOINTS" txn -i) || fail "etcdctl txn -i"
  [ "$out" = "$want" ] || fail "txn -i printed '$out', etcdctl '$want'"
fi
rc=0; err=$("$CTL" --endpoints="$ENDPOINTS" gte k1 2>&1 >/dev/null) || rc=$?
[ "$rc" = 2 ] && [ "$(head -1 <<<"$err")" = 'raftkvctl: unknown command "gte" (did you mean "get"?)' ] ||
  fail "a mistyped command exited $rc: $err"
rc=0; err=$("$CTL" --endpoints="$ENDPOINTS" get k1 --prefx 2>&1 >/dev/null) || rc=$?
[ "$rc" = 2 ] && [ "$(head -1 <<<"$err")" = 'raftkvctl: unknown flag --prefx (did you mean --prefix?)' ] ||
  fail "a mistyped flag exited $rc: $err"
rc=0; err=$("$CTL" --endpoints="$ENDPOINTS" defrag 2>&1 >/dev/null) || rc=$?
[ "$rc" = 2 ] && grep -q "use etcdctl: raftkv serves etcd's API" <<<"$err" || fail "defrag exited $rc: $err"
echo "etcdctl habits: ETCDCTL_ENDPOINTS, timeouts, --from-key, txn -i, did you mean"
# batch: several ops as one entry; a malformed batch is a usage error (exit 2).
out=$("$CTL" --endpoints="$ENDPOINTS" batch put b1 one put b2 two del via0) || fail "batch"
[ "$out" = OK ] || fail "batch printed '$out', expected OK"
[ "$("$CTL" --endpoints="$ENDPOINTS" get --print-value-only b2)" = two ] || fail "batch put b2 not applied"
[ -z "$("$CTL" --endpoints="$ENDPOINTS" get via0)" ] || fail "batch del via0 not applied"
rc=0; "$CTL" --endpoints="$ENDPOINTS" batch put only-key 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "malformed batch exited $rc, expected 2"

# --help / -h / help: raftkvctl's own usage on stdout, exit 0; a usage error:
# one line and a hint on stderr, exit 2; version / --version: the version,
# the git commit and the API.
for h in --help -h help; do
  out=$("$CTL" $h) || fail "raftkvctl $h exited non-zero"
  grep -q '^  raftkvctl \[flags\] get KEY' <<<"$out" || fail "raftkvctl $h printed no usage"
  if grep -q -e '--flagfile\|--tryfromenv' <<<"$out"; then fail "raftkvctl $h prints gflags' internals"; fi
done
rc=0; err=$("$CTL" --endpoints="$ENDPOINTS" frobnicate 2>&1 >/dev/null) || rc=$?
[ "$rc" = 2 ] || fail "an unknown command exited $rc, expected 2"
[ "$(wc -l <<<"$err")" = 2 ] || fail "a usage error printed $(wc -l <<<"$err") lines: $err"
[ "$(head -1 <<<"$err")" = 'raftkvctl: unknown command "frobnicate"' ] || fail "usage error: $err"
for v in --version version; do
  out=$("$CTL" $v) || fail "raftkvctl $v exited non-zero"
  grep -qE '^raftkvctl version: [0-9]+\.[0-9]+\.[0-9]+$' <<<"$out" || fail "raftkvctl $v printed '$out'"
  grep -qE '^git commit: ([0-9a-f]{12}(-dirty)?|unknown)$' <<<"$out" || fail "raftkvctl $v printed '$out'"
  grep -qx 'API version: raftkv.v1' <<<"$out" || fail "raftkvctl $v printed '$out'"
done

# -w json: the API's response messages through protobuf's JSON printer
# (bytes in base64); -w table: columns; an unknown format is a usage error.
out=$("$CTL" --endpoints="$ENDPOINTS" -w json get k1) || fail "get -w json"
python3 -c '
import base64, json, sys
r = json.loads(sys.argv[1])
kv = r["kvs"][0]
assert base64.b64decode(kv["key"]) == b"k1" and base64.b64decode(kv["value"]) == b"v1", r
assert int(kv["mod_revision"]) > 0 and int(r["header"]["revision"]) >= int(kv["mod_revision"]), r
' "$out" || fail "get -w json printed '$out'"
out=$("$CTL" --endpoints="$ENDPOINTS" --write-out=json put jk jv) || fail "put --write-out=json"
python3 -c 'import json, sys; assert int(json.loads(sys.argv[1])["revision"]) > 0' "$out" ||
  fail "put -w json printed '$out'"
out=$("$CTL" --endpoints="$ENDPOINTS" get k1 -w table) || fail "get -w table"
head -1 <<<"$out" | grep -q '^KEY  *VALUE  *CREATE_REVISION  *MOD_REVISION  *VERSION  *LEASE$' ||
  fail "get -w table printed '$out'"
grep -qE '^k1  +v1  +[0-9]+  +[0-9]+  +1  +-$' <<<"$out" || fail "get -w table printed '$out'"
out=$(printf 'version("k1") = "1"\n\nget k1\n\n\n' | "$CTL" --endpoints="$ENDPOINTS" txn -w json) || fail "txn -w json"
python3 -c 'import json, sys; assert json.loads(sys.argv[1])["succeeded"] is True' "$out" || fail "txn -w json printed '$out'"
rc=0; "$CTL" --endpoints="$ENDPOINTS" -w yaml get k1 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "-w yaml exited $rc, expected 2"
rc=0; "$CTL" --endpoints="$ENDPOINTS" -w table put k1 v 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "put -w table exited $rc, expected 2"
# The value from standard input when it is omitted, as is (a 200 KB value
# does not fit in an argument list).
printf 'from stdin' | "$CTL" --endpoints="$ENDPOINTS" put stdin-key >/dev/null || fail "put from stdin"
[ "$("$CTL" --endpoints="$ENDPOINTS" get --print-value-only stdin-key)" = "from stdin" ] || fail "put from stdin stored the wrong value"
head -c 200000 /dev/urandom | base64 -w0 >"$RAFTKV_DATA/big.value"
"$CTL" --endpoints="$ENDPOINTS" put big-key <"$RAFTKV_DATA/big.value" >/dev/null || fail "put of a 200 KB value from stdin"
"$CTL" --endpoints="$ENDPOINTS" get --print-value-only big-key | head -c -1 | cmp -s - "$RAFTKV_DATA/big.value" ||
  fail "the 200 KB value read back differs"
# RAFTKV_ENDPOINTS stands in for --endpoints (which wins when both are given).
[ "$(RAFTKV_ENDPOINTS="${EP[1]}" "$CTL" get --print-value-only k1)" = v1 ] || fail "RAFTKV_ENDPOINTS not used"
[ "$(RAFTKV_ENDPOINTS=127.0.0.1:1 "$CTL" --endpoints="$ENDPOINTS" get --print-value-only k1)" = v1 ] ||
  fail "--endpoints should win over RAFTKV_ENDPOINTS"
rc=0; err=$(RAFTKV_ENDPOINTS=nonsense "$CTL" get k1 2>&1) || rc=$?
[ "$rc" = 2 ] && grep -q RAFTKV_ENDPOINTS <<<"$err" || fail "a bad RAFTKV_ENDPOINTS: exit $rc, '$err'"
# endpoint health / status, --cluster: every member from the member list.
out=$("$CTL" --endpoints="${EP[0]}" endpoint health --cluster) || fail "endpoint health --cluster: $out"
[ "$(grep -c ' is healthy: ' <<<"$out")" = 3 ] || fail "endpoint health --cluster printed '$out'"
out=$("$CTL" --endpoints="${EP[1]}" endpoint status --cluster -w json) || fail "endpoint status --cluster -w json"
python3 -c '
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines()]
assert len(rows) == 3, rows
assert sum(1 for r in rows if r["role"] == "leader") == 1, rows
assert all(r["version"] for r in rows), rows
' "$out" || fail "endpoint status --cluster -w json printed '$out'"
out=$("$CTL" --endpoints="$ENDPOINTS" endpoint status) || fail "endpoint status"
[ "$(grep -c ', true, ' <<<"$out")" = 1 ] || fail "endpoint status printed '$out' (one leader expected)"
rc=0; "$CTL" --endpoints="${EP[0]},127.0.0.1:1" --rpc_timeout_ms=500 endpoint health >/dev/null 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "endpoint health with a dead endpoint exited $rc, expected 1"

# grpcurl, as a user would run it, against one follower only: reflection,
# the health check, a write and a read (bytes as base64 in JSON) that the
# follower forwards to the leader.
GRPCURL=$(command -v grpcurl || true)
if [ -z "$GRPCURL" ] && command -v go >/dev/null 2>&1; then
  gobin=$(go env GOBIN); [ -n "$gobin" ] || gobin=$(go env GOPATH)/bin
  [ -x "$gobin/grpcurl" ] && GRPCURL=$gobin/grpcurl
fi
[ -n "$GRPCURL" ] || fail "grpcurl not found (scripts/install-deps.sh installs it with Go)"
follower=$("$CTL" --endpoints="$ENDPOINTS" status --json | python3 -c '
import json, sys
print(next(s["address"] for s in json.load(sys.stdin) if s["role"] == "follower"))')
# Each answer is read whole before it is searched: `grpcurl ... | grep -q`
# under pipefail fails whenever grep stops reading before grpcurl (which
# writes line by line) has written its last line.
services=$("$GRPCURL" -plaintext "$follower" list) || fail "grpcurl list: $services"
grep -qx raftkv.v1.KV <<<"$services" || fail "grpcurl list shows no raftkv.v1.KV: $services"
out=$("$GRPCURL" -plaintext "$follower" grpc.health.v1.Health/Check) || fail "grpcurl health check: $out"
python3 -c 'import json, sys; assert json.loads(sys.argv[1])["status"] == "SERVING"' "$out" ||
  fail "grpcurl health check printed '$out'"
out=$("$GRPCURL" -plaintext "$follower" describe raftkv.v1.PutRequest) ||
  fail "grpcurl describe raftkv.v1.PutRequest: $out"
grep -q 'lease' <<<"$out" || fail "grpcurl describe raftkv.v1.PutRequest shows no lease field: $out"
# "grpcurl" = Z3JwY3VybA==, "works" = d29ya3M=
out=$("$GRPCURL" -plaintext -d '{"key": "Z3JwY3VybA==", "value": "d29ya3M="}' "$follower" raftkv.v1.KV/Put) ||
  fail "grpcurl Put through follower $follower: $out"
out=$("$GRPCURL" -plaintext -d '{"key": "Z3JwY3VybA=="}' "$follower" raftkv.v1.KV/Range) ||
  fail "grpcurl Range through follower $follower: $out"
python3 -c '
import base64, json, sys
kv = json.loads(sys.argv[1])["kvs"][0]
assert base64.b64decode(kv["value"]) == b"works", kv' "$out" || fail "grpcurl Range printed '$out'"
[ "$("$CTL" --endpoints="$ENDPOINTS" get --print-value-only grpcurl)" = works ] || fail "grpcurl's write not visible"
echo "grpcurl through follower $follower: list, health, describe, Put, Range"

# watch from revision 1: the prefix's history, three lines per event; then
# live events, through a follower-first endpoint list.
"$CTL" --endpoints="$ENDPOINTS" put w/a 1 >/dev/null || fail "put w/a"
"$CTL" --endpoints="$ENDPOINTS" del w/a >/dev/null || fail "del w/a"
watch_out="$RAFTKV_DATA/watch.out"
"$CTL" --endpoints="${EP[2]},${EP[1]},${EP[0]}" watch w/ --prefix --rev=1 >"$watch_out" 2>&1 &
watch_pid=$!
"$CTL" --endpoints="$ENDPOINTS" put w/b 2 >/dev/null || fail "put w/b"
want=$(printf 'PUT\nw/a\n1\nDELETE\nw/a\n\nPUT\nw/b\n2')
for _ in $(seq 1 50); do [ "$(cat "$watch_out")" = "$want" ] && break; sleep 0.1; done
kill "$watch_pid" 2>/dev/null; wait "$watch_pid" 2>/dev/null || true
[ "$(cat "$watch_out")" = "$want" ] || fail "watch w/ --prefix --rev=1 printed '$(cat "$watch_out")'"

# leases: grant, put with it, time-to-live with keys, keep-alive, revoke.
out=$("$CTL" --endpoints="$ENDPOINTS" lease grant 60) || fail "lease grant"
[[ "$out" =~ ^lease\ ([0-9a-f]+)\ granted\ with\ TTL\(60s\)$ ]] || fail "lease grant printed '$out'"
lease=${BASH_REMATCH[1]}
[ "$("$CTL" --endpoints="$ENDPOINTS" put --lease="$lease" leased v)" = OK ] || fail "put --lease"
out=$("$CTL" --endpoints="$ENDPOINTS" lease timetolive "$lease" --keys) || fail "lease timetolive"
[[ "$out" =~ ^lease\ $lease\ granted\ with\ TTL\(60s\),\ remaining\(([0-9]+)s\),\ attached\ keys\(\[leased\]\)$ ]] ||
  fail "lease timetolive printed '$out'"
out=$("$CTL" --endpoints="$ENDPOINTS" lease keep-alive --once "$lease") || fail "lease keep-alive"
[ "$out" = "lease $lease keepalived with TTL(60)" ] || fail "lease keep-alive printed '$out'"
[ "$("$CTL" --endpoints="$ENDPOINTS" lease revoke "$lease")" = "lease $lease revoked" ] || fail "lease revoke"
[ -z "$("$CTL" --endpoints="$ENDPOINTS" get leased)" ] || fail "leased key still there after the revoke"
[ "$("$CTL" --endpoints="$ENDPOINTS" lease timetolive "$lease")" = "lease $lease already expired" ] ||
  fail "timetolive of a revoked lease"
# expiry: a 2 s lease that nobody renews takes its key with it.
out=$("$CTL" --endpoints="$ENDPOINTS" lease grant 2) || fail "lease grant 2"
[[ "$out" =~ ^lease\ ([0-9a-f]+)\ granted ]] || fail "lease grant printed '$out'"
[ "$("$CTL" --endpoints="$ENDPOINTS" put --lease="${BASH_REMATCH[1]}" short v)" = OK ] || fail "put short"
gone=0
for _ in $(seq 1 60); do
  [ -z "$("$CTL" --endpoints="$ENDPOINTS" get short)" ] && { gone=1; break; }
  sleep 0.1
done
[ "$gone" = 1 ] || fail "the key of an expired 2 s lease is still there after 6 s"
rc=0; "$CTL" --endpoints="$ENDPOINTS" put --lease=abcdef nolease v 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "put on an unknown lease exited $rc, expected 1"

status_json=$("$CTL" --endpoints="$ENDPOINTS" status --json)
leader=$(python3 -c '
import json, sys
nodes = json.loads(sys.argv[1])
assert len(nodes) == 3, nodes
for n in nodes:
    assert set(n) >= {"id", "address", "role", "term", "commit_index", "applied_index", "leader_id"}, n
leaders = [n["id"] for n in nodes if n["role"] == "leader"]
assert len(leaders) == 1, nodes
print(leaders[0])' "$status_json") || fail "bad status: $status_json"

"$CLUSTER" kill "$leader"
start=$(date +%s%N)
"$CTL" --endpoints="$ENDPOINTS" --timeout_ms=10000 put after-kill yes >/dev/null || fail "no write after killing the leader"
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "new leader served a write ${elapsed_ms} ms after SIGKILL of leader $leader"
[ "$elapsed_ms" -lt 3000 ] || fail "failover took ${elapsed_ms} ms (limit 3000)"

for i in $(seq 1 299); do
  v=$("$CTL" --endpoints="$ENDPOINTS" get --print-value-only "k$i") || fail "get k$i after failover"
  [ "$v" = "v$i" ] || fail "k$i = '$v' after failover"
done
out=$("$CTL" --endpoints="$ENDPOINTS" get k300) || fail "get k300 after failover"
[ -z "$out" ] || fail "deleted k300 is back"
[ "$("$CTL" --endpoints="$ENDPOINTS" get --print-value-only b1)" = one ] || fail "batched b1 lost after failover"
[ "$("$CTL" --endpoints="$ENDPOINTS" get --print-value-only txn-key)" = yes ] || fail "txn-key lost after failover"

"$CLUSTER" restart "$leader"
target=$("$CTL" --endpoints="$ENDPOINTS" status --json | python3 -c '
import json, sys
print(max(n["commit_index"] for n in json.load(sys.stdin) if n["role"] == "leader"))')
caught_up=0
for _ in $(seq 1 100); do
  applied=$("$CTL" --endpoints="${EP[$((leader - 1))]}" status --json | python3 -c '
import json, sys
print(json.load(sys.stdin)[0]["applied_index"])')
  if [ "$applied" -ge "$target" ]; then caught_up=1; break; fi
  sleep 0.1
done
[ "$caught_up" = 1 ] || fail "restarted member $leader did not catch up to $target"
v=$("$CTL" --endpoints="${EP[$((leader - 1))]}" get --consistency=s --print-value-only after-kill) ||
  fail "serializable get on restarted node"
[ "$v" = yes ] || fail "restarted node has after-kill='$v'"

# Membership through cluster.sh: node 4 joins (learner, catches up, promoted),
# then node 1 is removed; the cluster keeps serving through the others.
members_check() {  # $1 = expected "id:role,..." in id order
  python3 -c '
import json, sys
m = json.loads(sys.argv[1])
got = ",".join("%d:%s" % (x["id"], x["role"]) for x in m["members"])
assert m["from_leader"] and m["config_committed"], m
assert got == sys.argv[2], (got, sys.argv[2])' "$("$CLUSTER" members --json)" "$1"
}
"$CLUSTER" add 4 >/dev/null || fail "cluster.sh add 4"
members_check "1:voter,2:voter,3:voter,4:voter" || fail "member list after cluster.sh add 4"
EP4=127.0.0.1:$((RAFTKV_BASE_PORT + 4))
"$CTL" --endpoints="$EP4" put via-node4 yes >/dev/null || fail "put through node 4"
v=$("$CTL" --endpoints="$EP4" get --print-value-only k1) || fail "get k1 through node 4"
[ "$v" = v1 ] || fail "k1 = '$v' through node 4"
"$CLUSTER" remove 1 >/dev/null || fail "cluster.sh remove 1"
members_check "2:voter,3:voter,4:voter" || fail "member list after cluster.sh remove 1"
REST="${EP[1]},${EP[2]},$EP4"
"$CTL" --endpoints="$REST" put after-remove yes >/dev/null || fail "put after removing node 1"
v=$("$CTL" --endpoints="$REST" get --print-value-only via-node4) || fail "get after removing node 1"
[ "$v" = yes ] || fail "via-node4 = '$v'"
out=$("$CTL" --endpoints="$EP4" snapshot) || fail "raftkvctl snapshot on node 4"
case $out in "OK: snapshot of $EP4 at index "*) ;; *) fail "snapshot printed '$out'" ;; esac
# etcdctl's move-leader, and snapshot status of a backup (its SHA-256 as
# snapshot save printed it; a damaged copy is refused).
out=$("$CTL" --endpoints="$REST" move-leader 4) || fail "move-leader 4"
[[ $out == "OK: member 4 is the leader (term "*")" ]] || fail "move-leader 4 printed '$out'"
out=$("$CTL" --endpoints="$REST" snapshot save "$RAFTKV_DATA/backup.snap") || fail "snapshot save"
[[ $out =~ \(revision\ ([0-9]+),\ index\ ([0-9]+),\ ([0-9]+)\ bytes\).*sha256\ ([0-9a-f]{64}) ]] ||
  fail "snapshot save printed '$out'"
want="${BASH_REMATCH[4]}, ${BASH_REMATCH[1]}, "
out=$("$CTL" snapshot status "$RAFTKV_DATA/backup.snap") || fail "snapshot status"
[[ $out == "$want"*", ${BASH_REMATCH[2]}, "* ]] || fail "snapshot status printed '$out', expected '$want...'"
out=$("$CTL" snapshot status "$RAFTKV_DATA/backup.snap" -w table) || fail "snapshot status -w table"
[ "$(head -1 <<<"$out" | tr -s ' ')" = "HASH REVISION TOTAL KEYS TOTAL SIZE INDEX TERM LEASES" ] ||
  fail "snapshot status -w table printed '$out'"
head -c 200 "$RAFTKV_DATA/backup.snap" >"$RAFTKV_DATA/damaged.snap"
rc=0; err=$("$CTL" snapshot status "$RAFTKV_DATA/damaged.snap" 2>&1) || rc=$?
[ "$rc" = 2 ] && [[ $err == "error: snapshot status: Corruption: "* ]] || fail "a damaged snapshot: exit $rc, '$err'"
echo "membership: node 4 added and promoted, node 1 removed, snapshot taken"

# Sanitized builds: stop gracefully (LeakSanitizer runs at exit) and fail on
# any sanitizer report (ASan, LSan, UBSan, TSan) in the servers' output.
# `cluster.sh stop` stops the followers first, so the leader does not try to
# hand leadership to a member that is stopping too.
stop_out=$("$CLUSTER" stop 2>&1) || fail "cluster.sh stop: $stop_out"
case $stop_out in *"(the leader, node "*", last)"*) ;; *) fail "cluster.sh stop printed '$stop_out'" ;; esac
if grep -h "leader shutting down: leadership transfer" "$RAFTKV_DATA"/node*/logs/*INFO* 2>/dev/null; then
  fail "the leader tried to hand leadership over while the whole cluster stopped"
fi
echo "stop: followers first, the leader last without a handover"
if grep -n -A40 -E 'ERROR: (Address|Leak|Thread)Sanitizer|WARNING: ThreadSanitizer|: runtime error: ' \
    "$RAFTKV_DATA"/node*/server.out >&2; then
  fail "sanitizer reports in the server output (above)"
fi

# A secured cluster through cluster.sh: TLS, a client token, the members'
# own secret and an admin token. cluster.sh derives its raftkvctl flags from
# the server flags, so it starts, waits and stops as for a plain cluster;
# raftkvctl takes etcd's URL form of the endpoints.
SECURE=$(mktemp -d /tmp/raftkv-e2e-tls.XXXXXX)
remove_at_exit "$SECURE" "data kept in $SECURE"
"$REPO_ROOT/scripts/gen-certs.sh" "$SECURE/tls" node=IP:127.0.0.1 >/dev/null 2>&1 ||
  fail "gen-certs.sh"
echo client-token >"$SECURE/client.token"
echo members-token >"$SECURE/peer.token"
echo admin-token >"$SECURE/admin.token"
TLS_CLIENT="--tls_ca_file=$SECURE/tls/ca.crt"
export RAFTKV_SERVER_FLAGS="$TLS_CLIENT --tls_cert_file=$SECURE/tls/node.crt --tls_key_file=$SECURE/tls/node.key \
--token_file=$SECURE/client.token --peer_token_file=$SECURE/peer.token --admin_token_file=$SECURE/admin.token"
export RAFTKV_BASE_PORT=$(free_base_port 3)
RAFTKV_DATA=$SECURE/cluster
stop_cluster_at_exit "$RAFTKV_DATA"
ENDPOINTS=$("$CLUSTER" start 3 | sed -n 's/^ENDPOINTS=//p') || fail "cluster.sh start of a TLS cluster"
[ -n "$ENDPOINTS" ] || fail "cluster.sh start (TLS) printed no ENDPOINTS line"
URLS="https://${ENDPOINTS//,/,https://}"
"$CTL" $TLS_CLIENT --token_file="$SECURE/client.token" --endpoints="$URLS" put secured yes >/dev/null ||
  fail "put on the TLS cluster through https:// endpoints"
v=$("$CTL" $TLS_CLIENT --token_file="$SECURE/client.token" --endpoints="http://${ENDPOINTS%%,*}/" \
  get --print-value-only secured) || fail "get through an http:// endpoint"
[ "$v" = yes ] || fail "secured = '$v'"
out=$("$CTL" $TLS_CLIENT --token_file="$SECURE/client.token" --endpoints="$ENDPOINTS" snapshot 2>&1) &&
  fail "the client token took a snapshot: $out"
case $out in *PERMISSION_DENIED*) ;; *) fail "snapshot with the client token printed '$out'" ;; esac
"$CTL" $TLS_CLIENT --token_file="$SECURE/admin.token" --endpoints="$ENDPOINTS" snapshot >/dev/null ||
  fail "snapshot with the admin token"
# etcdctl's spellings of the TLS flags and timeouts.
v=$("$CTL" --cacert="$SECURE/tls/ca.crt" --token_file="$SECURE/client.token" --endpoints="$URLS" \
  --dial-timeout=5s --command-timeout=10s get --print-value-only secured) || fail "get with --cacert"
[ "$v" = yes ] || fail "secured = '$v' with --cacert"
"$CLUSTER" status >/dev/null || fail "cluster.sh status on the TLS cluster"
"$CLUSTER" stop >/dev/null 2>&1 || fail "cluster.sh stop of the TLS cluster"
echo "TLS cluster through cluster.sh: tokens, https:// and http:// endpoints, admin-only snapshot"
echo "e2e_cluster_test: PASS"
