#!/usr/bin/env bash
# Builds Debian's RocksDB (the version the system package installs) with
# ThreadSanitizer into build-tsan-rocksdb/prefix, for the `tsan-rocksdb`
# preset (doc/testing.md, "Sanitizers"). Debian's librocksdb is not
# instrumented, so TSan cannot see the atomics RocksDB synchronizes with and
# reports its own reads; built with -fsanitize=thread it can.
#
# Usage: scripts/build_tsan_rocksdb.sh [--jobs N]
# Takes about 20 minutes with 2 jobs. Reruns reuse what is built.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${ROOT}/build-tsan-rocksdb"
JOBS=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --jobs) JOBS="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "build_tsan_rocksdb.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

VERSION="$(dpkg-query -W -f='${Version}' librocksdb-dev 2>/dev/null || true)"
if [[ -z "${VERSION}" ]]; then
  echo "build_tsan_rocksdb.sh: librocksdb-dev is not installed; run scripts/install-deps.sh first" >&2
  exit 1
fi
command -v dpkg-source >/dev/null || apt-get install -y -q dpkg-dev

mkdir -p "${OUT}/apt/sources.list.d" "${OUT}/apt/lists/partial"
SRC="${OUT}/src"
if [[ ! -d "${SRC}/rocksdb" ]]; then
  # Debian's source package of the installed version (its patches applied),
  # through a source list of our own: the machine's lists are left alone.
  cat > "${OUT}/apt/sources.list.d/debian-src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $(. /etc/os-release && echo "${VERSION_CODENAME}")
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  APT=(apt-get -q -o "Dir::Etc::SourceParts=${OUT}/apt/sources.list.d"
       -o Dir::Etc::SourceList=/dev/null -o "Dir::State::Lists=${OUT}/apt/lists")
  "${APT[@]}" update
  rm -rf "${SRC}" && mkdir -p "${SRC}"
  (cd "${SRC}" && "${APT[@]}" source "rocksdb=${VERSION}")
  mv "${SRC}"/rocksdb-*/ "${SRC}/rocksdb"
fi

# The compression libraries Debian's package is built with, so databases
# written by either build open in the other; no tools, tests or shared library.
cmake -S "${SRC}/rocksdb" -B "${OUT}/obj" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="${OUT}/prefix" \
  -DWITH_TSAN=ON -DCMAKE_CXX_FLAGS="-fno-omit-frame-pointer -g1" \
  -DUSE_RTTI=ON -DPORTABLE=ON -DFAIL_ON_WARNINGS=OFF -DWITH_GFLAGS=OFF \
  -DWITH_BZ2=ON -DWITH_LZ4=ON -DWITH_ZLIB=ON -DWITH_ZSTD=ON -DWITH_SNAPPY=ON \
  -DWITH_LIBURING=OFF -DROCKSDB_BUILD_SHARED=OFF -DWITH_TESTS=OFF \
  -DWITH_BENCHMARK_TOOLS=OFF -DWITH_CORE_TOOLS=OFF -DWITH_TOOLS=OFF \
  -DWITH_TRACE_TOOLS=OFF -DWITH_ALL_TESTS=OFF
cmake --build "${OUT}/obj" -j "${JOBS}" --target rocksdb
cmake --install "${OUT}/obj"
echo "build_tsan_rocksdb.sh: installed in ${OUT}/prefix"
