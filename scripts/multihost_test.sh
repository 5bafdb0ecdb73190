#!/usr/bin/env bash
# Multi-host test: a 3-member raftkv cluster where every member runs on its
# own "host" (a Linux network namespace with its own IP address on a private
# bridge) and the clients run on a fourth. Deployed the way doc/deployment.md
# describes: one cluster file (copied to every host, no shared filesystem) and
# one flags file per member; every member uses the same port on its own
# address, so nothing can work by accident through 127.0.0.1.
#
# Steps (each prints PASS or FAIL with its name):
#   setup        bridge, 4 namespaces, veth pairs, addresses, per-host files
#   start        the 3 servers come up on their namespace addresses
#   election     exactly one leader, every member agrees on it and the term
#   network      servers listen on their own address only, the leader dials its
#                followers at their addresses (sockets) and traffic crosses
#                the bridge; the client host has no server on 127.0.0.1
#   replication  a write from the client host is readable on every member
#                (local --stale reads on each, and linearizable reads)
#   failover     kill -9 of the leader; a new leader is elected, writes
#                succeed; the old member restarts and catches up
#   benchmark    raftkv-bench Benchmark.Write --target=<the 3 addresses>
#                from the client host: non-zero throughput, 0 failures
#   handover     SIGTERM to the leader hands leadership over, it exits 0;
#                it restarts and catches up
#   partition    the leader's link goes down: the others elect a leader and
#                take writes, the isolated one steps down; link up: it
#                rejoins and catches up
#   shutdown     SIGTERM: every server exits 0
#
# Needs root and iproute2 (`ip netns`); exits 77 (SKIP) without them.
# With RAFTKV_MULTIHOST_TLS=1 (ctest multihost_netns_tls) the same steps run
# over TLS: scripts/gen-certs.sh makes a CA and one certificate per member
# naming its address, each host gets only the CA and its own certificate and
# key, the peer methods are limited to node certificates
# (--peer_cert_allowed_names), and the clients (raftkvctl, raftkv-bench) use
# --tls_ca_file.
# Environment: RAFTKV_BIN_DIR (default <repo>/build), RAFTKV_MULTIHOST_PARTITION_HOLD
# (seconds the partition lasts beyond its checks, default 0), RAFTKV_MULTIHOST_KEEP=1
# keeps the work directory (it is always kept on failure).
# Everything it creates is named rkvmh<pid>-...; a trap removes the namespaces,
# veths and bridge and kills the servers on any exit. Leftovers of a run that
# was SIGKILLed (owner pid gone) are removed at the next start.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN_DIR=${RAFTKV_BIN_DIR:-$REPO_ROOT/build}
SERVER=$BIN_DIR/raftkv-server
CTL=$BIN_DIR/raftkvctl
BENCH=$BIN_DIR/raftkv-bench
ME=multihost_test.sh

N=3                       # servers; the client is a 4th host
PORT=7001                 # the same port on every host
TAG=rkvmh$$               # prefix of everything this run creates (<= 15-char link names)
BRIDGE=${TAG}b
# A private bridge without an address in the root namespace: the subnet
# exists only inside our namespaces, so it cannot clash with the machine's
# networks, and parallel runs (own bridges) may even use the same one.
SUBNET=10.213.$(($$ % 200 + 20))
CLIENT_IP=$SUBNET.100

START=$SECONDS
WORK=""
declare -a PIDS=()        # PIDS[i] = server pid of member i
TLS=${RAFTKV_MULTIHOST_TLS:-0}
declare -a CLIENT_TLS=()  # the clients' TLS flags (TLS=1)

# say, fail, skip, on_exit, remove_at_exit, kill_wait, wait_for
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
pass() { echo "PASS: $* [$((SECONDS - START))s]"; }

# ns, veth, ip_of, addr_of, in_ns, create_network, remove_own_netns_objects, remove_stale_runs
# shellcheck source-path=SCRIPTDIR source=lib/netns_hosts.sh
source "$REPO_ROOT/scripts/lib/netns_hosts.sh"
ALL_EPS=""
for ((i = 1; i <= N; i++)); do ALL_EPS+="${ALL_EPS:+,}$(addr_of "$i")"; done

# ---------------------------------------------------------------- checks

[[ $(id -u) == 0 ]] || skip "needs root to create network namespaces, veth pairs and a bridge (running as uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is not installed"
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to read raftkvctl --json output"
for b in "$SERVER" "$CTL" "$BENCH"; do
  [[ -x $b ]] || fail "$b not found (build raftkv-server, raftkvctl and raftkv-bench, or set RAFTKV_BIN_DIR)"
done

# On any exit, the last first: the servers killed, this run's namespaces,
# links and bridge removed, the work directory removed unless the test failed.
WORK=$(mktemp -d "/tmp/$TAG.XXXXXX")
remove_at_exit "$WORK" \
  "$ME: work directory kept: $WORK (per host: hostI/conf, hostI/data, hostI/logs, hostI/server.out)" \
  "${RAFTKV_MULTIHOST_KEEP:-0}"
on_exit remove_own_netns_objects
kill_servers() { kill_wait KILL "${PIDS[@]}"; }
on_exit kill_servers
remove_stale_runs rkvmh

# ---------------------------------------------------------------- helpers

# raftkvctl from the client host; every call has a deadline.
ctl() {
  timeout 30 ip netns exec "$CL_NS" "$CTL" "${CLIENT_TLS[@]}" --rpc_timeout_ms=1000 "$@"
}

status_json() {  # status --json of the endpoints $1 (never fails)
  ctl --endpoints="$1" --timeout_ms=1500 status --json 2>/dev/null || true
}

# Prints the leader id if, among the endpoints $1, exactly one member is the
# leader and every member in $1 answers and names it (same term); else fails.
agreed_leader() {
  local json
  json=$(status_json "$1")
  python3 - "$json" <<'EOF'
import json, sys
try:
    nodes = json.loads(sys.argv[1])
except ValueError:
    sys.exit(1)
if not nodes or any("error" in n for n in nodes):
    sys.exit(1)
leaders = [n for n in nodes if n["role"] == "leader"]
if len(leaders) != 1:
    sys.exit(1)
l = leaders[0]
if any(n["leader_id"] != l["id"] or n["term"] != l["term"] for n in nodes):
    sys.exit(1)
print(l["id"])
EOF
}

LEADER=0
wait_leader() {  # wait_leader ENDPOINTS SECONDS: sets LEADER
  wait_for "$2" set_leader "$1"
}
set_leader() {  # set_leader ENDPOINTS: LEADER = agreed_leader ENDPOINTS, if it names one
  local id
  id=$(agreed_leader "$1") && [[ -n $id ]] || return 1
  LEADER=$id
}

eps_without() {  # the endpoints of every member but $1
  local i out=""
  for ((i = 1; i <= N; i++)); do
    ((i == $1)) || out+="${out:+,}$(addr_of "$i")"
  done
  echo "$out"
}

start_server() {  # start_server I: member I on its host, output appended to server.out
  local i=$1 h=$WORK/host$1
  echo "=== start at $(date '+%H:%M:%S') ===" >>"$h/server.out"
  # Run in the host's directory with core dumps allowed: a crash leaves a
  # core there (with the kernel's default core_pattern), and tails() prints
  # its stacks.
  (cd "$h" && { ulimit -c unlimited 2>/dev/null || true; } &&
    exec ip netns exec "$(ns "$i")" "$SERVER" --flagfile="$h/conf/node$i.flags" \
      </dev/null >>"$h/server.out" 2>&1) &
  PIDS[$i]=$!
}

server_alive() { kill -0 "${PIDS[$1]}" 2>/dev/null; }

# stop_server I STEP: SIGTERM to member I; it must exit 0 within 15s.
stop_server() {
  local i=$1 step=$2 end=$((SECONDS + 15)) rc=0
  kill -TERM "${PIDS[$i]}"
  while server_alive "$i" && ((SECONDS < end)); do sleep 0.1; done
  server_alive "$i" && step_fail "$step: member $i still running 15s after SIGTERM"
  wait "${PIDS[$i]}" || rc=$?
  unset "PIDS[$i]"
  ((rc == 0)) || step_fail "$step: member $i exited with status $rc after SIGTERM"
}

# Succeeds when member $1's local (stale) read of key $2 is $3.
local_value_is() {
  local v
  v=$(ctl --endpoints="$(addr_of "$1")" --timeout_ms=1500 get --consistency=s --print-value-only "$2" \
    2>/dev/null) || return 1
  [[ $v == "$3" ]]
}

tails() {
  local i
  for ((i = 1; i <= N; i++)); do
    echo "----- host $i ($(addr_of "$i")): tail of server.out and the INFO log -----" >&2
    tail -n 15 "$WORK/host$i/server.out" >&2 2>/dev/null || true
    tail -n 15 "$WORK/host$i/logs/raftkv-server.INFO" >&2 2>/dev/null || true
    local core
    for core in "$WORK/host$i"/core*; do
      [[ -f $core ]] || continue
      echo "----- host $i: $core -----" >&2
      if command -v gdb >/dev/null; then
        gdb -batch -ex "thread apply all bt 20" "$SERVER" "$core" 2>/dev/null | grep -E '^(Thread|#)' >&2 || true
      else
        echo "(no gdb to print its stacks)" >&2
      fi
    done
  done
}

step_fail() {
  tails
  fail "$*"
}

# ---------------------------------------------------------------- setup

# Skips (77) where this machine cannot create namespaces or a bridge;
# anything later fails.
create_network "$N" "$CLIENT_IP"

# One cluster file, in the format of conf/cluster.conf, copied to each host;
# one flags file per member in the format of conf/node1.flags. Only --id, the
# paths and the listen address differ between the hosts.
{
  echo "# raftkv cluster membership (written by scripts/multihost_test.sh): <id> <host:port>"
  for ((i = 1; i <= N; i++)); do echo "$i $(addr_of "$i")"; done
} >"$WORK/cluster.conf"
for ((i = 1; i <= N; i++)); do
  h=$WORK/host$i
  mkdir -p "$h/conf" "$h/data" "$h/logs"
  cp "$WORK/cluster.conf" "$h/conf/cluster.conf"
  cat >"$h/conf/node$i.flags" <<EOF
# raftkv-server flags for member $i on host $(ip_of "$i")
--id=$i
--cluster_file=$h/conf/cluster.conf
--data_dir=$h/data
--log_dir=$h/logs
--listen_address=$(addr_of "$i")
# glog: write INFO lines at once (the test reads the logs while it runs)
--logbufsecs=0
EOF
done
if [[ $TLS == 1 ]]; then
  # Certificates made in a separate "admin" directory; each host gets the CA
  # certificate and its own certificate and key only.
  certs=()
  for ((i = 1; i <= N; i++)); do certs+=("node$i=IP:$(ip_of "$i")"); done
  bash "$REPO_ROOT/scripts/gen-certs.sh" "$WORK/pki" "${certs[@]}" >"$WORK/gen-certs.out" 2>&1 ||
    { cat "$WORK/gen-certs.out" >&2; fail "setup: scripts/gen-certs.sh failed"; }
  for ((i = 1; i <= N; i++)); do
    h=$WORK/host$i
    mkdir -p "$h/tls"
    cp "$WORK/pki/ca.crt" "$WORK/pki/node$i.crt" "$WORK/pki/node$i.key" "$h/tls/"
    cat >>"$h/conf/node$i.flags" <<EOF
# TLS: the cluster CA, this member's certificate (naming $(ip_of "$i")) and key
--tls_ca_file=$h/tls/ca.crt
--tls_cert_file=$h/tls/node$i.crt
--tls_key_file=$h/tls/node$i.key
--peer_cert_allowed_names=node*
EOF
  done
  mkdir -p "$WORK/client"
  cp "$WORK/pki/ca.crt" "$WORK/client/"
  CLIENT_TLS=(--tls_ca_file="$WORK/client/ca.crt")
fi
pass "setup: bridge $BRIDGE, hosts $ALL_EPS, client $CLIENT_IP; files in $WORK$([[ $TLS == 1 ]] && echo "; TLS with mutual TLS between members")"

# ---------------------------------------------------------------- start + election

# Succeeds when all N members answer Status.
all_answer() {
  local json
  json=$(status_json "$ALL_EPS")
  python3 -c '
import json, sys
n = json.loads(sys.argv[1])
sys.exit(0 if len(n) == int(sys.argv[2]) and not any("error" in x for x in n) else 1)' \
    "$json" "$N" 2>/dev/null
}

for ((i = 1; i <= N; i++)); do start_server "$i"; done
end=$((SECONDS + 30))
until all_answer; do
  for ((i = 1; i <= N; i++)); do
    server_alive "$i" || step_fail "start: member $i exited during start-up"
  done
  ((SECONDS < end)) || step_fail "start: not every member answered Status within 30s"
  sleep 0.2
done
pass "start: $N servers answer on $ALL_EPS (each in its own namespace)"

wait_leader "$ALL_EPS" 30 ||
  step_fail "election: no single leader that every member agrees on within 30s; status: $(status_json "$ALL_EPS")"
pass "election: member $LEADER is the only leader and all $N members agree on it and the term"

# ---------------------------------------------------------------- network

for ((i = 1; i <= N; i++)); do
  h=$WORK/host$i
  # Listening on its own address only (not 0.0.0.0, not loopback).
  # (gRPC binds an IPv6 socket: IPv4 addresses show as [::ffff:a.b.c.d].)
  listen=$(in_ns "$(ns "$i")" ss -Htln | awk '{print $4}' | grep ":$PORT\$" |
    sed 's/^\[::ffff:\(.*\)\]:/\1:/' || true)
  [[ $listen == "$(addr_of "$i")" ]] ||
    step_fail "network: member $i should listen on $(addr_of "$i") only; sockets: ${listen:-none}"
  if in_ns "$(ns "$i")" timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
    step_fail "network: something answers on 127.0.0.1:$PORT on host $i"
  fi
  grep -q "serving on $(addr_of "$i") " "$h/logs/raftkv-server.INFO" ||
    step_fail "network: member $i's log does not say 'serving on $(addr_of "$i")'"
  grep -q "raftkv-server member $i at $(addr_of "$i") started" "$h/logs/raftkv-server.INFO" ||
    step_fail "network: member $i's log does not say it started at $(addr_of "$i")"
  if ((i == LEADER)); then
    # The leader dials each follower at the follower's address...
    conns=$(in_ns "$(ns "$i")" ss -Htn state established "( dport = :$PORT )" | awk '{print $4}' |
      sed 's/^\[::ffff:\(.*\)\]:/\1:/')
    for ((j = 1; j <= N; j++)); do
      ((j == i)) && continue
      grep -qx "$(addr_of "$j")" <<<"$conns" ||
        step_fail "network: leader $i has no connection to member $j at $(addr_of "$j"); has: ${conns:-none}"
    done
  else
    # ... and each follower sees it arrive from the leader's address.
    conns=$(in_ns "$(ns "$i")" ss -Htn state established "( sport = :$PORT )" | awk '{print $4}' |
      sed 's/^\[::ffff:\(.*\)\]:/\1:/')
    grep -q "^$(ip_of "$LEADER"):" <<<"$conns" ||
      step_fail "network: no connection from leader $(ip_of "$LEADER") to member $i; peers: ${conns:-none}"
  fi
  rx=$(cat "/sys/class/net/$(veth "$i")/statistics/rx_bytes")
  tx=$(cat "/sys/class/net/$(veth "$i")/statistics/tx_bytes")
  ((rx > 0 && tx > 0)) || step_fail "network: no traffic on host $i's link $(veth "$i") (rx $rx, tx $tx)"
  say "host $i: listens on $listen; link $(veth "$i") carried $rx bytes out of the host, $tx in"
done
if in_ns "$CL_NS" timeout 3 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then
  step_fail "network: the client host reaches a server on 127.0.0.1:$PORT"
fi
pass "network: each member listens on its own address only, the leader is connected to each follower's address, and every link carried traffic over the bridge"
if [[ $TLS == 1 ]]; then
  # Every member says it runs TLS, and a plaintext client is refused.
  for ((i = 1; i <= N; i++)); do
    grep -qs "TLS on: peers need a certificate" "$WORK/host$i"/logs/raftkv-server.* ||
      step_fail "tls: member $i does not log TLS on"
  done
  if timeout 30 ip netns exec "$CL_NS" "$CTL" --rpc_timeout_ms=1000 --timeout_ms=2000 \
      --endpoints="$ALL_EPS" put mh-plain x >/dev/null 2>&1; then
    step_fail "tls: a plaintext client could write"
  fi
  pass "tls: every member serves TLS; a plaintext client from $CLIENT_IP is refused"
fi

# ---------------------------------------------------------------- replication

out=$(ctl --endpoints="$ALL_EPS" --timeout_ms=10000 put mh-repl "from-$CLIENT_IP") ||
  step_fail "replication: put from the client host failed"
[[ $out == OK ]] || step_fail "replication: put printed '$out'"
out=$(ctl --endpoints="$ALL_EPS" --timeout_ms=10000 batch put mh-b1 one put mh-b2 two) ||
  step_fail "replication: batch from the client host failed"
for ((i = 1; i <= N; i++)); do
  wait_for 15 local_value_is "$i" mh-repl "from-$CLIENT_IP" ||
    step_fail "replication: member $i's local state lacks mh-repl after 15s"
  wait_for 15 local_value_is "$i" mh-b2 two ||
    step_fail "replication: member $i's local state lacks the batch after 15s"
  # A linearizable read through this member alone (followers point to the leader).
  v=$(ctl --endpoints="$(addr_of "$i")" --timeout_ms=10000 get --print-value-only mh-repl) ||
    step_fail "replication: linearizable get through member $i failed"
  [[ $v == "from-$CLIENT_IP" ]] || step_fail "replication: get through member $i returned '$v'"
done
pass "replication: writes from $CLIENT_IP are in every member's local state and readable through each"

# ---------------------------------------------------------------- failover

old=$LEADER
kill -9 "${PIDS[$old]}"
wait "${PIDS[$old]}" 2>/dev/null || true
unset "PIDS[$old]"
killed_at=$SECONDS
rest=$(eps_without "$old")
wait_leader "$rest" 20 ||
  step_fail "failover: no new leader among $rest within 20s of kill -9 of member $old; status: $(status_json "$rest")"
[[ $LEADER != "$old" ]] || step_fail "failover: the killed member $old is still reported as leader"
new=$LEADER
# 5 single writes (one raftkvctl each) and 15 more in one batch entry.
for k in $(seq 1 5); do
  ctl --endpoints="$ALL_EPS" --timeout_ms=10000 put "mh-fo-$k" "v$k" >/dev/null ||
    step_fail "failover: put mh-fo-$k with member $old down failed"
done
batch=()
for k in $(seq 6 20); do batch+=(put "mh-fo-$k" "v$k"); done
ctl --endpoints="$ALL_EPS" --timeout_ms=10000 batch "${batch[@]}" >/dev/null ||
  step_fail "failover: batch mh-fo-6..20 with member $old down failed"
say "failover: member $new leads; 20 writes done $((SECONDS - killed_at))s after the kill"
start_server "$old"
wait_for 30 local_value_is "$old" mh-fo-20 v20 ||
  step_fail "failover: restarted member $old did not catch up (mh-fo-20) within 30s"
for k in 1 2 3 4 5 6; do
  local_value_is "$old" "mh-fo-$k" "v$k" || step_fail "failover: restarted member $old lacks mh-fo-$k"
done
local_value_is "$old" mh-repl "from-$CLIENT_IP" || step_fail "failover: restarted member $old lost mh-repl"
wait_leader "$ALL_EPS" 20 || step_fail "failover: the $N members do not agree on a leader after the restart"
pass "failover: kill -9 of leader $old, member $new elected, 20 writes, $old restarted and caught up"

# ---------------------------------------------------------------- benchmark

bench_json=$WORK/bench.json
if ! timeout 120 ip netns exec "$CL_NS" "$BENCH" "${CLIENT_TLS[@]}" --gtest_filter=Benchmark.Write --target="$ALL_EPS" \
    --requests=2000 --inflight=64 --verify_sample=500 --json_out="$bench_json" >"$WORK/bench.out" 2>&1; then
  tail -n 30 "$WORK/bench.out" >&2
  step_fail "benchmark: raftkv-bench Benchmark.Write --target=$ALL_EPS failed (output: $WORK/bench.out)"
fi
summary=$(python3 - "$bench_json" "$ALL_EPS" <<'EOF'
import json, sys
runs = json.load(open(sys.argv[1]))
assert len(runs) == 1, "expected one run, got %d" % len(runs)
r = runs[0]
problems = []
# "target": the leader it found among --target, one of the hosts.
if r["target"] not in sys.argv[2].split(","): problems.append("leader %r not a host" % r["target"])
if not r["ops_per_sec"] > 0: problems.append("throughput %s" % r["ops_per_sec"])
if r["failed"] != 0: problems.append("%d failed" % r["failed"])
if r["acknowledged"] != r["requests"]: problems.append("%d of %d acknowledged" % (r["acknowledged"], r["requests"]))
if not r["passed"]: problems.append("not passed")
if problems:
    print("; ".join(problems)); sys.exit(1)
print("%d writes to leader %s, %.0f ops/s, p50 %.0f us, p99 %.0f us, 0 failed, %d verified" % (
    r["requests"], r["target"], r["ops_per_sec"], r["latency_us"]["p50"], r["latency_us"]["p99"],
    r["verified"]["ok"]))
EOF
) || step_fail "benchmark: $summary"
pass "benchmark: Benchmark.Write from $CLIENT_IP --target=$ALL_EPS: $summary"

# ---------------------------------------------------------------- handover

# SIGTERM to the leader hands leadership to a follower (--shutdown_transfer_ms)
# before it exits; the others serve at once, without an election timeout.
old=$LEADER
stop_server "$old" handover
# (Read before the restart, which starts a new INFO log.)
handed=$(grep -o "handed leadership to member [0-9]* (term [0-9]*) in [0-9]* ms" \
  "$WORK/host$old/logs/raftkv-server.INFO" || true)
[[ -n $handed ]] ||
  step_fail "handover: leader $old did not hand leadership over: $(grep 'shutting down' "$WORK/host$old/logs/raftkv-server.INFO")"
rest=$(eps_without "$old")
wait_leader "$rest" 10 || step_fail "handover: no agreed leader among $rest after SIGTERM of leader $old"
ctl --endpoints="$ALL_EPS" --timeout_ms=10000 put mh-handover yes >/dev/null ||
  step_fail "handover: put after the handover failed"
start_server "$old"
wait_for 30 local_value_is "$old" mh-handover yes ||
  step_fail "handover: member $old did not catch up within 30s of its restart"
wait_leader "$ALL_EPS" 20 || step_fail "handover: no agreed leader after member $old restarted"
pass "handover: SIGTERM of leader $old: $handed; it exited 0, restarted and caught up"

# ---------------------------------------------------------------- partition

old=$LEADER
ip link set "$(veth "$old")" down
rest=$(eps_without "$old")
wait_leader "$rest" 20 ||
  step_fail "partition: no leader among $rest within 20s of cutting member $old off; status: $(status_json "$rest")"
[[ $LEADER != "$old" ]] || step_fail "partition: the cut-off member $old is still the majority's leader"
new=$LEADER
for k in $(seq 1 5); do
  ctl --endpoints="$rest" --timeout_ms=10000 put "mh-part-$k" "p$k" >/dev/null ||
    step_fail "partition: put mh-part-$k through the majority failed"
done
# The isolated member, asked on its own host, no longer leads (check-quorum)
# and cannot take a write.
isolated_status() {
  in_ns "$(ns "$old")" timeout 10 "$CTL" "${CLIENT_TLS[@]}" --endpoints="$(addr_of "$old")" --timeout_ms=1500 \
    status --json 2>/dev/null || true
}
not_leading() { ! isolated_status | grep -q '"role": "leader"' && isolated_status | grep -q '"role"'; }
wait_for 15 not_leading || step_fail "partition: isolated member $old still leads: $(isolated_status)"
if in_ns "$(ns "$old")" timeout 10 "$CTL" "${CLIENT_TLS[@]}" --endpoints="$(addr_of "$old")" --timeout_ms=2000 \
    --rpc_timeout_ms=1000 put mh-isolated x >/dev/null 2>&1; then
  step_fail "partition: the isolated member $old acknowledged a write"
fi
# RAFTKV_MULTIHOST_PARTITION_HOLD=S keeps the link down S seconds more (a
# longer partition: TCP retransmission back-off grows with it).
sleep "${RAFTKV_MULTIHOST_PARTITION_HOLD:-0}"
ip link set "$(veth "$old")" up
up_ns=$(date +%s%N)
wait_for 30 local_value_is "$old" mh-part-5 p5 ||
  step_fail "partition: member $old did not catch up within 30s of the link coming back"
rejoin_ms=$((($(date +%s%N) - up_ns) / 1000000))
wait_leader "$ALL_EPS" 20 || step_fail "partition: no agreed leader after the link came back"
# get prints nothing (and exits 0) for an absent key.
if isolated=$(ctl --endpoints="$ALL_EPS" --timeout_ms=5000 get mh-isolated 2>/dev/null) &&
  [[ -n $isolated ]]; then
  step_fail "partition: the write refused by the isolated member exists"
fi
pass "partition: member $old cut off, member $new took 5 writes, $old stepped down, rejoined and caught up ${rejoin_ms} ms after the link came back"

# ---------------------------------------------------------------- shutdown

for ((i = 1; i <= N; i++)); do stop_server "$i" shutdown; done
pass "shutdown: SIGTERM to each, all $N servers exited 0"

echo "PASS: $ME: all steps in $((SECONDS - START))s"
