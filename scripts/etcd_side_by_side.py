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

--tool etcd-benchmark: ONE load generator, etcd's `benchmark` binary, drives
both systems with the same flags through etcd's v3 gRPC API -- a fresh
3-member etcd cluster (run.sh) and then a fresh 3-member raftkv cluster
(scripts/cluster.sh, default server flags), `--endpoints` = the leader's
client address for both. Each pair (etcd run, raftkv run) holds the build
lock (--lock, default /tmp/raftkv-build.lock) so builds wait while it
measures. Rows (--only, default all): see ROWS below. The CPU seconds of the
three server processes during the benchmark give server CPU per request.

  scripts/etcd_side_by_side.py --tool etcd-benchmark --reps 3 \
      [--bin-dir build] [--benchmark ../shared/tools/etcd-compare/bin/benchmark] \
      [--scale 1.0] [--only put-1c-64,...] [--out DIR]
"""
import argparse
import fcntl
import json
import os
import random
import re
import shutil
import socket
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
    ap.add_argument("--tool", choices=("raftkv-bench", "etcd-benchmark"), default="raftkv-bench",
                    help="raftkv's load generator: raftkv-bench (default) or etcd's benchmark")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "raftkv-bench"))
    ap.add_argument("--etcd-run",
                    default=os.path.join(REPO, "..", "shared", "tools", "etcd-compare", "run.sh"))
    ap.add_argument("--only", default="")
    ap.add_argument("--out", default="")
    ap.add_argument("--bin-dir", default=os.path.join(REPO, "build"),
                    help="etcd-benchmark: raftkv-server and raftkvctl")
    ap.add_argument("--benchmark", default="",
                    help="etcd-benchmark: etcd's benchmark binary (default: bin/benchmark "
                         "next to --etcd-run)")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="etcd-benchmark: multiply every row's --total")
    ap.add_argument("--lock", default="/tmp/raftkv-build.lock",
                    help="etcd-benchmark: flock held during each pair ('' for none)")
    ap.add_argument("--keep", action="store_true",
                    help="etcd-benchmark: keep every raftkv cluster directory")
    a = ap.parse_args()
    if a.tool == "etcd-benchmark":
        return etcd_benchmark_main(a)
    kinds = (a.only or "write,echo,one,read,batch").split(",")
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


# ---------------------------------------------------------------------------
# --tool etcd-benchmark: etcd's benchmark tool against both servers.

# (row, label, benchmark arguments); every --total is multiplied by --scale.
# put: distinct keys (--sequential-keys --key-space-size=total) as in
# raftkv-bench's Write; 8 B keys (the tool's default).
ROWS = [
    ("put-1c-64", "put, 1 client / 1 conn, 64 B",
     ["put", "--conns=1", "--clients=1", "--val-size=64", "--total=8000", "--sequential-keys"]),
    ("put-1c-1k", "put, 1 client / 1 conn, 1 KiB",
     ["put", "--conns=1", "--clients=1", "--val-size=1024", "--total=8000", "--sequential-keys"]),
    ("put-256-64", "put, 256 clients / 16 conns, 64 B",
     ["put", "--conns=16", "--clients=256", "--val-size=64", "--total=150000",
      "--sequential-keys"]),
    ("put-256-1k", "put, 256 clients / 16 conns, 1 KiB",
     ["put", "--conns=16", "--clients=256", "--val-size=1024", "--total=100000",
      "--sequential-keys"]),
    ("range-l", "range, linearizable, 256 clients / 16 conns",
     ["range", "foo", "--conns=16", "--clients=256", "--consistency=l", "--total=200000"]),
    ("range-s", "range, serializable, 256 clients / 16 conns",
     ["range", "foo", "--conns=16", "--clients=256", "--consistency=s", "--total=200000"]),
    ("txn-put", "txn-put, 256 clients / 16 conns, 64 B",
     ["txn-put", "--conns=16", "--clients=256", "--val-size=64", "--total=60000"]),
    # The tool's defaults (1 watcher, 100 puts/s, 32 B keys and values) with
    # 1,000 puts instead of 10,000: ~10 s. Its latency runs from the Put's
    # answer to the watcher's event, so an event that comes before the answer
    # counts as ~0; req/s is the put rate (the first 100 puts go at once).
    ("watch-latency", "watch-latency, 1 watcher, 100 puts/s (rate-limited)",
     ["watch-latency", "--put-rate=100", "--total=1000"]),
    ("lease-keepalive", "lease-keepalive, 256 clients / 16 conns",
     ["lease-keepalive", "--conns=16", "--clients=256", "--total=100000"]),
]


def row_args(args, scale):
    """The row's arguments with --total scaled and, for put and txn-put,
    --key-space-size set to the total (distinct keys); --precise always."""
    out, total = [], None
    for x in args:
        if x.startswith("--total="):
            total = max(1, int(int(x.split("=", 1)[1]) * scale))
            x = f"--total={total}"
        out.append(x)
    if args[0] in ("put", "txn-put"):
        out.append(f"--key-space-size={total}")
    return out + ["--precise"]


def parse_report(text):
    """Requests/sec, p50/p99 (ms), requests answered and the error lines of
    one `benchmark` output (progress bar stripped)."""
    text = text.replace("\r", "\n")
    num = r"([0-9.]+(?:e[-+]?[0-9]+)?)"  # --precise prints %g: 2.742e-06
    r = {"ops": None, "p50": None, "p99": None, "total_s": None, "errors": []}
    m = re.search(r"Requests/sec:\s+" + num, text)
    if m:
        r["ops"] = float(m.group(1))
    m = re.search(r"Total:\s+" + num + " secs", text)
    if m:
        r["total_s"] = float(m.group(1))
    for pct, secs in re.findall(r"^\s*([0-9.]+)% in " + num + " secs", text, re.M):
        if pct in ("50", "99"):
            r["p" + pct] = float(secs) * 1000.0
    m = re.search(r"Error distribution:\n((?:\s+\[\d+\].*\n?)+)", text)
    if m:
        r["errors"] = [l.strip() for l in m.group(1).splitlines() if l.strip()]
    r["n"] = r["ops"] * r["total_s"] if r["ops"] and r["total_s"] else 0
    return r


def benchmark_failure(text, rc):
    """The reason a benchmark run failed: its first error-looking line."""
    lines = [l.strip() for l in text.replace("\r", "\n").splitlines() if l.strip()]
    for l in lines:
        if re.search(r"panic:|rpc error|[Ee]rror|[Ff]ailed", l):
            return f"exit {rc}: {l[:300]}"
    return f"exit {rc}: " + (lines[-1][:300] if lines else "no output")


def etcd_benchmark_run_etcd(a, args, log):
    env = dict(os.environ, BENCH=a.benchmark)
    p = subprocess.run([a.etcd_run, "-n", "3"] + args, capture_output=True, text=True, env=env)
    with open(log, "w") as f:
        f.write(p.stdout + p.stderr)
    r = parse_report(p.stdout)
    m = re.search(r"# cpu: wall=([0-9.]+)s etcd\(all members\)=([0-9.]+)s benchmark=([0-9.]+)s",
                  p.stdout)
    if m:
        r["server_cpu"], r["client_cpu"] = float(m.group(2)), float(m.group(3))
    m = re.search(r"# after: leader=(\S+) term=(\S+) \(before: (\S+) term (\S+)\)", p.stdout)
    if m:
        r["leader_changed"] = m.group(1) != m.group(3) or m.group(2) != m.group(4)
    if p.returncode != 0 or r["ops"] is None:
        r["failed"] = benchmark_failure(p.stdout + p.stderr, p.returncode)
    return r


def free_base_port(span):
    """B such that B+1 .. B+span are free on 127.0.0.1 (scripts/lib/ports.sh),
    away from run.sh's etcd ports 22379-22384."""
    for _ in range(200):
        base = random.randrange(23000, 32000 - span)
        ok = True
        for port in range(base + 1, base + span + 1):
            s = socket.socket()
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", port))
            except OSError:
                ok = False
            finally:
                s.close()
        if ok:
            return base
    raise RuntimeError("no free ports")


def etcdctl(endpoints, *args):
    env = dict(os.environ, ETCDCTL_API="3")
    return subprocess.run(["etcdctl", "--endpoints=" + endpoints, "--dial-timeout=3s",
                           "--command-timeout=5s"] + list(args),
                          capture_output=True, text=True, env=env)


def leader_of(endpoints):
    """(leader's client address, term) from `etcdctl endpoint status -w json`, or None."""
    p = etcdctl(endpoints, "endpoint", "status", "-w", "json")
    if p.returncode != 0:
        return None
    try:
        for e in json.loads(p.stdout):
            st = e["Status"]
            if st.get("leader") and st["header"]["member_id"] == st["leader"]:
                return e["Endpoint"], st.get("raft_term")
    except (ValueError, KeyError, TypeError):
        return None
    return None


def proc_cpu(pids):
    """utime + stime (seconds) summed over pids (/proc/<pid>/stat)."""
    tck, total = os.sysconf("SC_CLK_TCK"), 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # fields 14 and 15 of stat(5)
    return total / tck


def etcd_benchmark_run_raftkv(a, args, log):
    """A fresh 3-member raftkv cluster (scripts/cluster.sh), etcd's benchmark
    against its leader, the cluster stopped; its logs kept on failure."""
    data = tempfile.mkdtemp(prefix="raftkv-etcdbench.")
    env = dict(os.environ, RAFTKV_BIN_DIR=a.bin_dir, RAFTKV_DATA=data,
               RAFTKV_BASE_PORT=str(free_base_port(5)))
    cluster = os.path.join(REPO, "scripts", "cluster.sh")
    notes, r, keep = [], {"ops": None, "failed": None}, a.keep
    try:
        p = subprocess.run(["bash", cluster, "start", "3"], capture_output=True, text=True, env=env)
        notes.append(p.stderr)
        m = re.search(r"^ENDPOINTS=(\S+)", p.stdout, re.M)
        if p.returncode != 0 or not m:
            raise RuntimeError("cluster.sh start failed: " + p.stderr.strip()[-300:])
        endpoints = m.group(1)
        leader = None
        for _ in range(100):
            leader = leader_of(endpoints)
            if leader:
                break
            time.sleep(0.1)
        if not leader:
            raise RuntimeError("no leader in etcdctl endpoint status")
        if args[0] == "range":  # as run.sh: the key exists, with a 64 B value
            q = etcdctl(leader[0], "put", args[1], "v" * 64)
            if q.returncode != 0:
                raise RuntimeError("etcdctl put failed: " + q.stderr.strip())
        pids = [int(open(os.path.join(data, f"node{i}", "pid")).read()) for i in (1, 2, 3)]
        cmd = [a.benchmark, "--endpoints=" + leader[0]] + args
        notes.append(f"# raftkv: members=3, leader={leader[0]} (term {leader[1]}), data={data}\n"
                     f"# cmd: {' '.join(cmd)}\n")
        cpu0, t0, c0 = proc_cpu(pids), time.time(), os.times()
        b = subprocess.run(cmd, capture_output=True, text=True)
        cpu1, t1, c1 = proc_cpu(pids), time.time(), os.times()
        after = leader_of(endpoints)
        r = parse_report(b.stdout)
        r["server_cpu"] = cpu1 - cpu0
        r["client_cpu"] = (c1.children_user - c0.children_user) + (c1.children_system -
                                                                   c0.children_system)
        r["leader_changed"] = after is None or after != leader
        notes.append(b.stdout.replace("\r", "\n") + b.stderr)
        notes.append(f"# cpu: wall={t1 - t0:.2f}s raftkv(all members)={r['server_cpu']:.2f}s "
                     f"benchmark={r['client_cpu']:.2f}s\n# after: leader={after}\n")
        r["failed"] = None
        if b.returncode != 0 or r["ops"] is None:
            r["failed"] = benchmark_failure(b.stdout + b.stderr, b.returncode)
    except (RuntimeError, OSError, ValueError) as e:
        r["failed"] = str(e)
    finally:
        s = subprocess.run(["bash", cluster, "stop"], capture_output=True, text=True, env=env)
        notes.append(s.stderr)
        if r.get("failed") or r.get("errors"):
            keep = True
        for i in (1, 2, 3):
            out = os.path.join(data, f"node{i}", "server.out")
            if keep and os.path.exists(out):
                shutil.copy(out, log + f".node{i}.server.out")
        if not keep:
            shutil.rmtree(data, ignore_errors=True)
    with open(log, "w") as f:
        f.write("".join(notes))
    return r


class BuildLock:
    """flock(2) on the build lock file, as `flock FILE cmd` takes it."""

    def __init__(self, path):
        self.path, self.f = path, None

    def __enter__(self):
        if self.path:
            self.f = open(self.path, "a")
            t0 = time.time()
            fcntl.flock(self.f, fcntl.LOCK_EX)
            waited = time.time() - t0
            if waited > 1:
                print(f"  (waited {waited:.0f} s for {self.path})", file=sys.stderr, flush=True)
        return self

    def __exit__(self, *exc):
        if self.f:
            fcntl.flock(self.f, fcntl.LOCK_UN)
            self.f.close()


def rng(values, digits):
    """median (min–max) of values, '-' if none; digits None: 3 significant
    digits (latencies from µs to s)."""
    values = [v for v in values if v is not None]
    if not values:
        return "-"

    def f(v):
        if digits is not None:
            return ("{:,.%df}" % digits).format(v)
        return "{:,.0f}".format(v) if abs(v) >= 100 else "{:.3g}".format(v)

    med = statistics.median(values)
    if len(values) == 1:
        return f(med)
    return f"{f(med)} ({f(min(values))}–{f(max(values))})"


def cpu_per_req(r):
    """Server CPU µs per answered request."""
    if r.get("server_cpu") is None or not r.get("n"):
        return None
    return r["server_cpu"] / r["n"] * 1e6


def ratio(x, y):
    return x / y if x is not None and y else None


def etcd_benchmark_table(rows, results, reps, out):
    lines = [f"medians of {reps} repetitions, (min–max); ratios per repetition "
             f"(same-sitting pairs), then their median; raw output in {out}", "",
             "| row | etcd req/s | etcd p50 / p99 ms | raftkv req/s | raftkv p50 / p99 ms | "
             "raftkv/etcd req/s | raftkv/etcd p50 | server CPU µs/req etcd / raftkv |",
             "|---|---|---|---|---|---|---|---|"]
    for key, label, _ in rows:
        e, k = results.get(("etcd", key), []), results.get(("raftkv", key), [])
        cells = [label]
        for runs in (e, k):
            bad = [r["failed"] for r in runs if r.get("failed")]
            errs = sorted({x for r in runs for x in r.get("errors", [])})
            ok = [r for r in runs if not r.get("failed")]
            cell = rng([r["ops"] for r in ok], 0)
            if bad:
                cell += f" **{len(bad)} of {len(runs)} runs failed: {bad[0]}**"
            if errs:
                cell += f" (errors: {'; '.join(errs)[:300]})"
            cells += [cell, rng([r["p50"] for r in ok], None) + " / " +
                      rng([r["p99"] for r in ok], None)]
        pairs = [(x, y) for x, y in zip(e, k) if not x.get("failed") and not y.get("failed")]
        cells.append("(rate-limited)" if "rate-limited" in label else
                     rng([ratio(y["ops"], x["ops"]) for x, y in pairs], 2))
        cells.append(rng([ratio(y["p50"], x["p50"]) for x, y in pairs], 2))
        cells.append(rng([cpu_per_req(x) for x, _ in pairs], 0) + " / " +
                     rng([cpu_per_req(y) for _, y in pairs], 0))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def etcd_benchmark_main(a):
    if not a.benchmark:
        a.benchmark = os.path.join(os.path.dirname(os.path.abspath(a.etcd_run)), "bin", "benchmark")
    a.bin_dir = os.path.abspath(a.bin_dir)
    for f in (a.benchmark, a.etcd_run, os.path.join(a.bin_dir, "raftkv-server")):
        if not os.access(f, os.X_OK):
            sys.exit(f"not executable: {f}")
    only = a.only.split(",") if a.only else [k for k, _, _ in ROWS]
    unknown = set(only) - {k for k, _, _ in ROWS}
    if unknown:
        sys.exit(f"unknown rows {sorted(unknown)}; rows: {[k for k, _, _ in ROWS]}")
    rows = [r for r in ROWS if r[0] in only]
    out = a.out or tempfile.mkdtemp(prefix="etcd-benchmark-both.")
    os.makedirs(out, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, raftkv binaries {a.bin_dir}, "
          f"benchmark {a.benchmark}, out {out}", file=sys.stderr, flush=True)
    results, t_start = {}, time.time()
    for rep in range(a.reps):
        for key, _, args in rows:
            args = row_args(args, a.scale)
            with BuildLock(a.lock):
                for system in ("etcd", "raftkv"):
                    log = os.path.join(out, f"{system}-{key}-{rep}.txt")
                    t0 = time.time()
                    r = (etcd_benchmark_run_etcd(a, args, log) if system == "etcd"
                         else etcd_benchmark_run_raftkv(a, args, log))
                    r["cmd"] = args
                    results.setdefault((system, key), []).append(r)
                    what = (f"FAILED {r['failed']}" if r.get("failed") else
                            f"{r['ops']:9.0f} req/s p50 {r['p50'] or 0:.3f} ms "
                            f"p99 {r['p99'] or 0:.3f} ms "
                            f"cpu/req {cpu_per_req(r) or 0:.0f} us"
                            + (f" errors {r['errors']}" if r["errors"] else ""))
                    print(f"[rep {rep + 1}/{a.reps}] {system:6s} {key:15s} {what} "
                          f"({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    table = etcd_benchmark_table(rows, results, a.reps, out)
    print(f"# whole sitting: {(time.time() - t_start) / 60:.1f} min", file=sys.stderr)
    print("\n" + table)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table + "\n")
    json.dump({f"{s}/{k}": v for (s, k), v in results.items()},
              open(os.path.join(out, "results.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
