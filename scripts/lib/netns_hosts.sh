# Emulated hosts in network namespaces, shared by scripts/multihost_test.sh
# and scripts/lan_bench.sh (sourced, not run). Every object of one run is
# named after its TAG (<prefix><pid>): namespaces $TAG-n<i> and $TAG-cl, a
# bridge ${TAG}b, root-namespace veth ends ${TAG}v<i> and ${TAG}vc.
# The caller sets TAG, SUBNET (three octets), PORT and ME, and defines say().

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
