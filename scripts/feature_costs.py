#!/usr/bin/env python3
"""What each per-call feature costs a write: Benchmark.Write (64 B values, 2
followers, raftkv-bench's default 256 in flight) with one feature changed at a
time against the plain cluster, in one sitting, the repetitions interleaved
(rep 1 of every configuration, then rep 2, ...), medians of --reps.

  plain            the defaults: per-call metrics on, no TLS, no token
  rpc_metrics off  --rpc_metrics=false: unary calls not counted
  token            clients and members send a bearer token (--token_file,
                   --peer_token_file), checked on every call
  TLS              every connection TLS (scripts/gen-certs.sh certificates)
  via follower     the load goes to a follower, which forwards every Put

Per configuration: writes/s, the leader's and each follower's CPU per write
(raftkv-bench's cpu_seconds over the acknowledged writes; with "via follower"
the forwarding follower is one of the followers), each also as a ratio to
plain. Prints a Markdown table.

  scripts/feature_costs.py --bin-dir build --reps 3 --requests 40000
"""

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def configurations(certs, secrets):
    tls = [f"--tls_ca_file={certs}/ca.crt", f"--tls_cert_file={certs}/node.crt",
           f"--tls_key_file={certs}/node.key"]
    return [
        ("plain", [], []),
        ("rpc_metrics off", ["--rpc_metrics=false"], []),
        ("token", [f"--token_file={secrets}/token", f"--peer_token_file={secrets}/peer"],
         [f"--token_file={secrets}/token"]),
        ("TLS", tls, [f"--tls_ca_file={certs}/ca.crt"]),
        ("via follower", [], ["--via_follower"]),
    ]


def run(bench, requests, server_flags, client_flags, json_out):
    cmd = [bench, "--gtest_filter=Benchmark.Write", f"--requests={requests}",
           f"--json_out={json_out}", "--gtest_brief=1"] + client_flags
    if server_flags:
        cmd.append("--server_flags=" + " ".join(server_flags))
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit("failed: " + " ".join(shlex.quote(c) for c in cmd) + "\n" + done.stderr[-2000:])
    with open(json_out) as f:
        report = json.load(f)[0]
    acked = report["acknowledged"]
    cpu = report["cpu_seconds"]
    return {
        "ops": report["ops_per_sec"],
        "leader_us": cpu["leader"] / acked * 1e6,
        "follower_us": cpu["followers"] / report["followers"] / acked * 1e6,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bin-dir", default=os.path.join(REPO_ROOT, "build"))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--requests", type=int, default=40000)
    args = p.parse_args()
    bench = os.path.join(args.bin_dir, "raftkv-bench")
    work = tempfile.mkdtemp(prefix="raftkv-costs.")
    certs, secrets = os.path.join(work, "certs"), os.path.join(work, "secrets")
    os.makedirs(secrets)
    subprocess.run(["bash", os.path.join(REPO_ROOT, "scripts", "gen-certs.sh"), certs,
                    "node=IP:127.0.0.1"], check=True, stdout=subprocess.DEVNULL)
    for name in ("token", "peer"):
        with open(os.path.join(secrets, name), "w") as f:
            f.write(os.urandom(16).hex() + "\n")
        os.chmod(os.path.join(secrets, name), 0o600)
    configs = configurations(certs, secrets)
    results = {name: [] for name, _, _ in configs}
    try:
        for rep in range(args.reps):
            for i, (name, server, client) in enumerate(configs):
                r = run(bench, args.requests, server, client, os.path.join(work, f"{rep}-{i}.json"))
                results[name].append(r)
                print(f"rep {rep + 1} {name}: {r['ops']:.0f} writes/s, leader {r['leader_us']:.1f} us, "
                      f"follower {r['follower_us']:.1f} us per write", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = {name: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
           for name, runs in results.items()}
    base = med["plain"]
    print("| configuration | writes/s | leader CPU/write | follower CPU/write |")
    print("|---|---|---|---|")
    for name, _, _ in configs:
        m = med[name]
        print(f"| {name} | {m['ops']:,.0f} ({m['ops'] / base['ops']:.2f}x) "
              f"| {m['leader_us']:.1f} µs ({m['leader_us'] / base['leader_us']:.2f}x) "
              f"| {m['follower_us']:.1f} µs ({m['follower_us'] / base['follower_us']:.2f}x) |")


if __name__ == "__main__":
    main()
