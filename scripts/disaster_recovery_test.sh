#!/usr/bin/env bash
# Disaster recovery end to end, following doc/operations.md with the
# user-facing tools: cluster.sh starts 3 members; raftkvctl writes a few
# hundred keys (single puts, batches, overwrites, deletes, a transaction,
# keys on a lease, a revoked lease); `raftkvctl snapshot save` backs the
# leader up; the whole cluster is destroyed (SIGKILL, data directories
# removed); `raftkvctl snapshot restore` builds three new members on other
# ports from the backup (and refuses a damaged backup, a directory with data
# and an id outside the new cluster, exit 2); cluster.sh starts them, and
# every key comes back with its value, revisions, version and lease, the
# store revision is the backup's, deleted keys stay deleted, the write made
# after the backup is gone, the members are the new ones, and new writes
# work. Run by ctest (disaster_recovery) with RAFTKV_BIN_DIR set.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# fail, step, remove_at_exit, stop_cluster_at_exit
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
: "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory}"
CLUSTER="$REPO_ROOT/scripts/cluster.sh"
CTL="$RAFTKV_BIN_DIR/raftkvctl"
WORK=$(mktemp -d /tmp/raftkv-dr.XXXXXX)
remove_at_exit "$WORK"
OLD="$WORK/old"  # the cluster that is lost
NEW="$WORK/new"  # the one restored from the backup
stop_cluster_at_exit "$OLD"
stop_cluster_at_exit "$NEW"
# Two blocks of ports: the restored members listen elsewhere than the lost
# ones (as on new machines).
. "$REPO_ROOT/scripts/lib/ports.sh"
OLD_PORT=${RAFTKV_BASE_PORT:-$(free_base_port 13)}  # old cluster B+1..3, new B+11..13
NEW_PORT=$((OLD_PORT + 10))
export RAFTKV_BIN_DIR

old_cluster() { RAFTKV_DATA="$OLD" RAFTKV_BASE_PORT="$OLD_PORT" "$CLUSTER" "$@"; }
new_cluster() { RAFTKV_DATA="$NEW" RAFTKV_BASE_PORT="$NEW_PORT" "$CLUSTER" "$@"; }
# Every key with its revisions, through the leader: `get -w json` (the
# RangeResponse in protobuf's JSON mapping: bytes in base64, 64-bit numbers
# as strings, zeros left out) as {"revision", "count", "kvs": [{key, value,
# create_revision, mod_revision, version, lease}]} with plain strings and numbers.
to_plain() {
  python3 -c '
import base64, json, sys
r = json.load(sys.stdin)
n = lambda d, k: int(d.get(k, 0))
s = lambda d, k: base64.b64decode(d.get(k, "")).decode()
print(json.dumps({"revision": n(r.get("header", {}), "revision"), "count": n(r, "count"),
                  "kvs": [{"key": s(kv, "key"), "value": s(kv, "value"),
                           "create_revision": n(kv, "create_revision"), "mod_revision": n(kv, "mod_revision"),
                           "version": n(kv, "version"), "lease": n(kv, "lease")} for kv in r.get("kvs", [])]}))'
}
dump() { "$CTL" --endpoints="$1" -w json get "" --prefix | to_plain; }

# ---- 1. a cluster with data ----
step "starting the cluster that will be lost (ports $((OLD_PORT + 1))-$((OLD_PORT + 3)))"
EPS=$(old_cluster start 3 | sed -n 's/^ENDPOINTS=//p')
[ -n "$EPS" ] || fail "cluster.sh start printed no ENDPOINTS line"
ctl() { "$CTL" --endpoints="$EPS" "$@"; }

step "writing keys"
for i in $(seq 1 150); do
  ctl put "single/$i" "value $i" >/dev/null || fail "put single/$i"
done
for b in 1 2 3; do
  ops=()
  for i in $(seq 1 50); do ops+=(put "batch$b/$i" "b$b-$i"); done
  [ "$(ctl batch "${ops[@]}")" = OK ] || fail "batch $b"
done
for i in $(seq 1 20); do  # overwritten: version 2 and a later mod_revision
  ctl put "single/$i" "second $i" >/dev/null || fail "overwrite single/$i"
done
for i in $(seq 141 150); do
  [ "$(ctl del "single/$i")" = 1 ] || fail "del single/$i"
done
[ "$(ctl del batch3/ --prefix)" = 50 ] || fail "del batch3/ --prefix"
out=$(printf 'value("single/1") = "second 1"\n\nput txn/a yes\nput txn/b also\nget single/1\n\nput txn/a no\n' |
  ctl txn) || fail "txn"
[ "$(head -1 <<<"$out")" = SUCCESS ] || fail "txn printed '$out'"
out=$(ctl lease grant 600) || fail "lease grant"
[[ $out =~ ^lease\ ([0-9a-f]+)\ granted ]] || fail "lease grant printed '$out'"
LEASE=${BASH_REMATCH[1]}
for i in 1 2 3 4 5; do
  [ "$(ctl put --lease="$LEASE" "leased/$i" "l$i")" = OK ] || fail "put leased/$i"
done
out=$(ctl lease grant 600) || fail "second lease grant"
[[ $out =~ ^lease\ ([0-9a-f]+)\ granted ]] || fail "lease grant printed '$out'"
REVOKED=${BASH_REMATCH[1]}
ctl put --lease="$REVOKED" revoked/1 r >/dev/null || fail "put revoked/1"
ctl lease revoke "$REVOKED" >/dev/null || fail "lease revoke"
BEFORE="$WORK/before.json"
dump "$EPS" >"$BEFORE" || fail "get -w json"
count=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["kvs"]))' "$BEFORE")
# 150 - 10 deleted + 100 batched + 2 txn + 5 leased
[ "$count" = 247 ] || fail "the cluster holds $count keys before the backup, expected 247"

# ---- 2. the backup ----
leader_addr=$(ctl status --json | python3 -c '
import json, sys
leaders = [n["address"] for n in json.load(sys.stdin) if n["role"] == "leader"]
assert len(leaders) == 1, leaders
print(leaders[0])') || fail "no single leader in status"
BACKUP="$WORK/backup.snap"
step "snapshot save from the leader $leader_addr"
out=$(ctl --target="$leader_addr" snapshot save "$BACKUP") || fail "snapshot save: $out"
echo "$out"
line=$(head -1 <<<"$out")
[[ $line =~ ^Snapshot\ saved\ at\ $BACKUP\ \(revision\ ([0-9]+),\ index\ ([0-9]+),\ ([0-9]+)\ bytes\)$ ]] ||
  fail "snapshot save printed '$line'"
saved_rev=${BASH_REMATCH[1]}
saved_bytes=${BASH_REMATCH[3]}
want_rev=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["revision"])' "$BEFORE")
[ "$saved_rev" = "$want_rev" ] || fail "the backup is at revision $saved_rev, the cluster at $want_rev"
[ "$(stat -c %s "$BACKUP")" = "$saved_bytes" ] || fail "$BACKUP is not $saved_bytes bytes"
[ ! -e "$BACKUP.part" ] || fail "$BACKUP.part left behind"
sha=$(sha256sum "$BACKUP" | cut -d' ' -f1)
grep -q "sha256 $sha\$" <<<"$out" || fail "the printed SHA-256 is not the file's ($sha)"
# Lost in the disaster: written after the backup.
ctl put after-backup lost >/dev/null || fail "put after-backup"
rc=0; ctl snapshot save 2>/dev/null || rc=$?
[ "$rc" = 2 ] || fail "snapshot save without FILE exited $rc, expected 2"

# ---- 3. the disaster ----
step "destroying the cluster: SIGKILL every member, remove the data"
for i in 1 2 3; do old_cluster kill "$i" 2>/dev/null; done
rm -rf "$OLD"

# ---- 4. restore: refusals first ----
CONF="$WORK/new-cluster.conf"
{
  echo "# the restored cluster"
  for i in 1 2 3; do echo "$i 127.0.0.1:$((NEW_PORT + i))"; done
} >"$CONF"
restore() { "$CTL" snapshot restore "$@"; }
expect_refused() {  # $1: what; $2: text the error must contain; the rest: arguments
  local what=$1 text=$2 rc=0 err
  shift 2
  err=$(restore "$@" 2>&1 >/dev/null) || rc=$?
  [ "$rc" = 2 ] || fail "restore with $what exited $rc, expected 2: $err"
  grep -q -- "$text" <<<"$err" || fail "restore with $what: error does not say '$text': $err"
  echo "refused ($what): $err"
}
step "snapshot restore refuses bad input"
DAMAGED="$WORK/damaged.snap"
cp "$BACKUP" "$DAMAGED"
python3 - "$DAMAGED" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
data[len(data) // 2] ^= 0x01
open(path, "wb").write(data)
PY
expect_refused "a damaged file" "fails verification" \
  "$DAMAGED" --data-dir="$WORK/x1" --id=1 --cluster_file="$CONF"
[ ! -e "$WORK/x1" ] || fail "restore of a damaged file created $WORK/x1"
mkdir -p "$WORK/busy"
echo keep >"$WORK/busy/hardstate"
expect_refused "a directory holding data" "already holds data" \
  "$BACKUP" --data-dir="$WORK/busy" --id=1 --cluster_file="$CONF"
[ "$(ls "$WORK/busy")" = hardstate ] && [ "$(cat "$WORK/busy/hardstate")" = keep ] ||
  fail "restore touched a directory holding data"
expect_refused "an id outside the cluster" "not listed" \
  "$BACKUP" --data-dir="$WORK/x2" --id=4 --cluster_file="$CONF"
expect_refused "no --id" "needs --id" "$BACKUP" --data-dir="$WORK/x3" --cluster_file="$CONF"
expect_refused "a missing file" "does not exist" \
  "$WORK/nothing.snap" --data-dir="$WORK/x4" --id=1 --cluster_file="$CONF"

# ---- 5. restore three new members and start them ----
step "restoring members 1-3 (ports $((NEW_PORT + 1))-$((NEW_PORT + 3)))"
for i in 1 2 3; do
  out=$(restore "$BACKUP" --data-dir="$NEW/node$i/data" --id="$i" --cluster-file="$CONF") ||
    fail "restore of member $i: $out"
  echo "$out"
  grep -q "^Restored $BACKUP (revision $saved_rev, " <<<"$out" || fail "restore printed '$out'"
done
NEW_EPS=$(new_cluster start 3 | sed -n 's/^ENDPOINTS=//p')
[ -n "$NEW_EPS" ] || fail "the restored members did not elect a leader"
[ "$NEW_EPS" = "127.0.0.1:$((NEW_PORT + 1)),127.0.0.1:$((NEW_PORT + 2)),127.0.0.1:$((NEW_PORT + 3))" ] ||
  fail "restored cluster endpoints $NEW_EPS"
nctl() { "$CTL" --endpoints="$NEW_EPS" "$@"; }
nctl status || fail "raftkvctl status on the restored cluster"

# ---- 6. everything is back ----
step "comparing every key"
AFTER="$WORK/after.json"
dump "$NEW_EPS" >"$AFTER" || fail "get -w json on the restored cluster"
python3 - "$BEFORE" "$AFTER" <<'PY' || fail "the restored keys differ from the backup"
import json, sys
before, after = (json.load(open(p)) for p in sys.argv[1:3])
problems = []
if before["revision"] != after["revision"]:
    problems.append(f"store revision {after['revision']}, expected {before['revision']}")
was = {kv["key"]: kv for kv in before["kvs"]}
now = {kv["key"]: kv for kv in after["kvs"]}
for key in sorted(was.keys() - now.keys()):
    problems.append(f"missing key {key!r}")
for key in sorted(now.keys() - was.keys()):
    problems.append(f"unexpected key {key!r}: {now[key]}")
for key in sorted(was.keys() & now.keys()):
    if was[key] != now[key]:
        problems.append(f"key {key!r}: {now[key]}, expected {was[key]}")
for p in problems[:20]:
    print("  " + p, file=sys.stderr)
if problems:
    sys.exit(f"{len(problems)} differences")
print(f"{len(now)} keys, values, revisions, versions and leases as in the backup; "
      f"store revision {after['revision']}")
PY
# Spot checks of the kinds of data, independent of the dump.
[ "$(nctl get --print-value-only single/1)" = "second 1" ] || fail "single/1"
[ "$(nctl get --print-value-only single/140)" = "value 140" ] || fail "single/140"
[ "$(nctl get --print-value-only batch2/50)" = "b2-50" ] || fail "batch2/50"
[ "$(nctl get --print-value-only txn/b)" = "also" ] || fail "txn/b"
for k in single/141 single/150 batch3/1 revoked/1 after-backup; do
  [ -z "$(nctl get "$k")" ] || fail "$k is there after the restore (deleted, or written after the backup)"
done
out=$(nctl lease timetolive "$LEASE" --keys) || fail "lease timetolive"
[[ $out =~ ^lease\ $LEASE\ granted\ with\ TTL\(600s\),\ remaining\([0-9]+s\),\ attached\ keys\(\[leased/1\ leased/2\ leased/3\ leased/4\ leased/5\]\)$ ]] ||
  fail "lease timetolive printed '$out'"
out=$(nctl lease list) || fail "lease list"
[ "$out" = "$(printf 'found 1 leases\n%s' "$LEASE")" ] || fail "lease list printed '$out'"
# The membership is the new cluster's, and nothing of the old one.
nctl member list --json | python3 -c '
import json, sys
port = int(sys.argv[1])
m = json.load(sys.stdin)
got = [(x["id"], x["address"], x["role"]) for x in m["members"]]
want = [(i, f"127.0.0.1:{port + i}", "voter") for i in (1, 2, 3)]
assert got == want, f"members {got}, expected {want}"
assert m["leader_id"] in (1, 2, 3), m
' "$NEW_PORT" || fail "member list of the restored cluster"
# Every member has the state, not only the leader (serializable reads).
IFS=, read -r -a NEW_EP <<<"$NEW_EPS"
for ep in "${NEW_EP[@]}"; do
  n=$("$CTL" --endpoints="$ep" get "" --prefix --count-only --consistency=s) || fail "count at $ep"
  [ "$n" = 247 ] || fail "member $ep holds $n keys, expected 247"
done

# ---- 7. the restored cluster takes writes ----
step "writing to the restored cluster"
[ "$(nctl put fresh new)" = OK ] || fail "put on the restored cluster"
rev=$(nctl -w json get fresh | to_plain | python3 -c 'import json,sys; print(json.load(sys.stdin)["kvs"][0]["mod_revision"])')
[ "$rev" = $((saved_rev + 1)) ] || fail "the first new write is at revision $rev, expected $((saved_rev + 1))"
[ "$(nctl put single/1 third)" = OK ] || fail "overwrite on the restored cluster"
v=$(nctl -w json get single/1 | to_plain | python3 -c 'import json,sys; print(json.load(sys.stdin)["kvs"][0]["version"])')
[ "$v" = 3 ] || fail "single/1 is at version $v after a third write, expected 3"
[ "$(nctl lease revoke "$LEASE")" = "lease $LEASE revoked" ] || fail "revoke of the restored lease"
[ -z "$(nctl get leased/1)" ] || fail "leased/1 is there after its lease was revoked"

echo "PASS: disaster recovery from $BACKUP ($saved_bytes bytes, revision $saved_rev)"
