#!/usr/bin/env bash
# The modules of src/ depend downward only. Each folder may include headers of
# its own folder and of the folders listed for it below; the order, top to
# bottom (doc/architecture.md draws it):
#
#   tools -> ops -> server -> server/etcd -> server/api, server/peer -> server/rpc -> node
#   node -> raft -> leader, follower -> raft/core      node -> kv -> storage
#   server/* -> client
#   storage -> raft/core (the hard state it saves)
#   everything -> common (Status, endpoints, locks) and proto (generated)
#
# Beside the server: check (the linearizability checker), testing (real
# server processes for tests and tools), bench and chaos (tools on top of
# testing and the client), fuzz (libFuzzer targets), gtest (the tests, which
# may include anything; nothing includes them).
#
# Every folder of src/ that holds a .h or .cc file needs a rule here: a new
# folder is reported until it gets one. Prints every include that breaks the
# rule and exits 1 if there is one.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

base="common proto raftkv grpc etcd"
declare -A allowed=(
  [common]="common"
  [proto]="proto raftkv grpc"
  [raft/core]="raft/core $base"
  [leader]="leader raft/core $base"
  [follower]="follower raft/core $base"
  [raft]="raft leader follower raft/core $base"
  [storage]="storage raft/core $base"
  [kv]="kv storage $base"
  [client]="client $base"
  [node]="node raft leader raft/core kv storage $base"
  [server/rpc]="server/rpc node raft leader raft/core kv storage client $base"
  [server/api]="server/api server/rpc node raft leader raft/core kv storage client $base"
  [server/peer]="server/peer server/rpc node raft leader raft/core kv storage client $base"
  [server/etcd]="server/etcd server/api server/rpc node raft leader raft/core kv storage client $base"
  [server]="server server/etcd server/api server/peer server/rpc node raft leader raft/core kv storage client $base"
  [ops]="ops server server/etcd server/api server/peer server/rpc node raft leader raft/core kv storage client $base"
  [tools]="tools ops server server/etcd server/api server/peer server/rpc node raft leader raft/core kv storage client $base"
  [check]="check common"
  [testing]="testing client $base"
  [bench]="bench testing client $base"
  [chaos]="chaos check testing client $base"
  [fuzz]="fuzz raft leader follower raft/core kv storage $base"
  [gtest]="*"
)
# The client library speaks the public API only (protos/raftkv/v1).
public_only="client"

# The folder a file or an include belongs to: its directory under src/, with
# gtest/<anything> counted as gtest and generated headers (raftkv/..., grpc/...)
# by their first component.
layer_of() {
  local dir=$1
  case $dir in
    gtest|gtest/*) echo gtest ;;
    raftkv|raftkv/*) echo raftkv ;;
    grpc|grpc/*) echo grpc ;;
    etcd|etcd/*) echo etcd ;;
    *) echo "$dir" ;;
  esac
}

bad=0
declare -A seen=()
while IFS= read -r file; do
  rel=${file#src/}
  folder=$(layer_of "$(dirname "$rel")")
  seen[$folder]=1
  if [[ -z ${allowed[$folder]+x} ]]; then
    echo "$file: folder src/$(dirname "$rel")/ has no rule in scripts/check_layers.sh"
    bad=1
    continue
  fi
  rule=${allowed[$folder]}
  while IFS= read -r line; do
    lineno=${line%%:*}
    inc=$(sed -E 's/^[0-9]+:#include "([^"]+)".*/\1/' <<<"$line")
    [[ $inc == */* ]] || continue  # a header beside the file, or a system one
    target=$(layer_of "$(dirname "$inc")")
    # Only the project's folders and generated headers are ruled on.
    [[ -d src/$target || $target == raftkv || $target == grpc ]] || continue
    if [[ $folder == gtest ]]; then continue; fi
    if [[ $target == gtest ]]; then
      echo "$file:$lineno: $folder/ includes the tests' $inc (only tests may)"
      bad=1
    elif [[ " $rule " != *" $target "* ]]; then
      echo "$file:$lineno: $folder/ includes $target/ (a layer above or beside it): $inc"
      bad=1
    elif [[ " $public_only " == *" $folder "* && $inc == proto/internal.h ]]; then
      echo "$file:$lineno: $folder/ includes the server's internal protocol (proto/internal.h)"
      bad=1
    fi
  done < <(grep -n -E '^#include "[^"]+"' "$file" || true)
done < <(find src -path src/fuzz/corpus -prune -o -type f \( -name '*.h' -o -name '*.cc' \) -print | sort)

for folder in "${!allowed[@]}"; do
  if [[ -z ${seen[$folder]+x} ]]; then
    echo "scripts/check_layers.sh: a rule for src/$folder/, which holds no source file (remove it)"
    bad=1
  fi
done
if [[ $bad -ne 0 ]]; then
  echo "check_layers: includes running against the module order (see doc/architecture.md)" >&2
  exit 1
fi
echo "check_layers: every include of every folder points down"
