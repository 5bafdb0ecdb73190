#!/usr/bin/env bash
# The server's modules depend downward only:
#   service -> consensus -> leader, follower -> raft (the core) -> storage
#   service -> client (the client library depends on none of them)
#   and everything -> common (the Status type; it includes nothing of ours)
#   and everything -> proto (the generated messages; the client: api.h only)
# A file may include headers of its own folder and of the folders below it;
# leader and follower do not include each other. Prints every include that
# breaks the rule and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

declare -A allowed=(
  [common]="common"
  [proto]="proto raftkv grpc"
  [storage]="storage common proto raftkv"
  [raft]="raft storage common proto raftkv"
  [leader]="leader raft storage common proto raftkv"
  [follower]="follower raft storage common proto raftkv"
  [consensus]="consensus leader follower raft storage common proto raftkv"
  [client]="client common proto raftkv"
  [service]="service consensus leader follower raft storage client common proto raftkv"
  [check]="check common proto raftkv"
)

bad=0
for folder in "${!allowed[@]}"; do
  [[ -d src/$folder ]] || continue
  while IFS= read -r line; do
    file=${line%%:*}
    rest=${line#*:}
    lineno=${rest%%:*}
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$rest")
    if [[ " ${allowed[$folder]} " != *" $target "* ]]; then
      echo "$file:$lineno: $folder/ includes $target/ (a layer above or beside it): ${rest#*:}"
      bad=1
    fi
  done < <(grep -Hn -E '^#include "[a-z_]+/' src/"$folder"/*.h src/"$folder"/*.cc 2>/dev/null || true)
done
# The client library speaks the public API only (protos/raftkv/v1).
if grep -Hn '#include "proto/internal.h"' src/client/*.h src/client/*.cc; then
  echo "  ^ the client library includes the server's internal protocol" >&2
  bad=1
fi
if [[ $bad -ne 0 ]]; then
  echo "check_layers: includes running against the module order (see doc/architecture.md)" >&2
  exit 1
fi
echo "check_layers: every include points down"
