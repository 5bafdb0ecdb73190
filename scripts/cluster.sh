#!/usr/bin/env bash
# Runs a local raftkv cluster for development and tests.
#
#   cluster.sh start N     start nodes 1..N, wait for a leader, print ENDPOINTS=...
#                          (and METRICS=... with RAFTKV_METRICS_BASE_PORT)
#   cluster.sh kill I      SIGKILL node I (no-op if it is not running)
#   cluster.sh restart I   start node I again on its existing data
#   cluster.sh stop        SIGTERM the followers, then the leader (so it does not
#                          try to hand leadership over); SIGKILL what is left after 5 s
#   cluster.sh status [..] raftkvctl status over all nodes (extra args passed on)
#   cluster.sh add I       start a new, empty node I (> N) with --join, add it as a learner,
#                          promote it to voter once caught up, print the member list
#   cluster.sh remove I    remove member I from the configuration, then stop node I
#                          (its directory is kept)
#   cluster.sh members [..] raftkvctl member list (extra args passed on, e.g. --json)
#
# Environment:
#   RAFTKV_BIN_DIR       where raftkv-server and raftkvctl are (default: <repo>/build)
#   RAFTKV_DATA          cluster directory (default ./data, resolved against the
#                        current directory)
#   RAFTKV_BASE_PORT     node I listens on 127.0.0.1:$((RAFTKV_BASE_PORT + I)) (default 7000)
#   RAFTKV_SERVER_FLAGS  extra raftkv-server flags, split on whitespace
#   RAFTKV_CTL_FLAGS     flags of every raftkvctl call this script makes (default:
#                        the client's part of RAFTKV_SERVER_FLAGS: --tls_ca_file,
#                        --tls_cert_file, --tls_key_file, --tls_server_name, and
#                        --admin_token_file (else --token_file) as --token_file),
#                        so a TLS or token cluster starts and answers as a plain one
#   RAFTKV_METRICS_BASE_PORT  node I serves Prometheus metrics on
#                        http://127.0.0.1:$((RAFTKV_METRICS_BASE_PORT + I))/metrics
#                        (--metrics_port and --metrics_address=127.0.0.1; default:
#                        none; one --metrics_port in RAFTKV_SERVER_FLAGS would give
#                        every node the same port)
#   RAFTKV_START_TIMEOUT_S  how long start/restart wait for a node to answer (default 15)
#   RAFTKV_CATCHUP_TIMEOUT_S  add: how long a new node may take to catch up before
#                        its promotion is given up (default 120)
#
# `start` records N, the base ports, the binary directory and the server flags
# in $RAFTKV_DATA/cluster.env; the other commands read them from there, so only
# RAFTKV_DATA (and the current directory, if it is relative) must match.
# `add` and `remove` update the node list there (NODES; JOINED: nodes added
# with `add`, which are not in cluster.conf and so are always started with
# --join and an explicit --listen_address). cluster.conf stays the bootstrap
# membership: the members' logs hold the configuration in effect.
# Layout: $RAFTKV_DATA/cluster.conf, and per node $RAFTKV_DATA/nodeI/{data,logs,
# server.out,pid}. Only the ENDPOINTS line (and the METRICS line, when the
# nodes serve metrics) goes to stdout; progress to stderr.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$SCRIPT_DIR")
ME=cluster.sh
# die, say (progress and notes to stderr)
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$SCRIPT_DIR/lib/common.sh"
HOST=127.0.0.1
START_TIMEOUT_S=${RAFTKV_START_TIMEOUT_S:-15}
STOP_TIMEOUT_S=5

# Set by load_env (or by cmd_start).
DATA=""
N=0
NODES=""   # ids of the cluster's nodes, space-separated
JOINED=""  # the ones added by `add`
BASE_PORT=7000
METRICS_BASE_PORT=""  # empty: no metrics endpoints
BIN_DIR=""
SERVER_FLAGS=""
CTL_FLAGS=""

usage() {
  cat >&2 <<'EOF'
usage: cluster.sh start N | kill I | restart I | stop | status [raftkvctl flags]
                  | add I | remove I | members [raftkvctl flags]
environment: RAFTKV_BIN_DIR (default <repo>/build), RAFTKV_DATA (default ./data),
             RAFTKV_BASE_PORT (default 7000), RAFTKV_SERVER_FLAGS,
             RAFTKV_METRICS_BASE_PORT (default: no metrics),
             RAFTKV_CATCHUP_TIMEOUT_S (default 120)
EOF
  exit 2
}

# Absolute form of a path, relative ones taken against the current directory.
abs_path() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s\n' "$PWD/${1#./}" ;;
  esac
}

# The cluster directory; does not need to exist.
data_dir() {
  abs_path "${RAFTKV_DATA:-./data}"
}

# Loads the cluster recorded by `start` in $DATA, or fails.
load_env() {
  DATA=$(data_dir)
  [[ -f $DATA/cluster.env ]] || die "no cluster in $DATA (run: cluster.sh start N)"
  # shellcheck source=/dev/null
  source "$DATA/cluster.env"
  if [[ -z $NODES ]]; then  # written by an older cluster.sh
    local i
    for ((i = 1; i <= N; i++)); do NODES+="${NODES:+ }$i"; done
  fi
  if [[ -n ${RAFTKV_BIN_DIR:-} ]]; then
    BIN_DIR=$(abs_path "$RAFTKV_BIN_DIR")
  fi
}

# Writes the cluster's settings and node list to $DATA/cluster.env.
save_env() {
  {
    echo "# written by scripts/cluster.sh start/add/remove; read by its other commands"
    printf 'N=%q\nNODES=%q\nJOINED=%q\nBASE_PORT=%q\nMETRICS_BASE_PORT=%q\nBIN_DIR=%q\nSERVER_FLAGS=%q\nCTL_FLAGS=%q\n' \
      "$N" "$NODES" "$JOINED" "$BASE_PORT" "$METRICS_BASE_PORT" "$BIN_DIR" "$SERVER_FLAGS" "$CTL_FLAGS"
  } >"$DATA/cluster.env.tmp"
  mv "$DATA/cluster.env.tmp" "$DATA/cluster.env"
}

port_of() {
  echo $((BASE_PORT + $1))
}

# The metrics port of node $1 (empty when the nodes serve no metrics).
metrics_port_of() {
  [[ -z $METRICS_BASE_PORT ]] || echo $((METRICS_BASE_PORT + $1))
}

# Succeeds if $1 is among the words of $2.
in_list() {
  [[ " $2 " == *" $1 "* ]]
}

# $2 without the word $1.
without() {
  local w out=""
  for w in $2; do [[ $w == "$1" ]] || out+="${out:+ }$w"; done
  echo "$out"
}

# Comma-separated addresses of the cluster's nodes.
endpoints() {
  local i eps=""
  for i in $NODES; do
    eps+="${eps:+,}$HOST:$(port_of "$i")"
  done
  echo "$eps"
}

# Comma-separated metrics URLs of the cluster's nodes.
metrics_urls() {
  local i urls=""
  for i in $NODES; do
    urls+="${urls:+,}http://$HOST:$(metrics_port_of "$i")/metrics"
  done
  echo "$urls"
}

# Fails (exit) if a port of node $1 -- its gRPC port, and its metrics port
# when it has one -- is taken.
check_ports_free() {
  local port
  for port in $(port_of "$1") $(metrics_port_of "$1"); do
    if port_in_use "$port"; then
      die "port $HOST:$port of node $1 is already in use (set RAFTKV_BASE_PORT or RAFTKV_METRICS_BASE_PORT?)"
    fi
  done
}

# Succeeds if $1 is the pid of a live (non-zombie) raftkv-server process.
pid_alive() {
  local pid=$1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  if [[ -r /proc/$pid/stat ]]; then
    local stat
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q raftkv-server || return 1
  elif command -v ps >/dev/null 2>&1; then
    ps -p "$pid" -o command= 2>/dev/null | grep -q raftkv-server || return 1
  fi
  return 0
}

# Prints the recorded pid of node $1 (empty if none).
node_pid() {
  local f=$DATA/node$1/pid
  if [[ -f $f ]]; then cat "$f"; fi
}

node_running() {
  pid_alive "$(node_pid "$1")"
}

# Succeeds if something accepts TCP connections on $HOST:$1.
port_in_use() {
  (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

check_node_arg() {
  [[ ${1:-} =~ ^[1-9][0-9]*$ ]] || usage
  in_list "$1" "$NODES" || die "no node $1: the cluster in $DATA has nodes ${NODES// /,}"
}

check_binaries() {
  local b
  for b in raftkv-server raftkvctl; do
    [[ -x $BIN_DIR/$b ]] || die "$BIN_DIR/$b not found (build it, or set RAFTKV_BIN_DIR)"
  done
}

# Starts node $1 in the background; $2 = "append" keeps the old server.out.
start_node() {
  local i=$1 mode=${2:-} d=$DATA/node$1 extra=()
  mkdir -p "$d/data" "$d/logs"
  read -r -a extra <<<"$SERVER_FLAGS"
  if in_list "$i" "$JOINED"; then
    # Not in cluster.conf: it learns the configuration from the leader.
    extra+=(--join "--listen_address=$HOST:$(port_of "$i")")
  fi
  if [[ -n $METRICS_BASE_PORT ]]; then
    # After RAFTKV_SERVER_FLAGS: each node its own port (gflags keeps the last).
    extra+=("--metrics_port=$(metrics_port_of "$i")" "--metrics_address=$HOST")
  fi
  if [[ $mode == append ]]; then
    echo "=== cluster.sh restart at $(date '+%Y-%m-%d %H:%M:%S') ===" >>"$d/server.out"
  else
    : >"$d/server.out"
  fi
  "$BIN_DIR/raftkv-server" --id="$i" --cluster_file="$DATA/cluster.conf" \
    --data_dir="$d/data" --log_dir="$d/logs" ${extra[@]+"${extra[@]}"} \
    </dev/null >>"$d/server.out" 2>&1 &
  echo $! >"$d/pid"
}

# Prints the last lines of each given node's server.out to stderr.
print_tails() {
  local i
  for i in "$@"; do
    echo "----- node $i: tail of $DATA/node$i/server.out -----" >&2
    tail -n 30 "$DATA/node$i/server.out" >&2 2>/dev/null || true
  done
}

# The client flags of a cluster whose servers run with flags $1: the TLS
# files, and the admin token (which grants every call) or the client token.
client_flags_of() {
  local f out="" token="" admin=""
  for f in $1; do
    case $f in
      --tls_ca_file=* | --tls_cert_file=* | --tls_key_file=* | --tls_server_name=*) out+="${out:+ }$f" ;;
      --token_file=*) token=${f#--token_file=} ;;
      --admin_token_file=*) admin=${f#--admin_token_file=} ;;
    esac
  done
  if [[ -n $admin ]]; then
    out+="${out:+ }--token_file=$admin"
  elif [[ -n $token ]]; then
    out+="${out:+ }--token_file=$token"
  fi
  echo "$out"
}

# raftkvctl with the cluster's client flags.
raftkvctl() {
  local extra=()
  read -r -a extra <<<"$CTL_FLAGS"
  "$BIN_DIR/raftkvctl" ${extra[@]+"${extra[@]}"} "$@"
}

# `raftkvctl status --json` over endpoints $1 (never fails).
status_json() {
  raftkvctl --endpoints="$1" --timeout_ms=1000 --rpc_timeout_ms=500 \
    status --json 2>/dev/null || true
}

# Sends signal $1 to the running nodes among $2 (node numbers; default:
# every node), waits up to STOP_TIMEOUT_S for them to exit, SIGKILLs the rest
# and removes their pid files. Prints how many were running.
stop_nodes() {
  local sig=$1 only=${2:-} f pid i
  local pids=() files=()
  for f in "$DATA"/node*/pid; do
    [[ -f $f ]] || continue
    i=${f%/pid}
    i=${i##*/node}
    if [[ -n $only ]] && ! in_list "$i" "$only"; then continue; fi
    files+=("$f")
    pid=$(cat "$f")
    if pid_alive "$pid"; then
      kill "-$sig" "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  local end=$((SECONDS + STOP_TIMEOUT_S)) left
  while :; do
    left=()
    for pid in ${pids[@]+"${pids[@]}"}; do
      if pid_alive "$pid"; then left+=("$pid"); fi
    done
    ((${#left[@]} > 0)) || break
    if ((SECONDS >= end)); then
      say "SIGKILL to ${left[*]} (still running after ${STOP_TIMEOUT_S}s)"
      kill -9 "${left[@]}" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f ${files[@]+"${files[@]}"}
  echo "${#pids[@]}"
}

cmd_start() {
  [[ ${1:-} =~ ^[1-9][0-9]*$ ]] || usage
  N=$1
  BASE_PORT=${RAFTKV_BASE_PORT:-7000}
  [[ $BASE_PORT =~ ^[0-9]+$ ]] || die "RAFTKV_BASE_PORT must be a number"
  ((BASE_PORT + N <= 65535)) || die "ports $((BASE_PORT + 1))..$((BASE_PORT + N)) out of range"
  METRICS_BASE_PORT=${RAFTKV_METRICS_BASE_PORT:-}
  if [[ -n $METRICS_BASE_PORT ]]; then
    [[ $METRICS_BASE_PORT =~ ^[0-9]+$ ]] || die "RAFTKV_METRICS_BASE_PORT must be a number"
    ((METRICS_BASE_PORT + N <= 65535)) ||
      die "metrics ports $((METRICS_BASE_PORT + 1))..$((METRICS_BASE_PORT + N)) out of range"
    ((METRICS_BASE_PORT + N <= BASE_PORT || METRICS_BASE_PORT >= BASE_PORT + N)) ||
      die "metrics ports $((METRICS_BASE_PORT + 1))..$((METRICS_BASE_PORT + N)) overlap the nodes' ports $((BASE_PORT + 1))..$((BASE_PORT + N))"
  fi
  BIN_DIR=$(abs_path "${RAFTKV_BIN_DIR:-$REPO_ROOT/build}")
  SERVER_FLAGS=${RAFTKV_SERVER_FLAGS:-}
  CTL_FLAGS=${RAFTKV_CTL_FLAGS-$(client_flags_of "$SERVER_FLAGS")}
  DATA=$(data_dir)
  check_binaries

  local f i
  for f in "$DATA"/node*/pid; do
    if [[ -f $f ]] && pid_alive "$(cat "$f")"; then
      die "a cluster from $DATA is already running (cluster.sh stop first)"
    fi
  done
  for ((i = 1; i <= N; i++)); do check_ports_free "$i"; done

  mkdir -p "$DATA"
  local conf
  conf=$(
    echo "# raftkv cluster membership, written by scripts/cluster.sh: <id> <host:port>"
    for ((i = 1; i <= N; i++)); do echo "$i $HOST:$(port_of "$i")"; done
  )
  if [[ -f $DATA/cluster.conf ]] && [[ $(cat "$DATA/cluster.conf") != "$conf" ]]; then
    say "warning: $DATA held a different cluster; its node data is reused as is"
  fi
  printf '%s\n' "$conf" >"$DATA/cluster.conf"
  NODES=""
  JOINED=""
  for ((i = 1; i <= N; i++)); do NODES+="${NODES:+ }$i"; done
  save_env

  for ((i = 1; i <= N; i++)); do start_node "$i"; done

  local eps nodes=() alive end=$((SECONDS + START_TIMEOUT_S))
  eps=$(endpoints)
  for ((i = 1; i <= N; i++)); do nodes+=("$i"); done
  while :; do
    if grep -q '"role": "leader"' <<<"$(status_json "$eps")"; then
      local dead=()
      for i in "${nodes[@]}"; do node_running "$i" || dead+=("$i"); done
      if ((${#dead[@]} == 0)); then
        echo "ENDPOINTS=$eps"
        [[ -z $METRICS_BASE_PORT ]] || echo "METRICS=$(metrics_urls)"
        return 0
      fi
      say "node(s) ${dead[*]} exited during start-up"
      print_tails "${dead[@]}"
      break
    fi
    alive=0
    for i in "${nodes[@]}"; do node_running "$i" && alive=$((alive + 1)); done
    if ((alive == 0)); then
      say "every node exited during start-up"
      print_tails "${nodes[@]}"
      break
    fi
    if ((SECONDS >= end)); then
      say "no leader elected within ${START_TIMEOUT_S}s"
      print_tails "${nodes[@]}"
      break
    fi
    sleep 0.2
  done
  say "stopping the nodes"
  stop_nodes TERM >/dev/null
  exit 1
}

cmd_kill() {
  load_env
  check_node_arg "${1:-}"
  local i=$1 pid
  pid=$(node_pid "$i")
  if ! pid_alive "$pid"; then
    say "node $i is not running"
    return 0
  fi
  kill -9 "$pid" 2>/dev/null || true
  local end=$((SECONDS + STOP_TIMEOUT_S))
  while pid_alive "$pid" && ((SECONDS < end)); do sleep 0.05; done
  # Its listening socket closes only once its last thread has exited, after
  # the process already shows as a zombie (a big one takes a while to let go
  # of its memory): a restart right away would find the port taken.
  while port_in_use "$(port_of "$i")" && ((SECONDS < end)); do sleep 0.05; done
  say "killed node $i (pid $pid)"
}

cmd_restart() {
  load_env
  check_node_arg "${1:-}"
  check_binaries
  local i=$1
  node_running "$i" && die "node $i is already running (pid $(node_pid "$i"))"
  check_ports_free "$i"
  start_node "$i" append
  wait_answers "$i"
  say "restarted node $i (pid $(node_pid "$i"))"
}

# Waits until node $1 answers Status (it need not have found a leader yet);
# exits if it dies or does not answer within START_TIMEOUT_S.
wait_answers() {
  local i=$1 port end=$((SECONDS + START_TIMEOUT_S)) out
  port=$(port_of "$i")
  while :; do
    out=$(status_json "$HOST:$port")
    [[ $out == *'"role": "'* && $out != *'"unreachable"'* ]] && break
    if ! node_running "$i"; then
      say "node $i exited during start-up"
      print_tails "$i"
      exit 1
    fi
    if ((SECONDS >= end)); then
      say "node $i did not answer within ${START_TIMEOUT_S}s"
      print_tails "$i"
      exit 1
    fi
    sleep 0.1
  done
}

# Stops node $1 (SIGTERM, SIGKILL after STOP_TIMEOUT_S); no-op if not running.
stop_one() {
  local i=$1 pid
  pid=$(node_pid "$i")
  if pid_alive "$pid"; then
    kill -TERM "$pid" 2>/dev/null || true
    local end=$((SECONDS + STOP_TIMEOUT_S))
    while pid_alive "$pid" && ((SECONDS < end)); do sleep 0.1; done
    if pid_alive "$pid"; then
      say "SIGKILL to node $i (still running after ${STOP_TIMEOUT_S}s)"
      kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$DATA/node$i/pid"
}

ctl() {
  raftkvctl --endpoints="$(endpoints)" "$@"
}

cmd_add() {
  load_env
  [[ ${1:-} =~ ^[1-9][0-9]*$ ]] || usage
  check_binaries
  local i=$1 port addr d=$DATA/node$1
  in_list "$i" "$NODES" && die "node $i is already a member (nodes: ${NODES// /,})"
  # An id in the bootstrap file would start as a voter of that configuration;
  # raftkv-server refuses --join for it.
  ((i > N)) || die "node $i is listed in $DATA/cluster.conf (the bootstrap members 1..$N); add a new member under a new id (> $N)"
  port=$(port_of "$i")
  ((port <= 65535)) || die "port $port of node $i is out of range"
  [[ -z $METRICS_BASE_PORT ]] || (($(metrics_port_of "$i") <= 65535)) ||
    die "metrics port $(metrics_port_of "$i") of node $i is out of range"
  addr=$HOST:$port
  node_running "$i" && die "node $i is already running (pid $(node_pid "$i"))"
  if [[ -d $d/data ]] && [[ -n $(ls -A "$d/data" 2>/dev/null) ]]; then
    die "$d/data is not empty: a new member must start empty (remove the directory first)"
  fi
  check_ports_free "$i"
  JOINED="$(without "$i" "$JOINED") $i"
  JOINED=${JOINED# }
  start_node "$i"
  wait_answers "$i"
  say "started node $i (pid $(node_pid "$i")) on $addr with --join"

  # Add it as a learner (through the current members, which find the leader).
  if ! ctl --timeout_ms=15000 member add "$i" "$addr" >&2; then
    say "could not add node $i; stopping it"
    stop_one "$i"
    JOINED=$(without "$i" "$JOINED")
    exit 1
  fi
  NODES+=" $i"
  save_env
  # Promote it once the leader considers it caught up (raftkvctl retries and
  # prints its progress meanwhile).
  local wait_s=${RAFTKV_CATCHUP_TIMEOUT_S:-120}
  [[ $wait_s =~ ^[0-9]+$ ]] || die "RAFTKV_CATCHUP_TIMEOUT_S must be a number of seconds"
  if ! ctl --timeout_ms=15000 --wait_timeout_ms=$((wait_s * 1000)) member promote "$i" >&2; then
    say "node $i was added as a learner but not promoted; retry with:"
    say "  $BIN_DIR/raftkvctl --endpoints=$(endpoints) member promote $i"
    exit 1
  fi
  ctl member list
}

cmd_remove() {
  load_env
  check_node_arg "${1:-}"
  local i=$1
  [[ $NODES == "$i" ]] && die "node $i is the last member; it cannot be removed"
  ctl --timeout_ms=15000 member remove "$i" >&2 || die "could not remove member $i"
  NODES=$(without "$i" "$NODES")
  JOINED=$(without "$i" "$JOINED")
  save_env
  stop_one "$i"
  say "removed member $i and stopped it; its data is kept in $DATA/node$i"
  ctl member list
}

cmd_members() {
  load_env
  [[ -x $BIN_DIR/raftkvctl ]] || die "$BIN_DIR/raftkvctl not found (build it, or set RAFTKV_BIN_DIR)"
  raftkvctl --endpoints="$(endpoints)" member list "$@"
}

cmd_stop() {
  DATA=$(data_dir)
  if [[ ! -d $DATA ]]; then
    say "no cluster in $DATA"
    return 0
  fi
  # The followers first, then the leader: a leader stopped with its
  # followers would spend up to --shutdown_transfer_ms handing leadership to
  # a member that is stopping too; alone, it finds no voter to hand over to.
  local leader="" n=0 m followers=""
  if [[ -f $DATA/cluster.env ]]; then
    load_env
    if [[ -x $BIN_DIR/raftkvctl ]]; then
      leader=$(status_json "$(endpoints)" | grep '"role": "leader"' | head -n1 |
        sed -E 's/.*"id": ([0-9]+).*/\1/')
    fi
    [[ -z $leader ]] || followers=$(without "$leader" "$NODES")
  fi
  if [[ -n $followers ]]; then
    m=$(stop_nodes TERM "$(without "$leader" "$NODES")")
    n=$((n + m))
    # The leader notices its followers are gone at its next heartbeat.
    sleep 0.3
  fi
  m=$(stop_nodes TERM)
  n=$((n + m))
  say "stopped $n node(s)${leader:+ (the leader, node $leader, last)}"
}

cmd_status() {
  load_env
  [[ -x $BIN_DIR/raftkvctl ]] || die "$BIN_DIR/raftkvctl not found (build it, or set RAFTKV_BIN_DIR)"
  raftkvctl --endpoints="$(endpoints)" status "$@"
}

main() {
  local cmd=${1:-}
  [[ $# -gt 0 ]] && shift
  case $cmd in
    start) [[ $# -eq 1 ]] || usage; cmd_start "$1" ;;
    kill) [[ $# -eq 1 ]] || usage; cmd_kill "$1" ;;
    restart) [[ $# -eq 1 ]] || usage; cmd_restart "$1" ;;
    stop) [[ $# -eq 0 ]] || usage; cmd_stop ;;
    status) cmd_status "$@" ;;
    add) [[ $# -eq 1 ]] || usage; cmd_add "$1" ;;
    remove) [[ $# -eq 1 ]] || usage; cmd_remove "$1" ;;
    members) cmd_members "$@" ;;
    *) usage ;;
  esac
}

main "$@"
