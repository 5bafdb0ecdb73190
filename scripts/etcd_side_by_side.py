#!/usr/bin/env python3
"""raftkv next to etcd, run for run, on this machine.

Each repetition runs every pair below back to back -- etcd's own benchmark
tool against a fresh 3-member etcd cluster (../shared/tools/etcd-compare/
run.sh), then raftkv-bench against a fresh 3-member raftkv cluster -- so both
see the same machine load. The table gives medians over the repetitions,
with the spread (min-max) in parentheses.

  write   etcd `put`, 16 conns, 256 clients, 64 B values, distinct keys
          raftkv Benchmark.Write, 256 in flight, 64 B values, distinct keys
  echo    raftkv Benchmark.Echo (the gRPC ceiling of the same client/server)
  one     etcd `put --conns=1 --clients=1`; raftkv Write --inflight=1 --conns=1
  read    etcd `range --consistency=l`, 16 conns, 256 clients;
          raftkv Benchmark.Read (linearizable Gets, ReadIndex), 256 in flight
  batch   raftkv Benchmark.Batch, 1000 Puts per call, 8 calls in flight
          (etcd's benchmark has no batched put; its `txn-put` is not the same)

Usage:
  scripts/etcd_side_by_side.py [--reps 3] [--bench build/raftkv-bench]
                               [--etcd-run ../shared/tools/etcd-compare/run.sh]
                               [--only write,echo,one,read,batch] [--out DIR]
Raw outputs (etcd text, raftkv JSON) go to DIR (default a new /tmp directory).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ETCD = {
    "write": ["put", "--conns=16", "--clients=256", "--key-size=8", "--val-size=64",
              "--total=150000", "--sequential-keys", "--key-space-size=150000"],
    "one": ["put", "--precise", "--conns=1", "--clients=1", "--key-size=8", "--val-size=64",
            "--total=5000", "--sequential-keys", "--key-space-size=5000"],
    "read": ["range", "foo", "--conns=16", "--clients=256", "--consistency=l",
             "--total=200000"],
}
RAFTKV = {
    "write": ["--gtest_filter=Benchmark.Write", "--requests=80000", "--verify_sample=10000"],
    "echo": ["--gtest_filter=Benchmark.Echo", "--requests=80000"],
    "one": ["--gtest_filter=Benchmark.Write", "--requests=3000", "--inflight=1", "--conns=1"],
    "read": ["--gtest_filter=Benchmark.Read", "--requests=80000"],
    "batch": ["--gtest_filter=Benchmark.Batch", "--requests=1000000", "--batch_ops=1000",
              "--inflight=8", "--verify_sample=10000"],
}


def run_etcd(run_sh, args, log):
    p = subprocess.run([run_sh, "-n", "3"] + args, capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"etcd run failed ({log})")
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", p.stdout).group(1))
    lat = {}
    for pct, secs in re.findall(r"^\s*([0-9.]+)% in ([0-9.]+) secs", p.stdout, re.M):
        lat[pct] = float(secs) * 1000.0
    return {"ops": rps, "p50": lat.get("50"), "p99": lat.get("99")}


def run_raftkv(bench, args, log):
    js = log + ".json"
    p = subprocess.run([bench] + args + ["--json_out=" + js, "--gtest_brief=1"],
                       capture_output=True, text=True)
    with open(log, "w") as f:
        f.write(p.stdout + p.stderr)
    if p.returncode != 0:
        raise RuntimeError(f"raftkv-bench failed ({log})")
    r = json.load(open(js))[0]
    return {"ops": r["ops_per_sec"], "p50": r["latency_us"]["p50"] / 1000.0,
            "p99": r["latency_us"]["p99"] / 1000.0}


def fmt(values, digits):
    if not values:
        return "-"
    med = statistics.median(values)
    f = "{:,.%df}" % digits
    return f"{f.format(med)} ({f.format(min(values))}–{f.format(max(values))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "raftkv-bench"))
    ap.add_argument("--etcd-run",
                    default=os.path.join(REPO, "..", "shared", "tools", "etcd-compare", "run.sh"))
    ap.add_argument("--only", default="write,echo,one,read,batch")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    kinds = a.only.split(",")
    out = a.out or tempfile.mkdtemp(prefix="raftkv-vs-etcd.")
    os.makedirs(out, exist_ok=True)
    results = {}  # (system, kind) -> list of dicts
    for rep in range(a.reps):
        for kind in kinds:
            for system in ("etcd", "raftkv"):
                table = ETCD if system == "etcd" else RAFTKV
                if kind not in table:
                    continue
                log = os.path.join(out, f"{system}-{kind}-{rep}.txt")
                t0 = time.time()
                r = (run_etcd(a.etcd_run, ETCD[kind], log) if system == "etcd"
                     else run_raftkv(a.bench, RAFTKV[kind], log))
                results.setdefault((system, kind), []).append(r)
                print(f"[rep {rep + 1}/{a.reps}] {system:6s} {kind:5s} {r['ops']:10.0f} ops/s  "
                      f"p50 {r['p50']:.3f} ms  p99 {r['p99']:.3f} ms  ({time.time() - t0:.0f} s)",
                      file=sys.stderr, flush=True)

    def col(system, kind, key, digits):
        return fmt([r[key] for r in results.get((system, kind), []) if r[key] is not None], digits)

    print(f"\nmedians of {a.reps} runs, (min–max); raw output in {out}\n")
    print("| measurement | raftkv ops/s | raftkv p50 ms | raftkv p99 ms | etcd ops/s | "
          "etcd p50 ms | etcd p99 ms |")
    print("|---|---|---|---|---|---|---|")
    names = {"write": "writes, 64 B, 256 in flight", "echo": "echo (gRPC ceiling), 256 in flight",
             "one": "writes, one client, one in flight", "read": "linearizable reads, 256 in flight",
             "batch": "batched writes, 1000 per call, 8 calls in flight"}
    for kind in kinds:
        row = [names[kind]]
        for system in ("raftkv", "etcd"):
            row += [col(system, kind, "ops", 0), col(system, kind, "p50", 3),
                    col(system, kind, "p99", 2)]
        print("| " + " | ".join(row) + " |")
    json.dump({f"{s}/{k}": v for (s, k), v in results.items()},
              open(os.path.join(out, "results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
