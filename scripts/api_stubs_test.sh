#!/usr/bin/env bash
# Checks the client API's definitions (protos/raftkv/v1):
#  1. every service, rpc, message, enum, field, enum value and oneof carries a
#     comment (a `//` line just above it, or one at the end of its line): the
#     comments are the API's reference, shown in generated code and by
#     `grpcurl describe`;
#  2. protoc generates Go (protoc-gen-go, protoc-gen-go-grpc), Java and C++
#     stubs from them with no option beyond the output directories.
# Exit 0 when both hold.
set -euo pipefail
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ME=api_stubs_test
# die, on_exit
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$REPO_ROOT/scripts/lib/common.sh"
PROTOS="$REPO_ROOT/protos"
OUT=$(mktemp -d /tmp/raftkv-stubs.XXXXXX)
on_exit rm -rf "$OUT"

python3 - "$PROTOS"/raftkv/v1/*.proto <<'PY'
import re, sys
decl = re.compile(r'^\s*(service|rpc|message|enum|oneof)\s+\w+')
field = re.compile(r'^\s*(repeated\s+|optional\s+)?[\w.]+\s+\w+\s*=\s*\d+\s*;')
value = re.compile(r'^\s*[A-Z][A-Z0-9_]*\s*=\s*\d+\s*;')
bad = 0
for path in sys.argv[1:]:
    prev = ''
    for n, line in enumerate(open(path), 1):
        if decl.match(line) or field.match(line) or value.match(line):
            if '//' not in line and not prev.lstrip().startswith('//'):
                print(f'{path}:{n}: no comment: {line.strip()}')
                bad += 1
        if line.strip():
            prev = line
if bad:
    print(f'api_stubs_test: {bad} declarations without a comment', file=sys.stderr)
    sys.exit(1)
print('api_stubs_test: every declaration of the v1 API has a comment')
PY

mkdir -p "$OUT/go" "$OUT/java" "$OUT/cpp"
protoc -I "$PROTOS" --java_out="$OUT/java" --cpp_out="$OUT/cpp" "$PROTOS"/raftkv/v1/*.proto
ls "$OUT"/java/io/raftkv/v1/KvProto.java "$OUT"/java/io/raftkv/v1/PutRequest.java >/dev/null
if command -v protoc-gen-go >/dev/null && command -v protoc-gen-go-grpc >/dev/null; then
  protoc -I "$PROTOS" --go_out="$OUT/go" --go-grpc_out="$OUT/go" "$PROTOS"/raftkv/v1/*.proto
  gofile=$(find "$OUT/go" -name kv.pb.go)
  [[ -n "$gofile" ]] || die "protoc-gen-go wrote no kv.pb.go"
  grep -q '^package raftkvv1$' "$gofile" || die "$gofile: wrong Go package"
  find "$OUT/go" -name kv_grpc.pb.go | grep -q . || die "no kv_grpc.pb.go"
  echo "api_stubs_test: Go, Java and C++ stubs generated"
else
  die "protoc-gen-go / protoc-gen-go-grpc not installed (scripts/install-deps.sh installs them)"
fi
