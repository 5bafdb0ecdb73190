# shellcheck shell=bash
# Real etcd for the tests that hold raftkv to what etcd does (sourced after
# common.sh and ports.sh).
#
# start_etcd_cluster DIR [FLAG...]: 3 members of Debian's etcd on free
# ports, data and logs under DIR/etcd (fsync on: no --unsafe-no-fsync),
# each started with the FLAGs too, stopped at exit; sets ENDPOINTS and EP
# like start_test_cluster.
ETCD_PIDS=()
start_etcd_cluster() {
  local dir=$1 base initial="" i
  shift
  base=$(free_base_port 6)
  for i in 0 1 2; do
    initial+="${initial:+,}m$i=http://127.0.0.1:$((base + 4 + i))"
  done
  mkdir -p "$dir/etcd"
  on_exit _stop_etcd
  for i in 0 1 2; do
    local client=http://127.0.0.1:$((base + 1 + i)) peer=http://127.0.0.1:$((base + 4 + i))
    etcd --name "m$i" --data-dir "$dir/etcd/m$i" \
      --listen-client-urls "$client" --advertise-client-urls "$client" \
      --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
      --initial-cluster "$initial" --initial-cluster-state new \
      --initial-cluster-token "etcd-test-$$" --logger zap "$@" \
      >"$dir/etcd/m$i.log" 2>&1 &
    ETCD_PIDS+=($!)
  done
  ENDPOINTS=127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2)),127.0.0.1:$((base + 3))
  IFS=, read -r -a EP <<<"$ENDPOINTS"
  wait_for 30 _etcd_healthy || fail "etcd did not become healthy in 30 s (logs in $dir/etcd)"
}
_etcd_healthy() {
  local ep
  for ep in ${ENDPOINTS//,/ }; do
    python3 - "$ep" <<'PY' 2>/dev/null || return 1
import json, sys, urllib.request
with urllib.request.urlopen("http://%s/health" % sys.argv[1], timeout=2) as r:
    sys.exit(0 if json.load(r).get("health") == "true" else 1)
PY
  done
}
# Stops the members started so far (and forgets them).
_stop_etcd() {
  ((${#ETCD_PIDS[@]} == 0)) || kill_wait TERM "${ETCD_PIDS[@]}"
  ETCD_PIDS=()
}
