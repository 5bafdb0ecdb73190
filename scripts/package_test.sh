#!/usr/bin/env bash
# Installing raftkv, as a user would:
#  1. `cmake --install` into a fresh prefix: the programs, the client
#     library's headers and archives, the CMake package, the license; no
#     system files outside the prefix.
#  2. An external CMake project (examples/external_client) finds the package
#     and links raftkv::client; it writes and reads through a one-member
#     cluster started from the installed raftkv-server.
#  3. `cpack -G DEB`: the package holds the programs, the systemd unit, the
#     configuration (as conffiles) and the maintainer scripts; as root it is
#     installed with apt-get, which creates the raftkv user and directories,
#     the installed server runs as that user from the packaged flag file,
#     and the package is purged again.
# Run by ctest with RAFTKV_BIN_DIR set to the build directory.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# fail, step, remove_at_exit, on_exit, kill_wait
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
. "$REPO_ROOT/scripts/lib/ports.sh"  # free_port
: "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory}"
BUILD=$(cd "$RAFTKV_BIN_DIR" && pwd)
WORK=$(mktemp -d /tmp/raftkv-package.XXXXXX)
remove_at_exit "$WORK" "package_test: work kept in $WORK"
pids=()  # the servers started by start_member
stop_members() {
  kill_wait TERM "${pids[@]}"
  pids=()
}
on_exit stop_members

# Starts raftkv-server ($1) as a one-member cluster on a free port, with the
# rest of the arguments; sets MEMBER (its endpoint) once it answers.
MEMBER=
start_member() {
  local server=$1; shift
  local port; port=$(free_port)
  "$server" "$@" --listen_address=127.0.0.1:"$port" >"$WORK/server-$port.out" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do
    if "$PREFIX/bin/raftkvctl" --endpoints=127.0.0.1:"$port" --timeout_ms=500 endpoint health >/dev/null 2>&1; then
      MEMBER=127.0.0.1:$port
      return 0
    fi
    sleep 0.1
  done
  cat "$WORK/server-$port.out" >&2
  return 1
}

# ---- 1. cmake --install ----
step "cmake --install $BUILD --prefix $WORK/prefix"
PREFIX=$WORK/prefix
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" || { cat "$WORK/install.log" >&2; fail "cmake --install"; }
libdir=lib
[ -d "$PREFIX/lib64" ] && libdir=lib64
for f in bin/raftkv-server bin/raftkvctl include/raftkv/client/kv_client.h include/raftkv/proto/api.h \
         include/raftkv/raftkv/v1/kv.pb.h include/raftkv/raftkv/v1/kv.grpc.pb.h include/raftkv/common/status.h \
         "$libdir/libraftkv_client.a" "$libdir/libraftkv_proto.a" "$libdir/cmake/raftkv/raftkvConfig.cmake" \
         "$libdir/cmake/raftkv/raftkvConfigVersion.cmake" share/doc/raftkv/LICENSE share/raftkv/protos/raftkv/v1/kv.proto; do
  [ -e "$PREFIX/$f" ] || fail "cmake --install did not install $f"
done
if grep -E '^-- (Installing|Up-to-date): /(etc|lib)/' "$WORK/install.log"; then
  fail "a plain cmake --install wrote outside its prefix"
fi
# No internal (peer protocol) header is part of the installed API.
[ ! -e "$PREFIX/include/raftkv/raftkv/internal" ] || fail "internal headers installed"
"$PREFIX/bin/raftkvctl" --version | grep -q '^raftkvctl version: ' || fail "installed raftkvctl --version"

# ---- 2. an external project against the installed package ----
step "external CMake project: find_package(raftkv), raftkv::client"
cmake -S "$REPO_ROOT/examples/external_client" -B "$WORK/ext" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DCMAKE_BUILD_TYPE=Release >"$WORK/ext-configure.log" 2>&1 ||
  { cat "$WORK/ext-configure.log" >&2; fail "configuring the external project"; }
cmake --build "$WORK/ext" >"$WORK/ext-build.log" 2>&1 || { tail -40 "$WORK/ext-build.log" >&2; fail "building the external project"; }
printf '1 127.0.0.1:1\n' >"$WORK/cluster.conf"  # the member's advertised address is not dialed in a one-member cluster
start_member "$PREFIX/bin/raftkv-server" --id=1 --cluster_file="$WORK/cluster.conf" \
  --data_dir="$WORK/data" --log_dir="$WORK/logs" || fail "the installed raftkv-server did not start"
ep=$MEMBER
out=$("$WORK/ext/raftkv_hello" "$ep") || fail "raftkv_hello against $ep: $out"
[ "$out" = "hello = world" ] || fail "raftkv_hello printed '$out'"
[ "$("$PREFIX/bin/raftkvctl" --endpoints="$ep" get --print-value-only hello)" = world ] || fail "raftkvctl get hello"
kill "${pids[-1]}"; wait "${pids[-1]}" || fail "the installed raftkv-server did not stop cleanly on SIGTERM"
echo "external project: raftkv_hello wrote and read through the installed server"

# ---- 3. the .deb ----
step "cpack -G DEB"
(cd "$BUILD" && cpack -G DEB >"$WORK/cpack.log" 2>&1) || { tail -40 "$WORK/cpack.log" >&2; fail "cpack -G DEB"; }
deb=$(ls -t "$BUILD"/raftkv_*.deb | head -1)
[ -f "$deb" ] || fail "cpack made no raftkv_*.deb"
contents=$(dpkg-deb -c "$deb")
for f in ./usr/bin/raftkv-server ./usr/bin/raftkvctl ./lib/systemd/system/raftkv@.service \
         ./etc/raftkv/node1.flags ./etc/raftkv/cluster.conf ./usr/include/raftkv/client/kv_client.h \
         ./usr/share/doc/raftkv/LICENSE; do
  grep -q " $f\$" <<<"$contents" || fail "$deb lacks $f"
done
info=$(dpkg-deb -I "$deb")
grep -q '^ Depends:.*libgrpc++' <<<"$info" || fail "the package does not depend on gRPC: $info"
grep -q '^ Depends:.*adduser' <<<"$info" || fail "the package does not depend on adduser"
[ "$(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)" = "$(printf '/etc/raftkv/node1.flags\n/etc/raftkv/cluster.conf')" ] ||
  fail "conffiles"
echo "package: $(basename "$deb"): programs, unit, configuration, maintainer scripts"

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "package_test: not root (or no apt-get): the .deb was built and inspected, not installed"
  exit 0
fi
if dpkg-query -W -f='${Status}' raftkv 2>/dev/null | grep -q 'install ok installed'; then
  echo "package_test: a raftkv package is installed on this machine already; not touching it"
  exit 0
fi
step "apt-get install $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$deb" >"$WORK/apt.log" 2>&1 ||
  { tail -30 "$WORK/apt.log" >&2; fail "apt-get install of the package"; }
purge() { DEBIAN_FRONTEND=noninteractive apt-get purge -y raftkv >"$WORK/purge.log" 2>&1; }
# Purged at exit (before the servers are stopped) unless the test purged it.
installed=1
purge_at_exit() { [ "$installed" = 0 ] || purge; }
on_exit purge_at_exit
getent passwd raftkv >/dev/null || fail "the package created no raftkv user"
[ "$(stat -c %U /var/lib/raftkv)" = raftkv ] || fail "/var/lib/raftkv is not owned by raftkv"
[ -x /usr/bin/raftkv-server ] || fail "/usr/bin/raftkv-server missing after the install"
# The packaged flag file, as the raftkv user (systemd's unit does the same;
# where systemd is not PID 1 the server is started directly). Port and
# directories are moved so that the test touches nothing of the machine's.
install -d -o raftkv -g raftkv "$WORK/pkg"
chmod 755 "$WORK"
if [ -d /run/systemd/system ]; then
  echo "systemd is running: checking the unit file"
  systemd-analyze verify /lib/systemd/system/raftkv@.service || fail "systemd-analyze verify raftkv@.service"
fi
start_member runuser -u raftkv -- /usr/bin/raftkv-server --flagfile=/etc/raftkv/node1.flags \
  --metrics_port="$(free_port)" --data_dir="$WORK/pkg/data" --log_dir="$WORK/pkg/logs" ||
  fail "the packaged raftkv-server did not start from /etc/raftkv/node1.flags"
ep=$MEMBER
/usr/bin/raftkvctl --endpoints="$ep" put pkg yes >/dev/null || fail "put through the packaged server"
[ "$(/usr/bin/raftkvctl --endpoints="$ep" get --print-value-only pkg)" = yes ] || fail "get through the packaged server"
[ "$(stat -c %U "$WORK/pkg/data")" = raftkv ] || fail "the packaged server's data is not owned by raftkv"
# The external project again, against the package's /usr (stripped archives).
cmake -S "$REPO_ROOT/examples/external_client" -B "$WORK/ext-deb" -DCMAKE_BUILD_TYPE=Release \
  >"$WORK/ext-deb.log" 2>&1 && cmake --build "$WORK/ext-deb" >>"$WORK/ext-deb.log" 2>&1 ||
  { tail -40 "$WORK/ext-deb.log" >&2; fail "building the external project against the installed package"; }
grep -q "raftkv_DIR:PATH=/usr/lib/cmake/raftkv" "$WORK/ext-deb/CMakeCache.txt" ||
  fail "the external project did not find the package under /usr: $(grep raftkv_DIR "$WORK/ext-deb/CMakeCache.txt")"
out=$("$WORK/ext-deb/raftkv_hello" "$ep") || fail "raftkv_hello (package build) against $ep: $out"
[ "$out" = "hello = world" ] || fail "raftkv_hello (package build) printed '$out'"
kill "${pids[-1]}" 2>/dev/null || true
pkill -TERM -u raftkv -f /usr/bin/raftkv-server 2>/dev/null || true
wait 2>/dev/null || true
pids=()
step "apt-get purge raftkv"
purge || { tail -20 "$WORK/purge.log" >&2; fail "apt-get purge raftkv"; }
installed=0
[ ! -e /usr/bin/raftkv-server ] || fail "/usr/bin/raftkv-server still there after the purge"
[ ! -e /etc/raftkv/node1.flags ] || fail "/etc/raftkv/node1.flags still there after the purge"
if getent passwd raftkv >/dev/null; then fail "the raftkv user is still there after the purge"; fi
echo "package installed, served as the raftkv user from its configuration, purged"
echo "package_test: PASS"
