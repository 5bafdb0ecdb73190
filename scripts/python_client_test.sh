#!/usr/bin/env bash
# The Python client (clients/python) against a real cluster: creates a fresh
# virtualenv, installs pinned grpcio / grpcio-tools / protobuf / pytest, then
# `pip install clients/python` (which generates the gRPC stubs from
# protos/raftkv/v1 at build time), then runs pytest on clients/python/tests:
# the unit tests (scripted in-process servers) and the cluster tests (a
# 3-member cluster from scripts/cluster.sh, started by the tests' fixture).
# Run by ctest with RAFTKV_BIN_DIR set to the build directory. Exits non-zero
# on any failure; the cluster is stopped on exit.
#
# Environment:
#   RAFTKV_BIN_DIR      (required) where raftkv-server and raftkvctl are
#   RAFTKV_PYTHON       the Python to build the venv from (default python3; >= 3.9)
#   RAFTKV_BASE_PORT    member I listens on 127.0.0.1:BASE+I (default: free ports below 32000)
#   RAFTKV_PYTEST_ARGS  extra pytest arguments (e.g. "-k watch -x")
#   RAFTKV_PYTEST_TIMEOUT_S  bound on the pytest run (default 300)
#   RAFTKV_KEEP_WORK=1  keep the venv and the cluster's data and logs (kept anyway on failure)
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ME=python_client_test
# die, remove_at_exit, stop_cluster_at_exit
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
: "${RAFTKV_BIN_DIR:?set RAFTKV_BIN_DIR to the build directory}"
RAFTKV_BIN_DIR=$(cd "$RAFTKV_BIN_DIR" && pwd)
export RAFTKV_BIN_DIR
PYTHON=${RAFTKV_PYTHON:-python3}

# Versions that work together on Python 3.11: the protobuf runtime must be
# at least the gencode version of this grpcio-tools (7.35.1) and of the same
# major, grpcio at least grpcio-tools' version (setup.py pins the installed
# package's requirements the same way).
PINS=(grpcio==1.85.1 grpcio-tools==1.85.1 protobuf==7.36.2 pytest==9.2.0)

for b in raftkv-server raftkvctl; do
  [[ -x $RAFTKV_BIN_DIR/$b ]] || die "$RAFTKV_BIN_DIR/$b not found (build it first)"
done
command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found (set RAFTKV_PYTHON)"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 9) else 1)' ||
  die "$PYTHON is $("$PYTHON" -V 2>&1); the client needs Python >= 3.9"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/raftkv-pyclient.XXXXXX")
remove_at_exit "$WORK" "python_client_test: venv, cluster data and server logs kept in $WORK" \
  "${RAFTKV_KEEP_WORK:-0}"
export RAFTKV_DATA=$WORK/data
# The fixture stops its cluster; this catches a pytest that was killed.
stop_cluster_at_exit "$RAFTKV_DATA"
. "$REPO_ROOT/scripts/lib/ports.sh"
export RAFTKV_BASE_PORT=${RAFTKV_BASE_PORT:-$(free_base_port 5)}
VENV=$WORK/venv

start=$SECONDS
echo "python_client_test: venv in $VENV ($("$PYTHON" -V 2>&1))"
"$PYTHON" -m venv "$VENV" || die "could not create a venv with $PYTHON -m venv"
export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1 PYTHONDONTWRITEBYTECODE=1
"$VENV/bin/python" -m pip install -q "${PINS[@]}" || die "pip install ${PINS[*]} failed"
# The package itself, built from this tree with the pinned grpcio-tools (no
# build isolation: the stubs come from exactly the versions above).
"$VENV/bin/python" -m pip install -q --no-build-isolation "$REPO_ROOT/clients/python" ||
  die "pip install clients/python failed"
"$VENV/bin/python" - <<'EOF' || die "the installed package does not import"
import raftkv, grpc, google.protobuf
from raftkv.v1 import kv_pb2, kv_pb2_grpc, watch_pb2_grpc, lease_pb2_grpc, admin_pb2_grpc
print("python_client_test: raftkv %s (grpcio %s, protobuf %s) from %s"
      % (raftkv.__version__, grpc.__version__, google.protobuf.__version__, raftkv.__file__))
EOF
echo "python_client_test: installed in $((SECONDS - start)) s; cluster ports from $((RAFTKV_BASE_PORT + 1))"

# Run from the work directory: `import raftkv` must find the installed
# package, and pytest must not write its cache into the tree.
cd "$WORK"
read -r -a extra <<<"${RAFTKV_PYTEST_ARGS:-}"
rc=0
timeout --kill-after=15 "${RAFTKV_PYTEST_TIMEOUT_S:-300}" \
  "$VENV/bin/python" -m pytest -p no:cacheprovider -rfEs -v \
  "$REPO_ROOT/clients/python/tests" ${extra[@]+"${extra[@]}"} || rc=$?
echo "python_client_test: pytest exited $rc after $((SECONDS - start)) s in total"
[[ $rc == 0 ]] || exit "$rc"
