#!/usr/bin/env bash
# Chaos run: a cluster of real raftkv-server processes on 127.0.0.1, concurrent
# clients doing get / range / put / compare-and-swap / transactions / delete /
# delete-range on a few keys and lease cycles (grant, put with the lease,
# revoke or expire), watchers of every key, and a nemesis that SIGKILLs and
# restarts members, pauses them (SIGSTOP/SIGCONT), cuts the network between
# them (the servers' --enable_test_faults link cutter), moves leadership
# (Admin.TransferLeader), takes snapshots (Admin.TakeSnapshot; servers run
# with --snapshot_entries=2000) and replaces members (remove a voter, wipe it,
# add a new empty server as a learner, promote it). The recorded history is
# checked for linearizability per key, every acknowledged "ledger" write is
# read back, the members' stores are compared (revisions included), and every
# watcher must have seen every event once, in revision order.
#
#   scripts/chaos.sh --duration SECONDS [--nodes 3|5] [--seed N] [raftkv-chaos flags...]
#
# Two of the clients (--etcd_clients) go through etcd's v3 KV service instead
# of raftkv.v1's. Ends with the line
#   chaos: ops=N faults=M violations=V lost=L watch_missed=W watch_duplicated=D ops_v1=A ops_etcd=B
# and exits non-zero on any violation, lost acknowledged write, missed or
# duplicated watch event, inconclusive check or bad final configuration. On failure the cluster directory (data, logs) and
# history.jsonl are kept. Builds ./build first if the binary is missing
# ($RAFTKV_BUILD_DIR overrides). More knobs: build/raftkv-chaos --help
# (--faults kill,pause,partition,transfer,membership,snapshot, --clients,
# --keys, --snapshot_entries, ...).
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${RAFTKV_BUILD_DIR:-$REPO_ROOT/build}

args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --duration|--nodes|--seed)
      [[ $# -ge 2 ]] || { echo "chaos.sh: $1 needs a value" >&2; exit 2; }
      args+=("$1=$2"); shift 2 ;;
    -h|--help)
      sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done

if [[ ! -x "$BUILD_DIR/raftkv-chaos" || ! -x "$BUILD_DIR/raftkv-server" ]]; then
  RAFTKV_BUILD_DIR="$BUILD_DIR" "$REPO_ROOT/scripts/build.sh"
fi
exec "$BUILD_DIR/raftkv-chaos" "${args[@]}"
