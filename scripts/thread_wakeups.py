#!/usr/bin/env python3
"""Where the servers' wake-ups and CPU go per write, thread by thread.

Starts a local 3-member cluster (scripts/cluster.sh), runs Benchmark.Write
against it (by default one request in flight: the latency case), and reads
every server thread's /proc/<pid>/task/<tid>/schedstat and status before and
after. Prints per member and per thread name (threads of one name summed):
CPU microseconds, microseconds spent runnable but waiting for a core, and
voluntary context switches (wake-ups), each per acknowledged write. The
read-back of the written keys is limited to one (--verify_sample=1) so that
it is not counted. Linux only.

  scripts/thread_wakeups.py --bin-dir build --requests 3000 --inflight 1
  scripts/thread_wakeups.py --server-flags=--peer_append_stream=false
"""

import argparse
import collections
import glob
import os
import shlex
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def snapshot(data_dir):
    """{node: {thread name: [run ns, wait ns, voluntary switches]}}"""
    out = {}
    for pidfile in sorted(glob.glob(os.path.join(data_dir, "node*/pid"))):
        node = os.path.basename(os.path.dirname(pidfile))
        with open(pidfile) as f:
            pid = f.read().strip()
        threads = collections.defaultdict(lambda: [0, 0, 0])
        for task in glob.glob(f"/proc/{pid}/task/*"):
            try:
                with open(task + "/comm") as f:
                    name = f.read().strip()
                with open(task + "/schedstat") as f:
                    run, wait, _ = map(int, f.read().split())
                switches = 0
                with open(task + "/status") as f:
                    for line in f:
                        if line.startswith("voluntary_ctxt_switches:"):
                            switches = int(line.split()[1])
            except (OSError, ValueError):
                continue  # a thread that ended meanwhile
            t = threads[name]
            t[0] += run
            t[1] += wait
            t[2] += switches
        out[node] = threads
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", default=os.path.join(REPO, "build"), help="where raftkv-server and raftkv-bench are")
    p.add_argument("--requests", type=int, default=3000, help="writes in the timed part")
    p.add_argument("--inflight", type=int, default=1, help="requests in flight")
    p.add_argument("--value-len", type=int, default=64, help="value bytes per write")
    p.add_argument("--server-flags", default="", help="extra raftkv-server flags for every member")
    args = p.parse_args()
    if not os.path.exists("/proc/self/task"):
        sys.exit("thread_wakeups.py: needs Linux's /proc")
    bench = os.path.join(args.bin_dir, "raftkv-bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"thread_wakeups.py: no {bench} (build first)")
    with tempfile.TemporaryDirectory(prefix="raftkv-wakeups-") as data:
        env = dict(os.environ, RAFTKV_DATA=data, RAFTKV_BIN_DIR=os.path.abspath(args.bin_dir),
                   RAFTKV_SERVER_FLAGS=args.server_flags)
        cluster = os.path.join(REPO, "scripts", "cluster.sh")
        started = subprocess.run(["bash", cluster, "start", "3"], env=env, capture_output=True, text=True)
        if started.returncode != 0:
            sys.exit("thread_wakeups.py: the cluster did not start:\n" + started.stderr)
        try:
            endpoints = [l.split("=", 1)[1] for l in started.stdout.splitlines() if l.startswith("ENDPOINTS=")][0]
            cmd = [bench, "--gtest_filter=Benchmark.Write", f"--target={endpoints}",
                   f"--requests={args.requests}", f"--inflight={args.inflight}", "--conns=1",
                   f"--value_len={args.value_len}", "--verify_sample=1"]
            before = snapshot(data)
            run = subprocess.run(cmd, capture_output=True, text=True)
            after = snapshot(data)
        finally:
            subprocess.run(["bash", cluster, "stop"], env=env, capture_output=True)
    if run.returncode != 0:
        sys.exit("thread_wakeups.py: the benchmark failed: " + shlex.join(cmd) + "\n" + run.stdout[-2000:])
    for line in run.stdout.splitlines():
        if line.startswith(("Benchmark.Write ", "wake-ups", "cpu ")):
            print(line)
    n = args.requests
    print(f"per write: CPU µs / runnable-but-waiting µs / voluntary switches, {n} writes")
    for node, threads in after.items():
        rows = []
        for name, (run_ns, wait_ns, sw) in threads.items():
            b = before.get(node, {}).get(name, [0, 0, 0])
            rows.append((name, (run_ns - b[0]) / n / 1e3, (wait_ns - b[1]) / n / 1e3, (sw - b[2]) / n))
        rows.sort(key=lambda r: -r[3])
        total = [sum(r[i] for r in rows) for i in (1, 2, 3)]
        print(f"{node}: {total[0]:.0f} / {total[1]:.0f} / {total[2]:.1f}")
        for name, cpu, wait, sw in rows:
            if cpu >= 1 or sw >= 0.05:
                print(f"  {name:<16} {cpu:7.0f} {wait:7.0f} {sw:6.2f}")


if __name__ == "__main__":
    main()
