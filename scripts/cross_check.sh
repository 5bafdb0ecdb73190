#!/usr/bin/env bash
# Cross-checks that the sources of raftkv-server, raftkvctl and the client
# library compile for another platform.
#
#   scripts/cross_check.sh windows|macos
#
# Both modes take every non-test source of those targets (the libraries they
# link: common, storage, raft, leader, follower, kv, client, node, server, ops, plus the
# version source and src/tools) and the protobuf/gRPC code generated with
# protoc and grpc_cpp_plugin as CMakeLists.txt does: C++17, the project's
# warnings as errors.
#   * A source that includes gRPC, protobuf, abseil, glog, gflags, Boost or
#     OpenSSL is checked with -fsyntax-only against those libraries' headers
#     (there are no Windows or macOS builds of them here): a staging include
#     directory holds links to only their header trees, never to the Linux C
#     library's, so a header the target lacks (<sys/wait.h> on Windows,
#     <sys/prctl.h> on macOS) fails as it would there.
#   * A source without such dependencies is compiled fully; the file layer
#     (src/storage/file_util.cc), the hard state file, crc32c and the version
#     source are linked into a small program that exercises them
#     (scripts/lib/cross_smoke_main.cc).
#
# windows: MinGW-w64 (x86_64-w64-mingw32-g++-posix) with the Windows
#   definitions of CMakeLists.txt; the smoke program runs under Wine.
#   MinGW-w64 ships a few POSIX headers (unistd.h, pthread.h, dirent.h...)
#   that Windows' own toolchain does not: a raftkv file that includes one
#   outside an #ifdef fails the check too.
# macos: Zig's clang (zig c++ -target aarch64-macos: PyPI's ziglang, which
#   bundles the macOS C library headers and libc++); the smoke program is
#   linked into an arm64 Mach-O executable against Zig's libSystem stubs.
#   Nothing here can run it.
# One line per file, a summary line; exits 0 only if every file compiles and
# the smoke program passes (windows: runs under Wine; macos: links). The
# tools come from scripts/install-deps.sh: MinGW-w64 and Wine from Debian,
# Zig into a virtualenv (${XDG_CACHE_HOME:-~/.cache}/raftkv/zig-venv).
#
# Environment: RAFTKV_CROSS_JOBS (parallel compiles, default 2),
# RAFTKV_CROSS_KEEP=1 keeps the work directory, RAFTKV_ZIG (macos: the zig
# executable to use instead of the virtualenv's).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ME=cross_check
# die, on_exit
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$ROOT/scripts/lib/common.sh"
JOBS=${RAFTKV_CROSS_JOBS:-2}

usage() {
  echo "usage: $0 windows|macos" >&2
  exit 2
}
[[ $# -eq 1 ]] || usage
MODE=$1
[[ $MODE == windows || $MODE == macos ]] || usage

# ---- the toolchain: CXX (the compiler command), TARGET_FLAGS (every
# compile) and PP_FLAGS (the dependency scan only) ----
if [[ $MODE == windows ]]; then
  CXX=(x86_64-w64-mingw32-g++-posix)
  command -v "${CXX[0]}" >/dev/null 2>&1 ||
    die "${CXX[0]} not found (Debian: g++-mingw-w64-x86-64-posix; scripts/install-deps.sh)"
  # The definitions of CMakeLists.txt for WIN32, and Windows 10 as the target
  # system.
  TARGET_FLAGS=(-DNOMINMAX -DWIN32_LEAN_AND_MEAN -DNOGDI -D_CRT_SECURE_NO_WARNINGS
                -D_WIN32_WINNT=0x0A00)
  PP_FLAGS=(-fno-canonical-system-headers)
  SCAN_POSIX=1
  SYNTAX_ONLY=1
else
  ZIG_VENV=${XDG_CACHE_HOME:-$HOME/.cache}/raftkv/zig-venv
  ZIG=${RAFTKV_ZIG:-}
  if [[ -z $ZIG ]]; then
    for z in "$ZIG_VENV"/lib/python3*/site-packages/ziglang/zig; do
      [[ -x $z ]] && ZIG=$z
    done
  fi
  [[ -n $ZIG && -x $ZIG ]] ||
    die "zig not found (PyPI's ziglang in $ZIG_VENV): run scripts/install-deps.sh, or set RAFTKV_ZIG"
  # Zig builds libc++ for the target on first use (a minute or more): its
  # cache beside the virtualenv, so that later runs reuse it.
  if [[ -z ${ZIG_GLOBAL_CACHE_DIR:-} ]]; then
    if [[ -z ${RAFTKV_ZIG:-} ]]; then
      ZIG_GLOBAL_CACHE_DIR=$ZIG_VENV/zig-cache
    else
      ZIG_GLOBAL_CACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/raftkv/zig-cache
    fi
  fi
  export ZIG_GLOBAL_CACHE_DIR
  export ZIG_LOCAL_CACHE_DIR=${ZIG_LOCAL_CACHE_DIR:-$ZIG_GLOBAL_CACHE_DIR}
  mkdir -p "$ZIG_GLOBAL_CACHE_DIR" || die "cannot create Zig's cache $ZIG_GLOBAL_CACHE_DIR"
  # Apple Silicon, macOS 11 (its first release) as the deployment target, so
  # that libc++ and the C library mark what older systems lack.
  CXX=("$ZIG" c++ -target aarch64-macos.11.0)
  TARGET_FLAGS=()
  PP_FLAGS=()
  SCAN_POSIX=0
  # zig c++ does not support -fsyntax-only (it expects an object): a file
  # with dependencies is compiled to an object, which is not linked.
  SYNTAX_ONLY=0
fi
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
on_exit cleanup

# ---- the sources: as CMakeLists.txt globs them for the targets ----
cd "$ROOT" || exit 1
mapfile -t SOURCES < <(
  ls src/common/*.cc src/storage/*.cc src/raft/*.cc src/raft/core/*.cc src/leader/*.cc \
     src/follower/*.cc src/kv/*.cc src/client/*.cc src/node/*.cc src/server/*.cc src/server/*/*.cc src/ops/*.cc \
     src/tools/raftkv_server.cc src/tools/raftkvctl*.cc | sort)

# ---- generated code: protobuf/gRPC (CMakeLists.txt: PROTO_NAMES) and the version ----
GEN="$WORK/gen"
mkdir -p "$GEN"
PROTO_NAMES=$(sed -n '/^set(PROTO_NAMES/,/)/p' CMakeLists.txt |
  sed -e 's/set(PROTO_NAMES//' -e 's/)//' | tr -s ' \n' '\n' | sed '/^$/d')
[[ -n $PROTO_NAMES ]] || die "cannot read PROTO_NAMES from CMakeLists.txt"
# Server reflection's file, a library of its own (CMakeLists.txt: REFLECTION_PROTO).
REFLECTION_PROTO=$(sed -n 's/^set(REFLECTION_PROTO \([^ )]*\))$/\1/p' CMakeLists.txt)
[[ -n $REFLECTION_PROTO ]] || die "cannot read REFLECTION_PROTO from CMakeLists.txt"
PROTO_NAMES="$PROTO_NAMES
$REFLECTION_PROTO"
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
for d in grpc grpcpp grpc++ absl gflags glog boost rocksdb; do
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

# The target's flags and the warnings of a -DRAFTKV_WERROR=ON build.
FLAGS=(-std=c++17 -Wall -Wextra -Wno-unused-parameter -Werror "${TARGET_FLAGS[@]}"
       -I "$ROOT/src" -I "$GEN")
DEP_FLAGS=(-isystem "$STAGE")

# ---- a precompiled header of the heaviest dependency headers: every file
# checked against the dependencies is parsed with it included first ----
# (-include; the compiler takes deps.h.gch or deps.h.pch beside it when it
# matches the flags, else reads deps.h itself: slower, same verdict). The
# dependency scan above does not use it, so what a file includes is its own.
PCH_DIR="$WORK/pch"
mkdir -p "$PCH_DIR"
cat >"$PCH_DIR/deps.h" <<'HEADER'
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
// As raftkv's own files do before the generated headers: winnt.h's DELETE
// macro would break the generated enums that the pre-included gRPC headers
// now come before.
#include "proto/windows_macros.h"
HEADER
PCH_FLAGS=()
if [[ $MODE == windows ]]; then
  pch_out=("$PCH_DIR/deps.h.gch")
else
  pch_out=("$PCH_DIR/deps.h.pch")
fi
if "${CXX[@]}" "${FLAGS[@]}" "${DEP_FLAGS[@]}" -x c++-header "$PCH_DIR/deps.h" -o "${pch_out[0]}" \
     >"$WORK/pch.log" 2>&1; then
  PCH_FLAGS=(-include "$PCH_DIR/deps.h")
  [[ $MODE == macos ]] && PCH_FLAGS=(-include-pch "${pch_out[0]}")
else
  echo "cross_check: no precompiled header (each file parses the headers itself):"
  sed 's/^/      /' "$WORK/pch.log" | head -20
fi

# ---- compile: one job per file ----
OUT="$WORK/out"
OBJ="$WORK/obj"
mkdir -p "$OUT" "$OBJ"
export WORK OUT OBJ STAGE ROOT SCAN_POSIX SYNTAX_ONLY
export CXX_STR FLAGS_STR DEP_FLAGS_STR PP_FLAGS_STR PCH_FLAGS_STR
# The arrays as shell words for the jobs (none for an empty array).
quote_words() { [[ $# -eq 0 ]] || printf '%q ' "$@"; }
CXX_STR=$(quote_words "${CXX[@]}")
FLAGS_STR=$(quote_words "${FLAGS[@]}")
DEP_FLAGS_STR=$(quote_words "${DEP_FLAGS[@]}")
PCH_FLAGS_STR=$(quote_words "${PCH_FLAGS[@]}")
PP_FLAGS_STR=$(quote_words "${PP_FLAGS[@]}")

# Compiles $1 (relative to ROOT, or absolute for generated code; $2 is the
# name it is reported as): fully (an object in $OBJ) if it includes nothing
# from the staging directory, else -fsyntax-only (mode "syntax"; macos: to an
# object that is not linked, mode "deps"). Writes "<status> <mode>
# <name>" to $OUT/<key>.result and the compiler's output to $OUT/<key>.log.
compile_one() {
  local src=$1 name=$2 key
  key=$(echo "$name" | tr '/.' '__')
  eval "local cxx=($CXX_STR) flags=($FLAGS_STR) dep_flags=($DEP_FLAGS_STR)"
  eval "local pp_flags=($PP_FLAGS_STR) pch_flags=($PCH_FLAGS_STR)"
  local mode=syntax status=ok
  # Preprocessed for the target, with every #include directive kept (-dI,
  # even of a header already included): whether it uses a dependency's
  # headers, and which headers raftkv's own files include.
  # windows (SCAN_POSIX): MinGW-w64 ships a few POSIX headers that Windows'
  # own toolchain (MSVC) does not have; raftkv's files must not include them.
  "${cxx[@]}" "${flags[@]}" "${dep_flags[@]}" "${pp_flags[@]}" -E -dI "$src" \
      2>"$OUT/$key.log" |
    awk -v stage="$STAGE/" -v ours="$ROOT/src/" -v root="$ROOT/" -v scan_posix="$SCAN_POSIX" '
      /^# [0-9]+ "/ {
        file = $3; gsub(/"/, "", file)
        if (index(file, stage) == 1) deps = 1
        next
      }
      scan_posix == 1 && /^#include / && index(file, ours) == 1 &&
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
      "${cxx[@]}" "${flags[@]}" -c "$src" -o "$OBJ/$key.o" >"$OUT/$key.log" 2>&1 || status=FAIL
    else
      local check=(-fsyntax-only)
      [[ $SYNTAX_ONLY == 1 ]] || mode=deps check=(-c -o "$OBJ/$key.deps.o")
      "${cxx[@]}" "${flags[@]}" "${dep_flags[@]}" "${pch_flags[@]}" "${check[@]}" "$src" \
        >"$OUT/$key.log" 2>&1 ||
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
    if [[ $mode == compile ]]; then full=$((full + 1)); else syntax=$((syntax + 1)); fi
  else
    printf 'FAIL  %-7s %s\n' "$mode" "$name"
    sed 's/^/      /' "$OUT/$key.log" | head -40
    failed=$((failed + 1))
  fi
done

# ---- the smoke program: the file layer, the hard state file, crc32c and the
# version (windows: run under Wine; macos: linked) ----
smoke="not run"
smoke_ok=0
SMOKE_UNITS=(src/storage/file_util.cc src/storage/hard_state_file.cc src/storage/crc32c.cc
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
LINK_FLAGS=() SMOKE="$WORK/smoke"
[[ $MODE == windows ]] && LINK_FLAGS=(-static) SMOKE="$WORK/smoke.exe"
if [[ $smoke == "not run" ]]; then
  if ! "${CXX[@]}" "${FLAGS[@]}" "${LINK_FLAGS[@]}" "$ROOT/scripts/lib/cross_smoke_main.cc" \
       "${objs[@]}" -o "$SMOKE" >"$WORK/smoke-build.log" 2>&1; then
    smoke="failed: the smoke program does not build"
    sed 's/^/      /' "$WORK/smoke-build.log" | head -40
  elif [[ $MODE == macos ]]; then
    # An executable for the target: Mach-O, arm64.
    kind=$(file -b "$SMOKE" 2>&1 | sed 's/,.*//')
    if [[ $kind == "Mach-O 64-bit arm64 executable" ]]; then
      smoke="linked: $kind (not run)"
      smoke_ok=1
    else
      smoke="failed: not a macOS arm64 executable: $kind"
    fi
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
            timeout 300 "$WINE" "$SMOKE" 'smoke-dir') >"$WORK/smoke.log" 2>&1; then
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
partial="syntax-only"
[[ $SYNTAX_ONLY == 1 ]] || partial="against the dependency headers"
if [[ $failed -eq 0 ]]; then
  files="$total files compiled ($syntax $partial, $full full)"
else
  files="$failed of $total files FAILED ($syntax $partial and $full full compiles passed)"
fi
if [[ $MODE == windows ]]; then
  echo "windows: $files, smoke test under Wine: $smoke (${elapsed} s)"
else
  echo "macos: $files, smoke program $smoke (${elapsed} s)"
fi
[[ $failed -eq 0 && $smoke_ok -eq 1 ]]
