#!/usr/bin/env bash
# Regenerates etcd-3.4.snapshot.db, the etcd snapshot the restore tests read
# (src/gtest/ops/etcd_import_test.cc): starts a throwaway single-member etcd,
# writes keys with several revisions, a transaction, a deleted key, a lease
# with keys, a revoked lease, a value larger than a page and a compaction,
# then saves the snapshot with `etcdctl snapshot save`. Needs etcd and
# etcdctl (3.4 or 3.5) on PATH. The tests check the values below: change
# both together.
#
#   src/gtest/ops/testdata/make_etcd_snapshot.sh [OUT]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-$here/etcd-3.4.snapshot.db}
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
ep=127.0.0.1:$port
etcd --name fixture --data-dir "$work/data" --listen-client-urls "http://$ep" \
  --advertise-client-urls "http://$ep" --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
  --initial-cluster "fixture=http://127.0.0.1:$((port + 1))" >"$work/etcd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
export ETCDCTL_API=3
ctl() { etcdctl --endpoints="$ep" "$@"; }
for _ in $(seq 100); do ctl endpoint health >/dev/null 2>&1 && break; sleep 0.1; done

ctl put /a one >/dev/null                   # rev 2
ctl put /a two >/dev/null                   # rev 3: /a version 2
ctl put /b bee >/dev/null                   # rev 4
ctl put /gone soon >/dev/null               # rev 5
ctl del /gone >/dev/null                    # rev 6: a tombstone
ctl txn <<'TXN' >/dev/null                  # rev 7: two keys at one revision
value("/a") = "two"

put /a three
put /c sea


TXN
lease=$(ctl lease grant 600 | awk '{print $2}')
ctl put --lease="$lease" /leased held >/dev/null   # rev 8
ctl compact 4 >/dev/null                           # finishedCompactRev 4
ctl put /big "$(head -c 6000 /dev/zero | tr '\0' x)" >/dev/null  # rev 9: overflow pages
short=$(ctl lease grant 60 | awk '{print $2}')
ctl put --lease="$short" /short gone >/dev/null    # rev 10
ctl lease revoke "$short" >/dev/null               # rev 11: deletes /short
ctl put /a four >/dev/null                         # rev 12: /a version 4
printf 'lease %s\n' "$lease" >&2
ctl snapshot save "$out" >/dev/null
echo "wrote $out ($(stat -c %s "$out") bytes)" >&2
