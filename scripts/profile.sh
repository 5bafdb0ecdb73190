#!/usr/bin/env bash
# Where the CPU of a benchmark goes: runs one raftkv-bench scenario on a local
# 3-member cluster, samples the whole machine with perf for a few seconds
# while it runs, and prints for the leader and one follower the share of
# samples by thread (named: raftkv-cq, raftkv-io, raftkv-apply,
# raftkv-peer-cq, gRPC's own) and by library, and the top symbols.
#
#   scripts/profile.sh [SCENARIO] [SECONDS]     (defaults Write 6)
#   e.g. scripts/profile.sh Echo; scripts/profile.sh Write 10
# Environment: RAFTKV_BIN_DIR (default build). Needs perf (linux-perf).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${RAFTKV_BIN_DIR:-build}
scenario=${1:-Write}
seconds=${2:-6}
command -v perf >/dev/null || { echo "profile.sh: needs perf (apt-get install linux-perf)" >&2; exit 2; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

"$bin/raftkv-bench" --gtest_filter="Benchmark.$scenario" --requests=2000000 --inflight=256 \
  >"$out/bench.txt" 2>&1 &
bench=$!
# Wait for the timed part to start (the leader is reported first).
for _ in $(seq 100); do grep -q "leader is member" "$out/bench.txt" 2>/dev/null && break; sleep 0.1; done
sleep 2
leader_port=$(sed -nE 's/.*leader is member [0-9]+ at 127\.0\.0\.1:([0-9]+).*/\1/p' "$out/bench.txt" | head -1)
leader=$(pgrep -f "raftkv-server .*--listen_address=127.0.0.1:$leader_port" | head -1)
follower=$(pgrep -f "raftkv-server .*--listen_address" | grep -vx "$leader" | head -1 || true)
perf record -F 999 -a -o "$out/perf.data" -- sleep "$seconds" >/dev/null 2>&1
kill "$bench" 2>/dev/null || true
wait "$bench" 2>/dev/null || true
pkill -f "raftkv-server .*--listen_address=127.0.0.1:$leader_port" 2>/dev/null || true
perf script -i "$out/perf.data" -F pid,tid,comm,ip,sym,dso -G 2>/dev/null >"$out/samples.txt"
python3 - "$out/samples.txt" "$leader" "$follower" "$scenario" <<'EOF'
import collections, re, sys
path, leader, follower, scenario = sys.argv[1:5]
procs = {leader: "leader", follower: "follower"}
threads = collections.defaultdict(collections.Counter)
dsos = collections.defaultdict(collections.Counter)
syms = collections.defaultdict(collections.Counter)
total = 0
for line in open(path, errors="replace"):
    m = re.match(r"\s*(.+?)\s+(\d+)/(\d+)\s+[0-9a-f]+\s+(.*)\s+\((.*)\)$", line)
    if not m:
        continue
    comm, pid, _, sym, dso = m.groups()
    total += 1
    if pid not in procs:
        continue
    threads[pid][comm] += 1
    dsos[pid][dso.rsplit("/", 1)[-1]] += 1
    syms[pid][sym[:80]] += 1
print(f"{scenario}: {total} samples on the machine")
for pid, name in procs.items():
    n = sum(threads[pid].values())
    if not n:
        continue
    print(f"\n{name} (pid {pid}): {n} samples, {100 * n / total:.1f}% of the machine")
    print("  by thread:  " + ", ".join(f"{t} {100 * c / n:.0f}%" for t, c in threads[pid].most_common(8)))
    print("  by library: " + ", ".join(f"{d} {100 * c / n:.0f}%" for d, c in dsos[pid].most_common(7)))
    print("  top symbols:")
    for s, c in syms[pid].most_common(12):
        print(f"    {100 * c / n:5.1f}%  {s}")
EOF
