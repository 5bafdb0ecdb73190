# shellcheck shell=bash
# Sourced by the scripts under scripts/ (not run): the helpers they share.
# It sets no shell options; each script keeps its own `set -euo pipefail`.
#
# Messages. ME names the script in them (default: the script's file name).
#   say MESSAGE    "$ME: MESSAGE" on stderr: progress, notes
#   die MESSAGE    say MESSAGE, then exit 1
#   fail MESSAGE   "FAIL: MESSAGE" on stderr, then exit 1: a test's check failed
#   skip MESSAGE   "SKIP: $ME: MESSAGE" on stdout, then exit 77 (ctest's
#                  SKIP_RETURN_CODE): this machine cannot run the test
#   step MESSAGE   "--- MESSAGE" on stdout: the next part of a test
#
# Clean-up at exit, however the script ends (its end, exit, die/fail, set -e,
# SIGINT or SIGTERM): what is registered runs the last registered first, as
# resources are released in the reverse order of their creation; each part
# runs whether the others failed or not; then the script exits with its own
# status (130 after SIGINT, 143 after SIGTERM).
#   on_exit COMMAND [ARG...]      runs COMMAND with these words at exit (a
#                                 function reads its variables then)
#   remove_at_exit DIR [KEPT_MESSAGE [KEEP]]
#                                 removes DIR if the script exits 0 (or 77,
#                                 skipped) and KEEP is not 1; else prints
#                                 KEPT_MESSAGE (default "files kept in DIR")
#                                 on stderr
#   stop_cluster_at_exit DATA     `scripts/cluster.sh stop` of the cluster in
#                                 DATA (its RAFTKV_DATA), quietly
# The first on_exit sets the EXIT, INT and TERM traps: a script that uses it
# sets none of its own.
#
# Processes and waiting.
#   kill_wait SIGNAL PID...       SIGNAL (TERM, KILL, ...) to every PID, then
#                                 waits for each; never fails (empty PIDs,
#                                 processes gone already)
#   wait_for SECONDS COMMAND [ARG...]
#                                 runs COMMAND every 0.2 s until it succeeds;
#                                 status 1 if it has not within SECONDS

say() { echo "${ME:-${0##*/}}: $*" >&2; }
die() {
  say "$*"
  exit 1
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
skip() {
  echo "SKIP: ${ME:-${0##*/}}: $*"
  exit 77
}
step() { echo "--- $*"; }

_COMMON_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_EXIT_COMMANDS=()  # registered by on_exit, each as shell-quoted words
_EXIT_STATUS=0     # the script's exit status, while the commands run
_EXITING=0
_EXIT_OWNER=""     # the process whose exit runs them (not a child forked by it)

on_exit() {
  if ((${#_EXIT_COMMANDS[@]} == 0)); then
    _EXIT_OWNER=$BASHPID
    trap _run_exit_commands EXIT
    # A signal becomes an exit with the shell's usual status: the EXIT trap
    # then sees it (it would see 0 otherwise) and keeps the files.
    trap 'exit 130' INT
    trap 'exit 143' TERM
  fi
  _EXIT_COMMANDS+=("$(printf '%q ' "$@")")
}

# The EXIT trap: every registered command, the last first, with errexit and
# nounset off; once only (a signal during the clean-up exits at once), and
# only in the script's own process (a child forked for `cmd &` still has the
# traps until it runs cmd).
_run_exit_commands() {
  # Names unlikely in a script: the commands run inside this function and
  # would see these locals in place of the script's variables of that name.
  local _exit_status=$? _exit_i
  if ((_EXITING)) || [[ $BASHPID != "$_EXIT_OWNER" ]]; then return; fi
  _EXITING=1
  _EXIT_STATUS=$_exit_status
  set +eu
  for ((_exit_i = ${#_EXIT_COMMANDS[@]} - 1; _exit_i >= 0; _exit_i--)); do
    eval "${_EXIT_COMMANDS[_exit_i]}"
  done
  exit "$_exit_status"
}

remove_at_exit() {
  on_exit _remove_if_passed "$1" "${2:-files kept in $1}" "${3:-0}"
}

_remove_if_passed() {  # DIR KEPT_MESSAGE KEEP
  [[ -d $1 ]] || return 0
  if [[ ($_EXIT_STATUS == 0 || $_EXIT_STATUS == 77) && $3 != 1 ]]; then
    rm -rf "$1"
  else
    echo "$2" >&2
  fi
}

stop_cluster_at_exit() {
  local data=$1
  # A relative one as cluster.sh resolves it, against the current directory
  # of now (the script may change it later).
  [[ $data == /* ]] || data=$PWD/${data#./}
  on_exit _stop_cluster "$data"
}

_stop_cluster() {  # DATA
  RAFTKV_DATA=$1 bash "$_COMMON_LIB_DIR/../cluster.sh" stop >/dev/null 2>&1
}

# start_test_cluster N NAME: scripts/cluster.sh start N in a new directory
# /tmp/raftkv-NAME.XXXXXX (removed at exit if the script passed, else kept
# and named), on free ports, stopped at exit. Exports RAFTKV_DATA and
# RAFTKV_BASE_PORT (an exported RAFTKV_BASE_PORT is kept); sets ENDPOINTS
# (comma-separated) and EP (an array of them).
start_test_cluster() {
  local n=$1 name=$2
  RAFTKV_DATA=$(mktemp -d "/tmp/raftkv-$name.XXXXXX")
  export RAFTKV_DATA
  remove_at_exit "$RAFTKV_DATA" "data kept in $RAFTKV_DATA"
  stop_cluster_at_exit "$RAFTKV_DATA"
  # shellcheck source=ports.sh
  . "$_COMMON_LIB_DIR/ports.sh"
  export RAFTKV_BASE_PORT=${RAFTKV_BASE_PORT:-$(free_base_port $((n + 2)))}
  ENDPOINTS=$(bash "$_COMMON_LIB_DIR/../cluster.sh" start "$n" | sed -n 's/^ENDPOINTS=//p')
  [ -n "$ENDPOINTS" ] || fail "cluster.sh start printed no ENDPOINTS line"
  IFS=, read -r -a EP <<<"$ENDPOINTS"
  [ "${#EP[@]}" = "$n" ] || fail "expected $n endpoints, got $ENDPOINTS"
}

kill_wait() {
  local sig=$1 pid
  shift
  for pid in "$@"; do
    if [[ -n $pid ]]; then kill -s "$sig" "$pid" 2>/dev/null || true; fi
  done
  for pid in "$@"; do
    if [[ -n $pid ]]; then wait "$pid" 2>/dev/null || true; fi
  done
}

wait_for() {
  local end=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < end)) || return 1
    sleep 0.2
  done
}
