# shellcheck shell=bash
# Emulated hosts in network namespaces, shared by scripts/multihost_test.sh
# and scripts/lan_bench.sh (sourced, not run). Every object of one run is
# named after its TAG (<prefix><pid>): namespaces $TAG-n<i> and $TAG-cl, a
# bridge ${TAG}b, root-namespace veth ends ${TAG}v<i> and ${TAG}vc.
# The caller sets TAG, SUBNET (three octets), PORT and ME, and has sourced
# scripts/lib/common.sh (say, skip, fail).

ns() { echo "$TAG-n$1"; }     # namespace ("host") of member $1
CL_NS=$TAG-cl                   # the client host
veth() { echo "${TAG}v$1"; }  # root-namespace end of member $1's link
CL_VETH=${TAG}vc
ip_of() { echo "$SUBNET.$1"; }  # address of member host $1
addr_of() { echo "$(ip_of "$1"):$PORT"; }
in_ns() {  # in_ns NAMESPACE CMD...: runs CMD on that host
  local n=$1
  shift
  ip netns exec "$n" "$@"
}

# add_host NAMESPACE VETH ADDRESS: a host on the run's bridge.
add_host() {
  local n=$1 v=$2 a=$3
  ip netns list | awk '{print $1}' | grep -qx "$n" || ip netns add "$n"
  ip link add "$v" type veth peer name eth0 netns "$n"
  ip link set "$v" master "${TAG}b" up
  ip -n "$n" addr add "$a/24" dev eth0
  ip -n "$n" link set eth0 up
  ip -n "$n" link set lo up
}

# create_network N CLIENT_IP [ADD_HOST]: the run's bridge, member hosts 1..N
# and the client host ($CL_NS at CLIENT_IP), each made by ADD_HOST (default
# add_host, same arguments). Where this machine (container) cannot create a
# namespace or a bridge, a limit of the machine, skips (exit 77); fails if a
# host cannot be made.
create_network() {
  local n=$1 client_ip=$2 add=${3:-add_host} out i
  if ! out=$(ip netns add "$CL_NS" 2>&1); then
    skip "cannot create a network namespace ('ip netns add' said: $out)"
  fi
  if ! out=$(ip link add "${TAG}b" type bridge 2>&1); then
    skip "cannot create a bridge ('ip link add type bridge' said: $out)"
  fi
  ip link set "${TAG}b" up
  for ((i = 1; i <= n; i++)); do
    "$add" "$(ns "$i")" "$(veth "$i")" "$(ip_of "$i")" || fail "setup: host $i"
  done
  "$add" "$CL_NS" "$CL_VETH" "$client_ip" || fail "setup: client host"
}

# Removes one run's namespaces, links and bridge (tag $1); kills what still
# runs inside its namespaces.
remove_netns_objects() {
  local tag=$1 n pid
  for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$tag-" || true); do
    for pid in $(ip netns pids "$n" 2>/dev/null || true); do
      kill -9 "$pid" 2>/dev/null || true
    done
  done
  # Host ends first: deleting a namespace frees its veths only asynchronously.
  for n in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
      grep "^${tag}v" || true); do
    ip link del "$n" 2>/dev/null || true
  done
  for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$tag-" || true); do
    ip netns del "$n" 2>/dev/null || true
  done
  ip link del "${tag}b" 2>/dev/null || true
}

# This run's remove_netns_objects, at its end: says so if anything is left.
remove_own_netns_objects() {
  remove_netns_objects "$TAG"
  if ip netns list 2>/dev/null | grep -q "^$TAG-" || ip link show "${TAG}b" >/dev/null 2>&1; then
    say "warning: could not remove every $TAG-* namespace or link"
  fi
}

# Leftovers of runs that died without their trap (SIGKILL): <prefix><pid>-*
# objects (prefix $1) whose pid is no longer a running instance of $ME.
remove_stale_runs() {
  local prefix=$1 tag pid
  for tag in $( (ip netns list 2>/dev/null | awk '{print $1}'
                ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//') |
                sed -n "s/^\\(${prefix}[0-9][0-9]*\\)[-bv].*/\\1/p" | sort -u); do
    pid=${tag#"$prefix"}
    [[ $pid == "$$" ]] && continue
    if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "$ME"; then
      continue  # a live parallel run
    fi
    say "removing leftovers of an earlier run: $tag-*"
    remove_netns_objects "$tag"
  done
}
