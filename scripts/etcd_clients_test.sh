#!/usr/bin/env bash
# etcd's real clients against an etcd v3 API: the Go client (clientv3 and its
# concurrency package: mutex, election, STM) and python-etcd3, through the
# programs of tests/etcd-clients/, against a real 3-member etcd cluster
# (Debian's etcd-server) and against a 3-member raftkv cluster from
# scripts/cluster.sh. Every expectation is checked against etcd first; a
# check that passes on etcd and fails on raftkv is printed as a difference.
#
#   etcd_clients_test.sh [--target=etcd|raftkv|both] [--checks=LIST]
#
# --target   default both (etcd first); raftkv needs RAFTKV_BIN_DIR.
# --checks   comma-separated names or "all": Go checks (kv, mutex,
#            mutex-expiry, election, stm, watch, lease) and python-etcd3
#            checks (py-kv, py-watch, py-lock, py-lease). Default: all.
# Skipped (77) without Go, Python 3 or (for the etcd target) etcd.
#   RAFTKV_KEEP_WORK=1  keep the work directory (builds, venv, etcd data, logs)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ME=etcd_clients_test
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/ports.sh
source "$REPO_ROOT/scripts/lib/ports.sh"
# shellcheck source-path=SCRIPTDIR source=lib/etcd.sh
source "$REPO_ROOT/scripts/lib/etcd.sh"

ALL_CHECKS=kv,mutex,mutex-expiry,election,stm,watch,lease,py-kv,py-watch,py-lock,py-lease
# python-etcd3 0.12.0 ships protobuf 3 generated modules (protobuf < 4) and
# uses tenacity's old wait-callback signature (tenacity < 8).
PY_PINS=(etcd3==0.12.0 protobuf==3.20.3 grpcio==1.85.1 tenacity==6.3.1 six==1.17.0)
CLIENTS_DIR=$REPO_ROOT/tests/etcd-clients

target=both checks=""
for arg in "$@"; do
  case $arg in
    --target=etcd | --target=raftkv | --target=both) target=${arg#--target=} ;;
    --checks=*) checks=${arg#--checks=} ;;
    *) die "unknown argument '$arg' (usage: [--target=etcd|raftkv|both] [--checks=LIST])" ;;
  esac
done
[[ $checks != all ]] || checks=$ALL_CHECKS
for c in ${checks//,/ }; do
  [[ ,$ALL_CHECKS, == *",$c,"* ]] || die "unknown check '$c' (known: $ALL_CHECKS)"
done

GO=$(command -v go || echo /usr/local/go/bin/go)
[[ -x $GO ]] || skip "Go not found (the Go client check is built with go build)"
command -v python3 >/dev/null 2>&1 || skip "python3 not found"
python3 -c 'import venv, ensurepip' 2>/dev/null || skip "python3 cannot make a venv (Debian: python3-venv)"
if [[ $target != raftkv ]]; then
  command -v etcd >/dev/null 2>&1 || skip "etcd not found (Debian: etcd-server; scripts/install-deps.sh)"
fi
if [[ $target != etcd ]]; then
  : "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory (or use --target=etcd)}"
  RAFTKV_BIN_DIR=$(cd "$RAFTKV_BIN_DIR" && pwd)
  export RAFTKV_BIN_DIR
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/raftkv-etcd-clients.XXXXXX")
remove_at_exit "$WORK" "$ME: builds, venv, etcd data and logs kept in $WORK" "${RAFTKV_KEEP_WORK:-0}"

step "build tests/etcd-clients/go ($("$GO" version | cut -d' ' -f3))"
(cd "$CLIENTS_DIR/go" && "$GO" build -buildvcs=false -o "$WORK/bin/etcd-client-check" .) ||
  fail "go build of tests/etcd-clients/go failed"
step "venv for python-etcd3: ${PY_PINS[*]}"
python3 -m venv "$WORK/venv" || fail "python3 -m venv failed"
PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 \
  "$WORK/venv/bin/python" -m pip install -q "${PY_PINS[@]}" || fail "pip install ${PY_PINS[*]} failed"

declare -A RESULT  # RESULT[target:check] = PASS or FAIL: why

# run_checks TARGET LIST: both programs against ENDPOINTS; records RESULT.
run_checks() {
  local tgt=$1 list=$2 go_list="" py_list="" c out rc
  for c in ${list//,/ }; do
    if [[ $c == py-* ]]; then py_list+="${py_list:+,}$c"; else go_list+="${go_list:+,}$c"; fi
  done
  out=$WORK/$tgt.out
  : >"$out"
  if [[ -n $go_list ]]; then
    rc=0
    timeout --kill-after=10 600 "$WORK/bin/etcd-client-check" --endpoints="$ENDPOINTS" \
      --checks="$go_list" | tee -a "$out" || rc=$?
    ((rc <= 1)) || echo "FAIL go-program: etcd-client-check exited $rc" | tee -a "$out"
  fi
  if [[ -n $py_list ]]; then
    rc=0
    timeout --kill-after=10 300 "$WORK/venv/bin/python" "$CLIENTS_DIR/python/etcd3_check.py" \
      --endpoints="$ENDPOINTS" --checks="$py_list" | tee -a "$out" || rc=$?
    ((rc <= 1)) || echo "FAIL py-program: etcd3_check.py exited $rc" | tee -a "$out"
  fi
  for c in ${list//,/ }; do
    local line
    line=$(grep -E "^(PASS|FAIL) ${c}[ :]" "$out" | head -1 || true)
    [[ -n $line ]] || line="FAIL $c: no result (the program ended before it)"
    if [[ $line == PASS* ]]; then RESULT[$tgt:$c]=PASS; else RESULT[$tgt:$c]=${line#FAIL "$c": }; fi
  done
}

targets=()
[[ $target == raftkv ]] || targets+=(etcd)
[[ $target == etcd ]] || targets+=(raftkv)
for tgt in "${targets[@]}"; do
  list=${checks:-$ALL_CHECKS}
  if [[ $tgt == etcd ]]; then
    step "etcd $(etcd --version | sed -n 's/^etcd Version: //p'): starting 3 members"
    start_etcd_cluster "$WORK"
  else
    step "raftkv: starting 3 members"
    start_test_cluster 3 etcd_clients
  fi
  step "$tgt at $ENDPOINTS: $list"
  run_checks "$tgt" "$list"
  [[ $tgt == raftkv ]] || _stop_etcd
done

step "summary"
failed=0
for c in ${ALL_CHECKS//,/ }; do
  line=""
  for tgt in "${targets[@]}"; do
    r=${RESULT[$tgt:$c]-}
    [[ -n $r ]] || continue
    [[ $r == PASS ]] || failed=$((failed + 1))
    line+="  $tgt: $r"
  done
  [[ -z $line ]] || printf '%-13s%s\n' "$c" "$line"
done
if [[ ${#targets[@]} == 2 ]]; then
  for c in ${ALL_CHECKS//,/ }; do
    e=${RESULT[etcd:$c]-} r=${RESULT[raftkv:$c]-}
    if [[ -n $e && -n $r && $e != "$r" && ($e == PASS || $r == PASS) ]]; then
      echo "DIFFERENCE $c: etcd: $e; raftkv: $r"
    fi
  done
fi
((failed == 0)) || fail "$failed check results failed"
echo "$ME: OK (${targets[*]})"
