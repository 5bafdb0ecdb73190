#!/usr/bin/env bash
# Installs the build dependencies of raftkv.
#
#   install-deps.sh          everything the tests need (scripts/test.sh)
#   install-deps.sh --main   only what the main job needs (scripts/run.sh):
#                            the compiler, CMake and the libraries raftkv
#                            links, and Python with matplotlib for the table
#
# Debian/Ubuntu (apt-get): installs the missing packages (a no-op, without
# touching the network, when all are installed already). macOS and others:
# prints the Homebrew or vcpkg command to run and exits 0.
set -euo pipefail

MAIN_ONLY=0
case "${1:-}" in
  "") ;;
  --main) MAIN_ONLY=1 ;;
  *) echo "usage: install-deps.sh [--main]" >&2; exit 2 ;;
esac

# The main job's: building raftkv-server, raftkvctl and raftkv-bench, and
# the benchmark's table and plots.
MAIN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev
  librocksdb-dev  # the on-disk key-value engine (src/storage/rocksdb_backend)
  libboost-dev  # Boost.Asio (header-only): the metrics endpoint's HTTP server
  libtcmalloc-minimal4  # allocator of raftkv-server / raftkv-bench (CMakeLists.txt, RAFTKV_TCMALLOC)
  python3 python3-matplotlib
  openssl libssl-dev  # scripts/gen-certs.sh (test CA and certificates); certificate checks at start
)
# The tests' (scripts/test.sh) on top of those.
TEST_PACKAGES=(
  clang libclang-rt-dev  # scripts/fuzz.sh: libFuzzer and the sanitizer runtimes
  iproute2  # scripts/multihost_test.sh: ip netns, veth pairs, a bridge; ss
  protoc-gen-go protoc-gen-go-grpc  # scripts/api_stubs_test.sh: Go stubs from the v1 API
  prometheus  # promtool: scripts/metrics_check.sh lints the scrapes and deploy/prometheus rules
  etcd-client  # etcdctl: scripts/etcdctl_test.sh drives raftkv's etcd API with it
  etcd-server  # tests only: scripts/etcd_clients_test.sh checks etcd's clients against real etcd
  g++-mingw-w64-x86-64-posix  # scripts/cross_check.sh windows: MinGW-w64 cross compiler
  wine64  # scripts/cross_check.sh windows: runs the Windows smoke program
  python3-venv  # the virtualenv of Zig (install_zig below)
  file  # scripts/cross_check.sh macos: checks the smoke program is a Mach-O executable
)
APT_PACKAGES=("${MAIN_PACKAGES[@]}")
((MAIN_ONLY)) || APT_PACKAGES+=("${TEST_PACKAGES[@]}")

# Prints the packages of APT_PACKAGES that dpkg does not report as installed.
missing_apt_packages() {
  local pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
      echo "$pkg"
    fi
  done
}

install_apt() {
  local missing
  mapfile -t missing < <(missing_apt_packages)
  if [[ ${#missing[@]} -eq 0 ]]; then
    echo "install-deps: all dependencies are already installed."
    return 0
  fi
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "install-deps: not root and sudo is not available; run as root:" >&2
      echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  echo "install-deps: installing ${missing[*]}"
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    "${missing[@]}"
}

# grpcurl (the e2e test calls the API with it, as a user would) has no
# Debian package: built from its module with Go when Go is there, into
# $GOBIN or $(go env GOPATH)/bin, where scripts/e2e_cluster_test.sh looks.
GRPCURL_MODULE=github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4
install_grpcurl() {
  if command -v grpcurl >/dev/null 2>&1; then return 0; fi
  if ! command -v go >/dev/null 2>&1; then
    echo "install-deps: no Go here; the e2e test's grpcurl checks need: go install $GRPCURL_MODULE" >&2
    return 0
  fi
  local bin
  bin=$(go env GOBIN)
  [[ -n $bin ]] || bin=$(go env GOPATH)/bin
  if [[ -x $bin/grpcurl ]]; then return 0; fi
  echo "install-deps: go install $GRPCURL_MODULE"
  go install "$GRPCURL_MODULE"
}

# The Go modules of tests/etcd-clients/go (clientv3; scripts/etcd_clients_test.sh
# builds it), downloaded ahead when Go is there, as grpcurl is installed.
install_etcd_client_modules() {
  if ! command -v go >/dev/null 2>&1; then
    echo "install-deps: no Go here; scripts/etcd_clients_test.sh is skipped without it" >&2
    return 0
  fi
  echo "install-deps: go mod download in tests/etcd-clients/go"
  (cd "$(dirname "${BASH_SOURCE[0]}")/../tests/etcd-clients/go" && go mod download)
}

# Zig (scripts/cross_check.sh macos: its clang, macOS C library headers and
# libc++) has no Debian package: PyPI's ziglang, pinned, in a virtualenv of
# its own (Debian's pip does not install into the system, PEP 668), where
# cross_check.sh looks. A no-op, without the network, when that version is
# there.
ZIGLANG_VERSION=0.17.1
ZIG_VENV=${XDG_CACHE_HOME:-$HOME/.cache}/raftkv/zig-venv
install_zig() {
  if [[ -x $ZIG_VENV/bin/python ]] &&
     "$ZIG_VENV/bin/python" -c 'import importlib.metadata as m, sys
sys.exit(m.version("ziglang") != sys.argv[1])' "$ZIGLANG_VERSION" 2>/dev/null; then
    return 0
  fi
  echo "install-deps: ziglang==$ZIGLANG_VERSION into $ZIG_VENV"
  mkdir -p "$(dirname "$ZIG_VENV")"
  python3 -m venv --clear "$ZIG_VENV"
  "$ZIG_VENV/bin/python" -m pip install --quiet "ziglang==$ZIGLANG_VERSION"
}

case "$(uname -s)" in
  Linux)
    if command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; then
      install_apt
      if ((!MAIN_ONLY)); then
        install_grpcurl
        install_etcd_client_modules
        install_zig
      fi
    else
      echo "install-deps: no apt-get here; install the equivalents of:"
      echo "  ${APT_PACKAGES[*]}"
      echo "or use vcpkg (manifest: vcpkg.json; doc/building.md):"
      echo "  cmake --preset <preset> -DCMAKE_TOOLCHAIN_FILE=\$VCPKG_ROOT/scripts/buildsystems/vcpkg.cmake"
    fi
    ;;
  Darwin)
    echo "install-deps: on macOS, install the dependencies with Homebrew:"
    echo "  brew install cmake ninja grpc protobuf abseil gflags glog googletest rocksdb"
    echo "then: cmake --preset macos-brew (doc/building.md)"
    ;;
  *)
    echo "install-deps: on this system ($(uname -s)), use vcpkg in manifest mode (vcpkg.json):"
    echo "  set VCPKG_ROOT to a vcpkg checkout, then: cmake --preset vcpkg-windows"
    echo "(doc/building.md)"
    ;;
esac
exit 0
