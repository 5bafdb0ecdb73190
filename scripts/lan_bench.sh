#!/usr/bin/env bash
# Emulated-LAN benchmark: raftkv's Benchmark.Write with every member and the
# client on its own "host" (a network namespace with its own address on a
# private bridge, as in scripts/multihost_test.sh), every link given a round
# trip and a bandwidth, next to the same runs on loopback.
#
# How the LAN is built (doc/benchmark.md, "Emulated LAN"):
#   - bandwidth: a tbf qdisc on both ends of every host's veth (into and out
#     of each host), --rate_mbit;
#   - round trip: this kernel has no netem, so the delay is added in user
#     space by a Toxiproxy (tools/lanproxy: Toxiproxy v2.12.0's server plus a
#     microsecond latency toxic). Each member host runs one: it listens on the
#     host's address <ip>:7001 (the address in the cluster file) and forwards
#     to the member's raftkv-server on 127.0.0.1:7002 in the same namespace,
#     delaying each direction by rtt/2 +/- jitter/2. Every call into a host
#     (client -> member, member -> member) crosses exactly one proxy and so
#     sees the whole round trip. A second, delay-free proxy on <ip>:7003
#     measures what the proxy costs by itself.
#
# Default mode, --reps times (runs interleaved):
#   check     Echo, 1 in flight, to the leader: from its own host straight to
#             127.0.0.1:7002, through the delay-free proxy, through the
#             delaying proxy: the round trip actually added
#   LAN       Benchmark.Write at --inflight (256) and at 1 in flight, from the
#             client host, --target=<the members' addresses>
#   loopback  the same two runs with raftkv-bench's own local cluster on
#             127.0.0.1 (no namespaces, no proxies)
# then a table (medians, min-max), the CPU per request of the client, the
# servers and the proxies (from /proc/<pid>/stat around each run), and one
# last line, relied upon by other tools (keep its format):
#   lan: write_ops=N loopback_ops=M ratio=R one_client_p50_ms=X rtt_ms=Y
#
# --sweep: the value-length and follower-count sweeps of scripts/bench_sweep.py
# run on the emulated LAN (bench_sweep.py calls this script back with
# --run-point as its raftkv-bench) and on loopback, one repetition of each in
# turn, plots to
# doc/images/lan_*.png (LAN and loopback Write lines). Last line:
#   lan-sweep: runs=N failed=K loopback_runs=N loopback_failed=K images=... results=<dir>
#
# Needs root, iproute2 (ip, tc) and curl, exits 77 (SKIP) without them; needs
# Go (PATH or /usr/local/go/bin) once, to build tools/lanproxy (cached in
# ~/.cache/raftkv), unless RAFTKV_LANPROXY names a built binary.
# Environment: RAFTKV_BIN_DIR (default <repo>/build: raftkv-server,
# raftkvctl, raftkv-bench), RAFTKV_LANPROXY, RAFTKV_LAN_KEEP=1 keeps the work
# directory (always kept on failure).
# Everything it creates is named rkvlan<pid>-...; a trap removes the
# namespaces, veths and bridge and kills the servers and proxies on any exit.
# Leftovers of a run that was SIGKILLed (owner pid gone) are removed at the
# next start.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF=$REPO_ROOT/scripts/lan_bench.sh
ME=lan_bench.sh
BIN_DIR=${RAFTKV_BIN_DIR:-$REPO_ROOT/build}
SERVER=$BIN_DIR/raftkv-server
CTL=$BIN_DIR/raftkvctl
BENCH=$BIN_DIR/raftkv-bench

# ---------------------------------------------------------------- flags

RTT_MS=0.5
JITTER_MS=0.1
RATE_MBIT=1000
REQUESTS=30000
REQUESTS_ONE=2000
INFLIGHT=256
VALUE_LEN=64
REPS=3
VERIFY_SAMPLE=200
BENCH_ARGS=""
SWEEP=0
CALIBRATE=1
SWEEP_LOOPBACK=1
SWEEP_REPS=3
CALIBRATION=""
HALF_US=0
JIT_US=0
SWEEP_FOLLOWERS=1,2,3,4,5,6
SWEEP_VALUE_LENS=32,64,128,256,512,1024,2048,4096
SWEEP_ARGS=""
SWEEP_DIR=""
IMAGES_DIR=$REPO_ROOT/doc/images
RUN_POINT=0
declare -a POINT_ARGS=()

# Prints the usage text (every flag).
usage() {
  cat <<EOF
usage: scripts/lan_bench.sh [flags]            # LAN vs loopback, ends with the 'lan:' line
       scripts/lan_bench.sh --sweep [flags]    # value-length and follower sweeps on the LAN

The emulated LAN (each link):
  --rtt_ms=F           round trip added to every call into a host (default $RTT_MS);
                       0 = proxies without delay
  --jitter_ms=F        +/- spread of that round trip, uniform (default $JITTER_MS)
  --rate_mbit=N        bandwidth of every host's link, each direction (default $RATE_MBIT)
  --no_calibrate       ask the toxics for exactly rtt/2 each way; by default their
                       latency is first lowered until an unloaded Echo through the
                       delaying proxy takes --rtt_ms longer than through the
                       delay-free one (the wake-up and hand-off of each delayed
                       chunk add 50-130 us here)
Default mode:
  --requests=N         requests of the --inflight runs (default $REQUESTS)
  --requests_one=N     requests of the one-in-flight runs (default $REQUESTS_ONE)
  --inflight=N         requests in flight of the throughput runs (default $INFLIGHT)
  --value_len=N        value bytes (default $VALUE_LEN; keys 16 B)
  --reps=N             repetitions, interleaved; medians are reported (default $REPS)
  --verify_sample=N    raftkv-bench --verify_sample of every Write run (default $VERIFY_SAMPLE;
                       0 = read back every write)
  --bench_args="..."   more raftkv-bench flags for the Write runs, LAN and loopback alike
                       (e.g. "--conns=16"; later flags win)
Sweep mode:
  --sweep              run scripts/bench_sweep.py on the LAN instead (plots lan_*.png)
  --sweep_followers=L  follower counts (default $SWEEP_FOLLOWERS)
  --sweep_value_lens=L value lengths (default $SWEEP_VALUE_LENS)
  --sweep_reps=N        repetitions (default $SWEEP_REPS): one bench_sweep.py pass each on
                       the LAN and on loopback, alternating; merged into one results.json
  --sweep_args="..."   more bench_sweep.py flags, e.g. "--requests=2000" (not --reps)
  --sweep_no_loopback  skip the sweep on loopback (by default the LAN plots show its
                       Write line too)
  --sweep_dir=DIR      where the sweeps keep their per-run JSON, results.json and
                       generated pages: DIR/lan, DIR/loopback (default: a new, kept
                       /tmp/raftkv-lan-sweep-* directory)
  --images_dir=DIR     where the plots go (default doc/images)
Internal:
  --run-point ARGS...  used by bench_sweep.py as its raftkv-bench: starts a fresh
                       cluster of 1 + --followers members on the LAN of the calling
                       lan_bench.sh (RKVLAN_STATE), runs raftkv-bench ARGS from the
                       client host with --target, adds the LAN's CPU figures to the
                       JSON report, stops the cluster
  -h, --help           this text

Environment: RAFTKV_BIN_DIR (default <repo>/build), RAFTKV_LANPROXY (a built
tools/lanproxy binary; default: built with Go into ~/.cache/raftkv),
RAFTKV_LAN_KEEP=1 (keep the work directory).
Needs root, iproute2 and curl (else exit 77, skipped).
EOF
}

# Parses the command line into the variables above.
parse_args() {
  while (($#)); do
    case $1 in
      --rtt_ms=*) RTT_MS=${1#*=} ;;
      --jitter_ms=*) JITTER_MS=${1#*=} ;;
      --rate_mbit=*) RATE_MBIT=${1#*=} ;;
      --requests=*) REQUESTS=${1#*=} ;;
      --requests_one=*) REQUESTS_ONE=${1#*=} ;;
      --inflight=*) INFLIGHT=${1#*=} ;;
      --value_len=*) VALUE_LEN=${1#*=} ;;
      --reps=*) REPS=${1#*=} ;;
      --verify_sample=*) VERIFY_SAMPLE=${1#*=} ;;
      --bench_args=*) BENCH_ARGS=${1#*=} ;;
      --sweep) SWEEP=1 ;;
      --no_calibrate) CALIBRATE=0 ;;
      --sweep_no_loopback) SWEEP_LOOPBACK=0 ;;
      --sweep_reps=*) SWEEP_REPS=${1#*=} ;;
      --sweep_followers=*) SWEEP_FOLLOWERS=${1#*=} ;;
      --sweep_value_lens=*) SWEEP_VALUE_LENS=${1#*=} ;;
      --sweep_args=*) SWEEP_ARGS=${1#*=} ;;
      --sweep_dir=*) SWEEP_DIR=${1#*=} ;;
      --images_dir=*) IMAGES_DIR=${1#*=} ;;
      --run-point)
        RUN_POINT=1
        shift
        POINT_ARGS=("$@")
        return
        ;;
      -h | --help)
        usage
        exit 0
        ;;
      *)
        echo "$ME: unknown flag '$1' (see --help)" >&2
        exit 2
        ;;
    esac
    shift
  done
  local v
  for v in "$RTT_MS" "$JITTER_MS"; do
    [[ $v =~ ^[0-9]+([.][0-9]+)?$ ]] || { echo "$ME: not a number of ms: '$v'" >&2; exit 2; }
  done
  for v in "$RATE_MBIT" "$REQUESTS" "$REQUESTS_ONE" "$INFLIGHT" "$VALUE_LEN" "$REPS" "$VERIFY_SAMPLE" "$SWEEP_REPS"; do
    [[ $v =~ ^[0-9]+$ ]] || { echo "$ME: not a whole number: '$v'" >&2; exit 2; }
  done
  ((RATE_MBIT > 0 && REPS > 0 && INFLIGHT > 0)) || { echo "$ME: --rate_mbit, --reps and --inflight must be > 0" >&2; exit 2; }
}

parse_args "$@"

# ---------------------------------------------------------------- naming

# In --run-point mode these come from the calling run's state file instead.
TAG=rkvlan$$                 # prefix of everything a run creates (<= 15-char link names)
SUBNET=10.214.$(($$ % 200 + 20))
HOSTS=3                      # member hosts; the client is one more
PORT=7001                    # the delaying proxy on each member host (cluster file address)
PLAIN_PORT=7003              # the delay-free proxy (the proxy's own cost)
SERVER_PORT=7002             # raftkv-server, on 127.0.0.1 inside its host
API_PORT=8474                # the proxy's REST API, on 127.0.0.1 inside its host
WORK=""
declare -a PROXY_PIDS=()     # PROXY_PIDS[i] = lanproxy of member host i
declare -a SERVER_PIDS=()    # SERVER_PIDS[i] = raftkv-server of member i (current run)

# say (progress to stderr), skip (exit 77), on_exit, remove_at_exit,
# kill_wait, wait_for
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
# FAIL (exit 1) naming the script: it also runs under bench_sweep.py
# (--run-point), among that program's output.
fail() {
  echo "FAIL: $ME: $*" >&2
  exit 1
}

# ns, veth, ip_of, addr_of, in_ns, add_host, create_network, remove_own_netns_objects,
# remove_stale_runs
# shellcheck source-path=SCRIPTDIR source=lib/netns_hosts.sh
source "$REPO_ROOT/scripts/lib/netns_hosts.sh"
CLIENT_IP=$SUBNET.100

# ---------------------------------------------------------------- clean-up

# At the exit of the owning run (on_exit): kills servers and proxies.
kill_servers_and_proxies() { kill_wait KILL "${SERVER_PIDS[@]}" "${PROXY_PIDS[@]}"; }

# ---------------------------------------------------------------- prerequisites

# Skips (77) without root, iproute2 or curl; fails without the binaries.
check_prerequisites() {
  [[ $(id -u) == 0 ]] || skip "needs root to create network namespaces, veth pairs, a bridge and qdiscs (running as uid $(id -u))"
  command -v ip >/dev/null 2>&1 || skip "the ip command (iproute2) is not installed"
  command -v tc >/dev/null 2>&1 || skip "the tc command (iproute2) is not installed"
  command -v curl >/dev/null 2>&1 || skip "curl is not installed (it configures the proxies)"
  command -v python3 >/dev/null 2>&1 || fail "python3 is needed to read the JSON reports"
  local b
  for b in "$SERVER" "$CTL" "$BENCH"; do
    [[ -x $b ]] || fail "$b not found (build raftkv-server, raftkvctl and raftkv-bench, or set RAFTKV_BIN_DIR)"
  done
}

# Sets LANPROXY: $RAFTKV_LANPROXY, or tools/lanproxy built with Go into
# ~/.cache/raftkv/lanproxy-<hash of its sources> (once; Toxiproxy and its
# dependencies come from the Go module proxy at the versions in go.sum).
ensure_lanproxy() {
  if [[ -n ${RAFTKV_LANPROXY:-} ]]; then
    [[ -x $RAFTKV_LANPROXY ]] || fail "RAFTKV_LANPROXY=$RAFTKV_LANPROXY is not an executable"
    LANPROXY=$RAFTKV_LANPROXY
    return
  fi
  local src=$REPO_ROOT/tools/lanproxy hash go
  hash=$(cat "$src/main.go" "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-12)
  LANPROXY=${XDG_CACHE_HOME:-$HOME/.cache}/raftkv/lanproxy-$hash
  [[ -x $LANPROXY ]] && return
  go=$(command -v go || true)
  [[ -z $go && -x /usr/local/go/bin/go ]] && go=/usr/local/go/bin/go
  [[ -n $go ]] || skip "Go is needed once to build tools/lanproxy (or set RAFTKV_LANPROXY)"
  say "building tools/lanproxy (Toxiproxy + latency_us) into $LANPROXY"
  mkdir -p "$(dirname "$LANPROXY")"
  (cd "$src" && nice -n 10 "$go" build -trimpath -o "$LANPROXY.tmp" .) ||
    fail "go build of tools/lanproxy failed"
  mv "$LANPROXY.tmp" "$LANPROXY"
}

# ---------------------------------------------------------------- the network

# Creates host $1 (namespace) with its link $2 on the bridge and address $3,
# and shapes the link to --rate_mbit in both directions.
shaped_host() {
  add_host "$@" || return
  shape "$2" ""          # into the host
  shape eth0 "$1"        # out of the host
}

# A token bucket of --rate_mbit on device $1 (in namespace $2, "" = root).
# Burst: 1 ms at the line rate, at least 32 KiB (veth hands over TSO
# segments of up to 64 KiB; tbf splits the larger ones); packets may queue
# 100 ms before they are dropped.
shape() {
  local dev=$1 n=$2 burst
  burst=$((RATE_MBIT * 1000000 / 8 / 1000))
  ((burst < 32768)) && burst=32768
  if [[ -n $n ]]; then
    tc -n "$n" qdisc replace dev "$dev" root tbf rate "${RATE_MBIT}mbit" burst "$burst" latency 100ms
  else
    tc qdisc replace dev "$dev" root tbf rate "${RATE_MBIT}mbit" burst "$burst" latency 100ms
  fi
}

# Microseconds of a millisecond value $1 (e.g. 0.25 -> 250).
us_of() { python3 -c "import sys; print(int(round(float(sys.argv[1]) * 1000)))" "$1"; }

# Starts lanproxy on every member host: proxy "lan" on <ip>:7001 with the
# latency toxics (rtt/2 +/- jitter/2 each way), proxy "plain" on <ip>:7003
# without; both forward to 127.0.0.1:7002 on that host.
start_proxies() {
  local i n api half jit s
  half=$(($(us_of "$RTT_MS") / 2))
  jit=$(($(us_of "$JITTER_MS") / 2))
  for ((i = 1; i <= HOSTS; i++)); do
    n=$(ns "$i")
    # (ip netns exec, not in_ns: $! must be the proxy itself, for kill and /proc.)
    ip netns exec "$n" "$LANPROXY" -host 127.0.0.1 -port "$API_PORT" \
      </dev/null >"$WORK/proxy$i.out" 2>&1 &
    PROXY_PIDS[$i]=$!
  done
  for ((i = 1; i <= HOSTS; i++)); do
    n=$(ns "$i")
    api=http://127.0.0.1:$API_PORT
    wait_for 5 in_ns "$n" curl -sf "$api/version" >/dev/null 2>&1 ||
      fail "proxy on host $i did not answer on $api"
    in_ns "$n" curl -sf -X POST "$api/proxies" \
      -d "{\"name\":\"lan\",\"listen\":\"$(ip_of "$i"):$PORT\",\"upstream\":\"127.0.0.1:$SERVER_PORT\"}" >/dev/null ||
      fail "proxy on host $i: cannot create the delaying proxy"
    in_ns "$n" curl -sf -X POST "$api/proxies" \
      -d "{\"name\":\"plain\",\"listen\":\"$(ip_of "$i"):$PLAIN_PORT\",\"upstream\":\"127.0.0.1:$SERVER_PORT\"}" >/dev/null ||
      fail "proxy on host $i: cannot create the delay-free proxy"
    if ((half > 0 || jit > 0)); then
      for s in upstream downstream; do
        in_ns "$n" curl -sf -X POST "$api/proxies/lan/toxics" \
          -d "{\"name\":\"$s\",\"type\":\"latency_us\",\"stream\":\"$s\",\"attributes\":{\"latency\":$half,\"jitter\":$jit}}" >/dev/null ||
          fail "proxy on host $i: cannot add the $s latency toxic"
      done
    fi
  done
  HALF_US=$half
  JIT_US=$jit
  say "proxies up on $HOSTS hosts: <ip>:$PORT delays each direction by ${half} us +/- ${jit} us; <ip>:$PLAIN_PORT does not"
}

# Sets the latency of both toxics of every host's delaying proxy to $1 us
# (+/- $JIT_US); HALF_US = $1.
set_toxics() {
  local i s
  for ((i = 1; i <= HOSTS; i++)); do
    for s in upstream downstream; do
      in_ns "$(ns "$i")" curl -sf -X POST "http://127.0.0.1:$API_PORT/proxies/lan/toxics/$s" \
        -d "{\"attributes\":{\"latency\":$1,\"jitter\":$JIT_US}}" >/dev/null ||
        fail "proxy on host $i: cannot change the $s latency toxic"
    done
  done
  HALF_US=$1
}

# p50 in microseconds of Echo (64 B, so that --rate_mbit does not count),
# one in flight, 1000 requests, from host $1 to
# the single endpoint $2 (the leader must be behind it).
echo_p50_us() {
  timeout 120 ip netns exec "$1" "$BENCH" --gtest_filter=Benchmark.Echo --target="$2" --requests=1000 \
    --inflight=1 --conns=1 --value_len=64 --json_out="$WORK/calibrate.json" \
    </dev/null >"$WORK/calibrate.out" 2>&1 || fail "Echo from $1 to $2 failed: $WORK/calibrate.out"
  python3 -c 'import json, sys; print(round(json.load(open(sys.argv[1]))[0]["latency_us"]["p50"]))' \
    "$WORK/calibrate.json"
}

# The toxics wait on a high-resolution timer, but waking the waiting
# goroutine and handing the chunk to the one that writes it take time: on
# this VM each delayed crossing came out 40-130 us longer than asked. Measures the
# round trip the delaying proxy adds to an unloaded call (Echo p50 through
# <ip>:7001 minus through <ip>:7003, on the leader's host) and lowers the
# toxics' latency by the excess, up to 3 times, until it is within 20 us
# (or 5 %) of --rtt_ms. Needs a running cluster. Sets CALIBRATION (a summary).
calibrate() {
  local target half added excess tol i plain lan
  target=$(us_of "$RTT_MS")
  half=$HALF_US
  tol=$((target / 20 > 20 ? target / 20 : 20))
  CALIBRATION="none (no delay)"
  ((target > 0)) || return 0
  for ((i = 1; i <= 4; i++)); do
    # Two of each, alternating, averaged: one pair alone varies by +/- 60 us here.
    plain=$(echo_p50_us "$CL_NS" "$(ip_of "$LEADER"):$PLAIN_PORT")
    lan=$(echo_p50_us "$CL_NS" "$(addr_of "$LEADER")")
    plain=$(((plain + $(echo_p50_us "$CL_NS" "$(ip_of "$LEADER"):$PLAIN_PORT")) / 2))
    lan=$(((lan + $(echo_p50_us "$CL_NS" "$(addr_of "$LEADER")")) / 2))
    added=$((lan - plain))
    excess=$((added - target))
    say "calibration $i: toxics ${half} us each way -> Echo p50 $lan us, delay-free $plain us: adds $added us (target $target us)"
    CALIBRATION="toxics ${half} us +/- ${JIT_US} us each way; added round trip $added us (Echo p50 $lan us vs $plain us without delay), target $target us"
    if (((excess < 0 ? -excess : excess) <= tol || i == 4)); then break; fi
    half=$((half - excess / 2))
    ((half < 0)) && half=0
    set_toxics "$half"
  done
  say "calibrated: $CALIBRATION"
}

# Writes the state a --run-point child needs (it runs under bench_sweep.py).
write_state() {
  # declare -g: the child sources this inside a function.
  declare -p TAG SUBNET HOSTS WORK RTT_MS JITTER_MS RATE_MBIT CLIENT_IP PROXY_PIDS HALF_US JIT_US CALIBRATION |
    sed 's/^declare -\([a-z-]*\) /declare -g\1 /; s/^declare -g- /declare -g /' >"$WORK/state.env"
}

# ---------------------------------------------------------------- the cluster

RUN_NO=0
MEMBERS=0
LEADER=0

# Starts a fresh cluster of members 1..$1 (new data directories); sets
# MEMBERS, RUN_DIR, SERVER_PIDS and LEADER once every member agrees on one.
start_cluster() {
  local m=$1 i h
  ((m <= HOSTS)) || fail "a cluster of $m members needs $m hosts, this run has $HOSTS"
  MEMBERS=$m
  RUN_NO=$((RUN_NO + 1))
  RUN_DIR=$WORK/cluster-$$-$RUN_NO
  mkdir -p "$RUN_DIR"
  {
    echo "# raftkv cluster membership (written by scripts/lan_bench.sh): <id> <host:port>"
    for ((i = 1; i <= m; i++)); do echo "$i $(addr_of "$i")"; done
  } >"$RUN_DIR/cluster.conf"
  SERVER_PIDS=()
  for ((i = 1; i <= m; i++)); do
    h=$RUN_DIR/host$i
    mkdir -p "$h/data" "$h/logs"
    ip netns exec "$(ns "$i")" "$SERVER" --id="$i" --cluster_file="$RUN_DIR/cluster.conf" \
      --data_dir="$h/data" --log_dir="$h/logs" --listen_address="127.0.0.1:$SERVER_PORT" \
      --logbufsecs=0 </dev/null >"$h/server.out" 2>&1 &
    SERVER_PIDS[$i]=$!
  done
  wait_leader 30 || fail "no leader that all $m members agree on within 30 s (logs: $RUN_DIR)"
}

# The members' addresses, comma-separated.
member_eps() {
  local i out=""
  for ((i = 1; i <= MEMBERS; i++)); do out+="${out:+,}$(addr_of "$i")"; done
  echo "$out"
}

# Waits at most $1 s until every member answers Status through its proxy and
# names the same leader; sets LEADER.
wait_leader() { wait_for "$1" set_leader; }

# Sets LEADER if every member answers Status through its proxy and names the
# same leader; else fails.
set_leader() {
  local json id
  json=$(timeout 20 ip netns exec "$CL_NS" "$CTL" --endpoints="$(member_eps)" --rpc_timeout_ms=1000 \
    --timeout_ms=1500 status --json 2>/dev/null || true)
  id=$(python3 - "$json" "$MEMBERS" <<'EOF'
import json, sys
try:
    nodes = json.loads(sys.argv[1])
except ValueError:
    sys.exit(1)
if len(nodes) != int(sys.argv[2]) or any("error" in n for n in nodes):
    sys.exit(1)
leaders = [n for n in nodes if n["role"] == "leader"]
if len(leaders) != 1 or any(n["leader_id"] != leaders[0]["id"] for n in nodes):
    sys.exit(1)
print(leaders[0]["id"])
EOF
  ) || return 1
  LEADER=$id
}

# Stops the current cluster (SIGKILL: its data is thrown away) and removes
# its directory unless $1 = keep.
stop_cluster() {
  kill_wait KILL "${SERVER_PIDS[@]}"
  SERVER_PIDS=()
  [[ ${1:-} == keep ]] || rm -rf "$RUN_DIR"
}

# ---------------------------------------------------------------- measuring

# CPU seconds (user + system) of the processes $@, from /proc/<pid>/stat.
cpu_of() {
  python3 - "$@" <<'EOF'
import os, sys
tck = os.sysconf("SC_CLK_TCK")
total = 0
for pid in sys.argv[1:]:
    try:
        stat = open("/proc/%s/stat" % pid).read()
    except OSError:
        continue
    f = stat[stat.rindex(")") + 2:].split()
    total += int(f[11]) + int(f[12])  # utime, stime (fields 14 and 15)
print("%.2f" % (total / tck))
EOF
}

# Runs raftkv-bench "$@" from the client host against the current cluster,
# JSON to $1; around it samples the CPU of the servers and of the proxies
# and adds them to the report as "lan": {...}. Returns raftkv-bench's status.
bench_lan() {
  local json=$1 rc=0 srv0 srv1 lead0 lead1 px0 px1 out
  shift
  out=${json%.json}.out
  srv0=$(cpu_of "${SERVER_PIDS[@]}")
  lead0=$(cpu_of "${SERVER_PIDS[$LEADER]}")
  px0=$(cpu_of "${PROXY_PIDS[@]}")
  timeout 900 ip netns exec "$CL_NS" "$BENCH" --target="$(member_eps)" "$@" --json_out="$json" \
    </dev/null >"$out" 2>&1 || rc=$?
  srv1=$(cpu_of "${SERVER_PIDS[@]}")
  lead1=$(cpu_of "${SERVER_PIDS[$LEADER]}")
  px1=$(cpu_of "${PROXY_PIDS[@]}")
  [[ -s $json ]] || { say "raftkv-bench wrote no report (exit $rc); output: $out"; tail -n 20 "$out" >&2; return 1; }
  python3 - "$json" "$srv0" "$srv1" "$lead0" "$lead1" "$px0" "$px1" "$MEMBERS" "$RTT_MS" \
    "$JITTER_MS" "$RATE_MBIT" <<'EOF'
import json, sys
path = sys.argv[1]
s0, s1, l0, l1, p0, p1 = map(float, sys.argv[2:8])
reports = json.load(open(path))
for r in reports:
    r["lan"] = {
        "members": int(sys.argv[8]), "rtt_ms": float(sys.argv[9]),
        "jitter_ms": float(sys.argv[10]), "rate_mbit": int(sys.argv[11]),
        # Over the whole raftkv-bench process (connect, leader lookup, timed
        # part, read-back of the verification sample), not the timed part only.
        "window": "process",
        "server_cpu_seconds": round(s1 - s0, 2),
        "leader_cpu_seconds": round(l1 - l0, 2),
        "proxy_cpu_seconds": round(p1 - p0, 2),
    }
json.dump(reports, open(path, "w"), indent=1)
EOF
  return "$rc"
}

# Echo at one in flight to the leader three ways (the round trip check),
# JSON to $1-{direct,plain,lan}.json: from the leader's own host to
# 127.0.0.1:7002 (no proxy), from the client host through the delay-free
# proxy (<ip>:7003) and through the delaying one (<ip>:7001).
rtt_check() {
  local base=$1 args=(--gtest_filter=Benchmark.Echo --requests="$REQUESTS_ONE" --inflight=1 --conns=1
                      --value_len="$VALUE_LEN")
  timeout 300 ip netns exec "$(ns "$LEADER")" "$BENCH" --target="127.0.0.1:$SERVER_PORT" "${args[@]}" \
    --json_out="$base-direct.json" </dev/null >"$base-direct.out" 2>&1 || fail "echo check (direct): $base-direct.out"
  timeout 300 ip netns exec "$CL_NS" "$BENCH" --target="$(ip_of "$LEADER"):$PLAIN_PORT" "${args[@]}" \
    --json_out="$base-plain.json" </dev/null >"$base-plain.out" 2>&1 || fail "echo check (plain proxy): $base-plain.out"
  timeout 300 ip netns exec "$CL_NS" "$BENCH" --target="$(addr_of "$LEADER")" "${args[@]}" \
    --json_out="$base-lan.json" </dev/null >"$base-lan.out" 2>&1 || fail "echo check (delaying proxy): $base-lan.out"
  if command -v ping >/dev/null 2>&1; then
    ip netns exec "$CL_NS" ping -c 20 -i 0.01 -q "$(ip_of "$LEADER")" >"$base-ping.out" 2>&1 || true
  fi
}

# One-line summary of a report: ops/s, p50, p99.
brief() {
  python3 - "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))[0]
print("%.0f ops/s, p50 %.2f ms, p99 %.2f ms%s" % (r["ops_per_sec"], r["latency_us"]["p50"] / 1e3,
      r["latency_us"]["p99"] / 1e3, "" if r["passed"] else "  NOT PASSED"))
EOF
}

# ---------------------------------------------------------------- modes

# Default mode: --reps x (echo check, LAN at --inflight and 1, loopback at
# --inflight and 1), then the summary and the 'lan:' line.
run_default() {
  local rep d w=(--gtest_filter=Benchmark.Write --value_len="$VALUE_LEN" --verify_sample="$VERIFY_SAMPLE")
  local extra=()
  read -r -a extra <<<"$BENCH_ARGS"
  local many=("${w[@]}" --requests="$REQUESTS" --inflight="$INFLIGHT" "${extra[@]}")
  local one=("${w[@]}" --requests="$REQUESTS_ONE" --inflight=1 --conns=1 "${extra[@]}")
  mkdir -p "$WORK/results"
  for ((rep = 1; rep <= REPS; rep++)); do
    d=$WORK/results/rep$rep
    mkdir -p "$d"
    start_cluster 3
    rtt_check "$d/echo"
    say "rep $rep: echo 1 in flight: direct $(brief "$d/echo-direct.json" | cut -d, -f2); plain proxy $(brief "$d/echo-plain.json" | cut -d, -f2); delaying proxy $(brief "$d/echo-lan.json" | cut -d, -f2)"
    bench_lan "$d/lan-one.json" "${one[@]}" || fail "LAN Write, 1 in flight (rep $rep): see $d/lan-one.out"
    say "rep $rep: LAN      Write   1 in flight: $(brief "$d/lan-one.json")"
    stop_cluster
    start_cluster 3
    bench_lan "$d/lan-many.json" "${many[@]}" || fail "LAN Write, $INFLIGHT in flight (rep $rep): see $d/lan-many.out"
    say "rep $rep: LAN      Write $INFLIGHT in flight: $(brief "$d/lan-many.json")"
    stop_cluster
    timeout 900 "$BENCH" "${many[@]}" --followers=2 --json_out="$d/loop-many.json" </dev/null \
      >"$d/loop-many.out" 2>&1 || fail "loopback Write, $INFLIGHT in flight (rep $rep): see $d/loop-many.out"
    say "rep $rep: loopback Write $INFLIGHT in flight: $(brief "$d/loop-many.json")"
    timeout 900 "$BENCH" "${one[@]}" --followers=2 --json_out="$d/loop-one.json" </dev/null \
      >"$d/loop-one.out" 2>&1 || fail "loopback Write, 1 in flight (rep $rep): see $d/loop-one.out"
    say "rep $rep: loopback Write   1 in flight: $(brief "$d/loop-one.json")"
  done
  summarize
}

# Prints the table of the default mode (medians and min-max over the reps)
# and, last, the 'lan:' line.
summarize() {
  python3 - "$WORK/results" "$REPS" "$RTT_MS" "$JITTER_MS" "$RATE_MBIT" "$INFLIGHT" "$CALIBRATION" "$LOAD_START" <<'EOF'
import json, os, re, statistics, sys
root, reps = sys.argv[1], int(sys.argv[2])
rtt, jitter, rate, inflight = sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
calibration, load_start = sys.argv[7], sys.argv[8]
def load(rep, name):
    return json.load(open(os.path.join(root, "rep%d" % rep, name + ".json")))[0]
runs = {n: [load(i, n) for i in range(1, reps + 1)]
        for n in ("lan-many", "lan-one", "loop-many", "loop-one", "echo-direct", "echo-plain",
                  "echo-lan")}
def stat(vals, digits):
    m = statistics.median(vals)
    if len(vals) == 1:
        return m, "%.*f" % (digits, m)
    return m, "%.*f (%.*f-%.*f)" % (digits, m, digits, min(vals), digits, max(vals))
def ms(name, key, digits=2):
    return stat([r["latency_us"][key] / 1e3 for r in runs[name]], digits)
def ops(name):
    return stat([r["ops_per_sec"] for r in runs[name]], 0)
def per_req_us(name, part):
    vals = []
    for r in runs[name]:
        if part in ("server", "proxy", "leader"):
            v = r["lan"][part + "_cpu_seconds"]
        else:
            c = r["cpu_seconds"]
            v = c[part] if part != "servers" else c["leader"] + c["followers"]
        vals.append(v / r["acknowledged"] * 1e6)
    return stat(vals, 0)
failed = sum(1 for v in runs.values() for r in v if not r["passed"])
print()
print("emulated LAN: rtt %s ms +/- %s ms, %s Mbit/s per link; 3 members + client on 4 hosts;"
      " medians of %d rep(s), (min-max)" % (rtt, jitter, rate, reps))
print("%-34s %-24s %-22s %-22s" % ("run", "ops/s", "p50 ms", "p99 ms"))
for name, label in (("lan-many", "LAN Write, %s in flight" % inflight),
                    ("loop-many", "loopback Write, %s in flight" % inflight),
                    ("lan-one", "LAN Write, 1 in flight"),
                    ("loop-one", "loopback Write, 1 in flight"),
                    ("echo-direct", "Echo 1 in flight, leader's host"),
                    ("echo-plain", "Echo 1, delay-free proxy"),
                    ("echo-lan", "Echo 1, delaying proxy")):
    print("%-34s %-24s %-22s %-22s" % (label, ops(name)[1], ms(name, "p50", 3)[1],
                                       ms(name, "p99", 3)[1]))
# Per repetition, then the median: the two Echo runs of a pair ran back to back.
added = stat([(a["latency_us"]["p50"] - b["latency_us"]["p50"]) / 1e3
              for a, b in zip(runs["echo-lan"], runs["echo-plain"])], 3)
own = stat([(a["latency_us"]["p50"] - b["latency_us"]["p50"]) / 1e3
            for a, b in zip(runs["echo-plain"], runs["echo-direct"])], 3)
pings = []
for i in range(1, reps + 1):
    path = os.path.join(root, "rep%d" % i, "echo-ping.out")
    m = re.search(r"= [0-9.]+/([0-9.]+)/", open(path).read()) if os.path.exists(path) else None
    if m:
        pings.append(float(m.group(1)))
print("round trip check (Echo p50, 1 in flight): the delaying proxy adds %s ms to the "
      "delay-free one (configured %s ms); the proxy itself adds %s ms to a call made on the "
      "leader's host%s" % (added[1], rtt, own[1],
                           "; ping client -> leader's host (no proxy) %s ms" % stat(pings, 3)[1]
                           if pings else ""))
print("calibration: %s" % calibration)
print("CPU per acknowledged write, us (LAN: servers and proxies over the whole bench process;"
      " loopback: timed part):")
print("  LAN %s in flight:      client %s, servers %s (leader %s), proxies %s" % (
    inflight, per_req_us("lan-many", "client")[1], per_req_us("lan-many", "server")[1],
    per_req_us("lan-many", "leader")[1], per_req_us("lan-many", "proxy")[1]))
print("  loopback %s in flight: client %s, servers %s" % (
    inflight, per_req_us("loop-many", "client")[1], per_req_us("loop-many", "servers")[1]))
print("  LAN 1 in flight:        client %s, servers %s, proxies %s" % (
    per_req_us("lan-one", "client")[1], per_req_us("lan-one", "server")[1],
    per_req_us("lan-one", "proxy")[1]))
print("  loopback 1 in flight:   client %s, servers %s" % (
    per_req_us("loop-one", "client")[1], per_req_us("loop-one", "servers")[1]))
print("load average (1 min) at the start %s, at the end %.2f; %s cores" % (
    load_start, os.getloadavg()[0], os.cpu_count()))
if failed:
    print("WARNING: %d run(s) did not pass their checks (see the .out files)" % failed)
n, m = ops("lan-many")[0], ops("loop-many")[0]
x = ms("lan-one", "p50")[0]
print("lan: write_ops=%d loopback_ops=%d ratio=%.2f one_client_p50_ms=%.2f rtt_ms=%s" % (
    round(n), round(m), n / m, x, rtt))
EOF
}

# --sweep: bench_sweep.py with this script (--run-point) as its raftkv-bench,
# and (unless --sweep_no_loopback) the same sweep on loopback, alternating
# one repetition of each (a burst of outside load then hits both alike);
# the repetitions are merged and the LAN plots drawn with the loopback
# Write line beside them.
run_sweep() {
  local dir=${SWEEP_DIR:-$(mktemp -d /tmp/raftkv-lan-sweep-XXXXXX)} wrapper rc=0 note rep kind
  local common=(--followers="$SWEEP_FOLLOWERS" --value-lens="$SWEEP_VALUE_LENS" --inflights=
                --verify-sample="$VERIFY_SAMPLE")
  note="emulated LAN: rtt $RTT_MS ms +/- $JITTER_MS ms, $RATE_MBIT Mbit/s per link"
  wrapper=$WORK/raftkv-bench-on-lan
  cat >"$wrapper" <<EOF
#!/usr/bin/env bash
# raftkv-bench on the emulated LAN of lan_bench.sh run $$ (made for bench_sweep.py)
RKVLAN_STATE=$WORK/state.env RAFTKV_BIN_DIR=$BIN_DIR RAFTKV_LANPROXY=$LANPROXY exec bash $SELF --run-point "\$@"
EOF
  chmod +x "$wrapper"
  local kinds=(lan)
  ((SWEEP_LOOPBACK)) && kinds+=(loopback)
  for ((rep = 1; rep <= SWEEP_REPS; rep++)); do
    for kind in "${kinds[@]}"; do
      mkdir -p "$dir/$kind/rep$rep"
      say "sweep, repetition $rep of $SWEEP_REPS, on $kind: $dir/$kind/rep$rep"
      local bench=$BENCH
      [[ $kind == lan ]] && bench=$wrapper
      # shellcheck disable=SC2086  # --sweep_args is a list of flags
      python3 "$REPO_ROOT/scripts/bench_sweep.py" --bench="$bench" --work-dir="$dir/$kind/rep$rep" \
        "${common[@]}" --images-dir="$dir/$kind/rep$rep/images" --doc="$dir/$kind/rep$rep/page.md" \
        $SWEEP_ARGS --reps=1 >&2 || rc=$?
    done
  done
  for kind in "${kinds[@]}"; do
    merge_sweeps "$dir/$kind" || fail "no results in $dir/$kind"
  done
  local compare=()
  [[ -f $dir/loopback/results.json ]] &&
    compare=(--compare-json="$dir/loopback/results.json" --compare-label="loopback, same sitting")
  # The LAN page is generated for its tables; the loopback one too (no plots kept).
  python3 "$REPO_ROOT/scripts/bench_sweep.py" --from-json="$dir/lan/results.json" "${compare[@]}" \
    --image-prefix=lan_ --images-dir="$IMAGES_DIR" --doc="$dir/lan/lan-benchmark.md" --plot-note="$note" \
    --series-label=LAN >&2 || fail "bench_sweep.py could not draw the plots"
  if [[ -f $dir/loopback/results.json ]]; then
    python3 "$REPO_ROOT/scripts/bench_sweep.py" --from-json="$dir/loopback/results.json" \
      --images-dir="$dir/loopback/images" --doc="$dir/loopback/loopback-benchmark.md" >&2 || true
  fi
  python3 - "$dir" "$IMAGES_DIR" <<'EOF'
import json, os, sys
d = sys.argv[1]
runs = json.load(open(os.path.join(d, "lan", "results.json")))["runs"]
loop = os.path.join(d, "loopback", "results.json")
lr = json.load(open(loop))["runs"] if os.path.exists(loop) else []
print("lan-sweep: runs=%d failed=%d loopback_runs=%d loopback_failed=%d images=%s/lan_*.png "
      "results=%s" % (len(runs), sum(1 for r in runs if not r["passed"]), len(lr),
                      sum(1 for r in lr if not r["passed"]), sys.argv[2], d))
EOF
  return "$rc"
}

# Merges $1/rep*/results.json into $1/results.json (one sweep of N
# repetitions, as bench_sweep.py --reps=N would have written it).
merge_sweeps() {
  python3 - "$1" <<'EOF'
import glob, json, os, re, sys
d = sys.argv[1]
paths = sorted(glob.glob(os.path.join(d, "rep*", "results.json")),
               key=lambda p: int(re.search(r"rep(\d+)", p).group(1)))
if not paths:
    sys.exit(1)
merged = None
for k, path in enumerate(paths, 1):
    data = json.load(open(path))
    if merged is None:
        merged = {"meta": data["meta"], "runs": []}
        merged["meta"]["sweep_seconds"] = 0
    for run in data["runs"]:
        run["rep"] = k
        merged["runs"].append(run)
    merged["meta"]["sweep_seconds"] += data["meta"].get("sweep_seconds", 0)
    for key in ("finished", "loadavg_end", "fsync_end"):
        merged["meta"][key] = data["meta"].get(key)
merged["meta"]["reps"] = len(paths)
json.dump(merged, open(os.path.join(d, "results.json"), "w"), indent=1)
EOF
}

# --run-point (child of bench_sweep.py): one raftkv-bench run on a fresh
# cluster of 1 + --followers members on the calling run's LAN.
run_point() {
  [[ -n ${RKVLAN_STATE:-} && -r $RKVLAN_STATE ]] || fail "--run-point is for bench_sweep.py under lan_bench.sh --sweep (RKVLAN_STATE unset)"
  # shellcheck disable=SC1090
  source "$RKVLAN_STATE"
  CL_NS=$TAG-cl
  local a followers=2 json="" args=()
  for a in "${POINT_ARGS[@]}"; do
    case $a in
      --followers=*) followers=${a#*=} ;;
      --json_out=*) json=${a#*=} ;;
      *) args+=("$a") ;;
    esac
  done
  [[ -n $json ]] || fail "--run-point needs --json_out="
  trap 'stop_cluster keep' EXIT
  start_cluster $((followers + 1))
  echo "lan_bench.sh --run-point: $MEMBERS members on $(member_eps), leader $LEADER; rtt $RTT_MS ms +/- $JITTER_MS ms, $RATE_MBIT Mbit/s"
  local rc=0
  bench_lan "$json" "${args[@]}" --followers="$followers" || rc=$?
  cat "${json%.json}.out"
  trap - EXIT
  if ((rc == 0)); then stop_cluster; else stop_cluster keep; fi
  return "$rc"
}

# ---------------------------------------------------------------- main

if ((RUN_POINT)); then
  run_point
  exit $?
fi
check_prerequisites
LOAD_START=$(cut -d' ' -f1 /proc/loadavg)
remove_stale_runs rkvlan
ensure_lanproxy
if ((SWEEP)); then
  HOSTS=$(python3 -c "import sys; print(max(3, 1 + max(int(x) for x in sys.argv[1].split(',') if x.strip())))" "$SWEEP_FOLLOWERS")
fi
# On any exit, the last first: servers and proxies killed, the network
# removed, the work directory removed unless the run failed (or RAFTKV_LAN_KEEP=1).
WORK=$(mktemp -d "/tmp/$TAG.XXXXXX")
remove_at_exit "$WORK" "$ME: work directory kept: $WORK" "${RAFTKV_LAN_KEEP:-0}"
on_exit remove_own_netns_objects
on_exit kill_servers_and_proxies
create_network "$HOSTS" "$CLIENT_IP" shaped_host  # the bridge, $HOSTS member hosts and the client host
start_proxies
if ((CALIBRATE)); then
  start_cluster 3
  calibrate
  stop_cluster
else
  CALIBRATION="off (--no_calibrate): toxics $HALF_US us +/- $JIT_US us each way"
fi
write_state
say "network up: $HOSTS member hosts $(ip_of 1)..$(ip_of "$HOSTS"), client $CLIENT_IP; rtt $RTT_MS ms +/- $JITTER_MS ms, $RATE_MBIT Mbit/s; work directory $WORK"
if ((SWEEP)); then
  run_sweep
else
  run_default
fi
