#!/usr/bin/env bash
# Cross-checks that the sources of raftkv-server, raftkvctl and the client
# library compile for another platform.
#
#   scripts/cross_check.sh windows
#
# windows: every non-test source of those targets (the libraries they link:
# storage, raft, leader, follower, consensus, client, service, plus the
# version source and src/tools) with MinGW-w64 (x86_64-w64-mingw32-g++-posix,
# C++17, the project's warnings as errors).
#   * A source that includes gRPC, protobuf, abseil, glog, gflags, Boost or
#     OpenSSL is checked with -fsyntax-only against those libraries' headers
#     (there are no Windows builds of them here): a staging include directory
#     holds links to only their header trees, never to the C library's, so a
#     POSIX header such as <unistd.h> or <sys/wait.h> fails as it would on
#     Windows. The protobuf/gRPC code is generated with protoc and
#     grpc_cpp_plugin as CMakeLists.txt does.
#   * A source without such dependencies is compiled fully; the file layer
#     (src/storage/file_util.cc), the hard state file, crc32c and the version
#     source are linked into a small Windows program that exercises them
#     (scripts/lib/cross_smoke_main.cc), run under Wine.
#   * MinGW-w64 ships a few POSIX headers (unistd.h, pthread.h, dirent.h...)
#     that Windows' own toolchain does not: a raftkv file that includes one
#     outside an #ifdef fails the check too.
# One line per file, a summary line; exits 0 only if every file compiles and
# the Wine smoke test passes (Wine is required: scripts/install-deps.sh
# installs it with the compiler).
#
# Environment: RAFTKV_CROSS_JOBS (parallel compiles, default 2),
# RAFTKV_CROSS_KEEP=1 keeps the work directory.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${RAFTKV_CROSS_JOBS:-2}

usage() {
  echo "usage: $0 windows" >&2
  exit 2
}
[[ $# -eq 1 ]] || usage
[[ $1 == windows ]] || usage

CXX=x86_64-w64-mingw32-g++-posix
die() { echo "cross_check: $*" >&2; exit 1; }
command -v "$CXX" >/dev/null 2>&1 ||
  die "$CXX not found (Debian: g++-mingw-w64-x86-64-posix; scripts/install-deps.sh)"
command -v protoc >/dev/null 2>&1 || die "protoc not found (scripts/install-deps.sh)"
PLUGIN=$(command -v grpc_cpp_plugin) || die "grpc_cpp_plugin not found (scripts/install-deps.sh)"

start=$(date +%s)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/raftkv-cross.XXXXXX")
cleanup() {
  if [[ ${RAFTKV_CROSS_KEEP:-0} == 1 ]]; then
    echo "cross_check: work directory kept: $WORK"
  else
    # Wine's server may still hold the prefix for a moment.
    [[ -n ${WINE_SERVER:-} && -x ${WINE_SERVER:-} ]] &&
      WINEPREFIX="$WORK/wineprefix" "$WINE_SERVER" -k >/dev/null 2>&1
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

# ---- the sources: as CMakeLists.txt globs them for the targets ----
cd "$ROOT" || exit 1
mapfile -t SOURCES < <(
  ls src/storage/*.cc src/raft/*.cc src/leader/*.cc src/follower/*.cc src/consensus/*.cc \
     src/client/*.cc src/service/*.cc \
     src/tools/raftkv_server.cc src/tools/raftkvctl.cc src/tools/raftkvctl_output.cc | sort)

# ---- generated code: protobuf/gRPC (CMakeLists.txt: PROTO_NAMES) and the version ----
GEN="$WORK/gen"
mkdir -p "$GEN"
PROTO_NAMES=$(sed -n '/^set(PROTO_NAMES/,/)/p' CMakeLists.txt |
  sed -e 's/set(PROTO_NAMES//' -e 's/)//' | tr -s ' \n' '\n' | sed '/^$/d')
[[ -n $PROTO_NAMES ]] || die "cannot read PROTO_NAMES from CMakeLists.txt"
protos=()
for name in $PROTO_NAMES; do protos+=("protos/$name.proto"); done
protoc --cpp_out="$GEN" --grpc_out="$GEN" --plugin=protoc-gen-grpc="$PLUGIN" \
  -I protos "${protos[@]}" || die "protoc failed"
VERSION=$(sed -n 's/^project(raftkv VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
cmake -DSOURCE_DIR="$ROOT" -DVERSION="${VERSION:-0}" -DOUT="$GEN/raftkv_version.cc" \
  -P cmake/version.cmake || die "cmake/version.cmake failed"

# ---- staging include directory: the dependencies' header trees only ----
STAGE="$WORK/deps"
mkdir -p "$STAGE/google"
for d in grpc grpcpp grpc++ absl gflags glog boost; do
  [[ -d /usr/include/$d ]] && ln -s "/usr/include/$d" "$STAGE/$d"
done
ln -s /usr/include/google/protobuf "$STAGE/google/protobuf"
# OpenSSL: the headers, plus the two generated configuration headers that
# Debian keeps in the multiarch directory (nothing else of that directory).
MULTIARCH=$(gcc -print-multiarch 2>/dev/null)
mkdir -p "$STAGE/openssl"
for f in /usr/include/openssl/*.h /usr/include/${MULTIARCH:-x86_64-linux-gnu}/openssl/*.h; do
  [[ -e $STAGE/openssl/$(basename "$f") ]] || ln -s "$f" "$STAGE/openssl/"
done

# The flags of CMakeLists.txt for WIN32, the warnings of a -DRAFTKV_WERROR=ON
# build, and Windows 10 as the target system.
FLAGS=(-std=c++17 -Wall -Wextra -Wno-unused-parameter -Werror
       -DNOMINMAX -DWIN32_LEAN_AND_MEAN -DNOGDI -D_CRT_SECURE_NO_WARNINGS -D_WIN32_WINNT=0x0A00
       -I "$ROOT/src" -I "$GEN")
DEP_FLAGS=(-isystem "$STAGE")

# ---- compile: one job per file ----
OUT="$WORK/out"
OBJ="$WORK/obj"
mkdir -p "$OUT" "$OBJ"
export CXX WORK OUT OBJ STAGE ROOT
export FLAGS_STR DEP_FLAGS_STR
FLAGS_STR=$(printf '%q ' "${FLAGS[@]}")
DEP_FLAGS_STR=$(printf '%q ' "${DEP_FLAGS[@]}")

# Compiles $1 (relative to ROOT, or absolute for generated code; $2 is the
# name it is reported as): fully (an object in $OBJ) if it includes nothing
# from the staging directory, else -fsyntax-only. Writes "<status> <mode>
# <name>" to $OUT/<key>.result and the compiler's output to $OUT/<key>.log.
compile_one() {
  local src=$1 name=$2 key
  key=$(echo "$name" | tr '/.' '__')
  eval "local flags=($FLAGS_STR) dep_flags=($DEP_FLAGS_STR)"
  local mode=syntax status=ok
  # Preprocessed as for Windows, with every #include directive kept (-dI,
  # even of a header already included): whether it uses a dependency's
  # headers, and which headers raftkv's own files include.
  # MinGW-w64 ships a few POSIX headers that Windows' own toolchain (MSVC)
  # does not have; raftkv's files must not include them on Windows.
  "$CXX" "${flags[@]}" "${dep_flags[@]}" -fno-canonical-system-headers -E -dI "$src" \
      2>"$OUT/$key.log" |
    awk -v stage="$STAGE/" -v ours="$ROOT/src/" -v root="$ROOT/" '
      /^# [0-9]+ "/ {
        file = $3; gsub(/"/, "", file)
        if (index(file, stage) == 1) deps = 1
        next
      }
      /^#include / && index(file, ours) == 1 &&
          $2 ~ /^<(unistd|pthread|dirent|strings|sched|semaphore|libgen|sys\/time|sys\/param|sys\/file)\.h>$/ {
        f = substr(file, length(root) + 1)
        printf "%s: includes %s, a POSIX header that Windows (MSVC) does not have; " \
               "put it behind #ifndef _WIN32 or in a platform function\n", f, $2
      }
      END { if (deps) print "uses-dependencies" }' >"$OUT/$key.scan"
  if [[ ${PIPESTATUS[0]} -ne 0 ]]; then
    status=FAIL
  else
    grep -q '^uses-dependencies$' "$OUT/$key.scan" || mode=compile
    if grep -v '^uses-dependencies$' "$OUT/$key.scan" >"$OUT/$key.log"; then status=FAIL; fi
  fi
  if [[ $status == ok ]]; then
    if [[ $mode == compile ]]; then
      "$CXX" "${flags[@]}" -c "$src" -o "$OBJ/$key.o" >"$OUT/$key.log" 2>&1 || status=FAIL
    else
      "$CXX" "${flags[@]}" "${dep_flags[@]}" -fsyntax-only "$src" >"$OUT/$key.log" 2>&1 ||
        status=FAIL
    fi
  fi
  echo "$status $mode $name" >"$OUT/$key.result"
}
export -f compile_one

{
  for s in "${SOURCES[@]}"; do printf '%s\0%s\0' "$ROOT/$s" "$s"; done
  printf '%s\0%s\0' "$GEN/raftkv_version.cc" "gen/raftkv_version.cc"
  for name in $PROTO_NAMES; do
    printf '%s\0%s\0' "$GEN/$name.pb.cc" "gen/$name.pb.cc"
    printf '%s\0%s\0' "$GEN/$name.grpc.pb.cc" "gen/$name.grpc.pb.cc"
  done
} | xargs -0 -n 2 -P "$JOBS" bash -c 'compile_one "$0" "$1"'

total=0 failed=0 syntax=0 full=0
names=("${SOURCES[@]}" gen/raftkv_version.cc)
for name in $PROTO_NAMES; do names+=("gen/$name.pb.cc" "gen/$name.grpc.pb.cc"); done
for name in "${names[@]}"; do
  key=$(echo "$name" | tr '/.' '__')
  total=$((total + 1))
  if [[ ! -f $OUT/$key.result ]]; then
    echo "FAIL  ?       $name (no result)"
    failed=$((failed + 1))
    continue
  fi
  read -r status mode _ <"$OUT/$key.result"
  if [[ $status == ok ]]; then
    printf 'ok    %-7s %s\n' "$mode" "$name"
    if [[ $mode == syntax ]]; then syntax=$((syntax + 1)); else full=$((full + 1)); fi
  else
    printf 'FAIL  %-7s %s\n' "$mode" "$name"
    sed 's/^/      /' "$OUT/$key.log" | head -40
    failed=$((failed + 1))
  fi
done

# ---- the smoke program: the file layer, the hard state file, crc32c and the
# version, under Wine ----
smoke="not run"
smoke_ok=0
SMOKE_UNITS=(src/storage/file_util.cc src/storage/hard_state.cc src/storage/crc32c.cc
             gen/raftkv_version.cc)
objs=()
for name in "${SMOKE_UNITS[@]}"; do
  key=$(echo "$name" | tr '/.' '__')
  if [[ -f $OBJ/$key.o ]]; then
    objs+=("$OBJ/$key.o")
  else
    smoke="failed: $name was not compiled fully"
  fi
done
if [[ $smoke == "not run" ]]; then
  eval "flags=($FLAGS_STR)"
  if ! "$CXX" "${flags[@]}" -static "$ROOT/scripts/lib/cross_smoke_main.cc" "${objs[@]}" \
       -o "$WORK/smoke.exe" >"$WORK/smoke-build.log" 2>&1; then
    smoke="failed: the smoke program does not build"
    sed 's/^/      /' "$WORK/smoke-build.log" | head -40
  else
    WINE=""
    for w in wine64 wine /usr/lib/wine/wine64; do
      if command -v "$w" >/dev/null 2>&1; then WINE=$(command -v "$w"); break; fi
    done
    if [[ -z $WINE ]]; then
      smoke="failed: Wine not found (Debian: wine64; scripts/install-deps.sh)"
    else
      WINE_SERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver64)
      mkdir -p "$WORK/smoke-dir"
      # A fresh prefix (created on the first run: several seconds).
      if (cd "$WORK" && WINEPREFIX="$WORK/wineprefix" WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" \
            timeout 300 "$WINE" "$WORK/smoke.exe" 'smoke-dir') >"$WORK/smoke.log" 2>&1; then
        smoke="passed"
        smoke_ok=1
      else
        smoke="failed"
      fi
      # Without Wine's own notes (prefix creation).
      grep -v '^wine: ' "$WORK/smoke.log" | sed 's/^/      /'
    fi
  fi
fi

elapsed=$(($(date +%s) - start))
if [[ $failed -eq 0 ]]; then
  files="$total files compiled ($syntax syntax-only, $full full)"
else
  files="$failed of $total files FAILED ($syntax syntax-only and $full full compiles passed)"
fi
echo "windows: $files, smoke test under Wine: $smoke (${elapsed} s)"
[[ $failed -eq 0 && $smoke_ok -eq 1 ]]
