#!/usr/bin/env python3
"""Runs the raftkv benchmark sweeps and writes doc/benchmark.md and its plots.

Every point is a separate `raftkv-bench` run (a fresh local cluster each time)
with --json_out; every point is repeated --reps times (default 3), the
repetitions interleaved (rep 1 of every point, then rep 2, ...) so that a burst
of outside load spreads over points instead of hitting all runs of one point.

Sweeps (the client knobs stay at raftkv-bench's defaults unless noted):
  value length  Write and Echo, 32..4096 B values, 2 followers
  followers     Write, 1..6 followers, 64 B values
  in flight     Write, 64 B, 2 followers, --inflight 1..1024 (the load knob);
                plus Echo at --inflight=1 (an unloaded gRPC round trip)
  read          Read, 64 B, 2 followers

Output: doc/images/{throughput,latency}-vs-{value-len,followers}.png,
doc/images/throughput-latency-vs-inflight.png, doc/benchmark.md, and the raw
JSON of every run in --work-dir (results.json). --from-json re-renders the
document and plots from a results.json without running anything.

Needs python3-matplotlib (Debian: apt-get install -y python3-matplotlib).

  scripts/bench_sweep.py                       # the full sweep (~10-15 min on 2 cores)
  scripts/bench_sweep.py --requests=2000 --reps=1 --doc=/tmp/b.md --images-dir=/tmp/img   # quick
"""

import argparse
import datetime
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

VALUE_LENS = [32, 64, 128, 256, 512, 1024, 2048, 4096]
FOLLOWERS = [1, 2, 3, 4, 5, 6]
INFLIGHTS = [1, 8, 32, 128, 256, 1024]
BASE_VALUE_LEN = 64
BASE_FOLLOWERS = 2
BASE_INFLIGHT = 256  # raftkv-bench's default

IMAGES = {
    "tp_vlen": "throughput-vs-value-len.png",
    "tp_foll": "throughput-vs-followers.png",
    "lat_vlen": "latency-vs-value-len.png",
    "lat_foll": "latency-vs-followers.png",
    "inflight": "throughput-latency-vs-inflight.png",
}


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__[__doc__.index("\n") + 1:])
    p.add_argument("--bench", default=os.path.join(REPO_ROOT, "build", "raftkv-bench"),
                   help="the raftkv-bench binary (default: <repo>/build/raftkv-bench)")
    p.add_argument("--requests", type=int, default=30000,
                   help="requests per run (default 30000: the whole sweep in ~10-15 min on "
                        "2 cores); small values make a quick run")
    p.add_argument("--reps", type=int, default=3, help="repetitions of every point (default 3)")
    p.add_argument("--value-lens", type=int_list, default=VALUE_LENS,
                   help="value lengths of the value-length sweep (default %(default)s)")
    p.add_argument("--followers", type=int_list, default=FOLLOWERS,
                   help="follower counts of the follower sweep (default %(default)s)")
    p.add_argument("--inflights", type=int_list, default=INFLIGHTS,
                   help="--inflight values of the in-flight sweep (default %(default)s; "
                        "empty to skip)")
    p.add_argument("--verify-sample", type=int, default=0,
                   help="raftkv-bench --verify_sample for the Write runs (default 0: read back "
                        "every acknowledged write)")
    p.add_argument("--bench-args", default="",
                   help="extra raftkv-bench flags for every run, e.g. \"--conns=8\"")
    p.add_argument("--images-dir", default=os.path.join(REPO_ROOT, "doc", "images"))
    p.add_argument("--image-prefix", default="",
                   help="prefix of the plot file names (scripts/lan_bench.sh --sweep: \"lan_\")")
    p.add_argument("--compare-json", default="",
                   help="results.json of another sweep whose Write runs are drawn as a dotted "
                        "line in the value-length and follower plots")
    p.add_argument("--compare-label", default="loopback",
                   help="legend of the --compare-json line (default %(default)s)")
    p.add_argument("--series-label", default="",
                   help="appended to this sweep's legend entries, e.g. \"LAN\"")
    p.add_argument("--plot-note", default="",
                   help="a line added to every plot title, e.g. the emulated network")
    p.add_argument("--doc", default=os.path.join(REPO_ROOT, "doc", "benchmark.md"))
    p.add_argument("--work-dir", default="",
                   help="where the per-run JSON and results.json go (default: a new "
                        "/tmp/raftkv-bench-sweep-* directory)")
    p.add_argument("--from-json", default="",
                   help="do not run: render the document and plots from this results.json")
    p.add_argument("--run-timeout", type=int, default=900,
                   help="seconds before one raftkv-bench run is killed (default 900)")
    return p.parse_args()


# ---------------------------------------------------------------------------
# Running


def point_key(p):
    return (p["scenario"], p["value_len"], p["followers"], p["inflight"], p["conns"],
            p["requests"])


def make_points(args):
    """The distinct runs of one repetition, each tagged with the sweeps using it."""
    points = {}

    def add(sweep, scenario, value_len=BASE_VALUE_LEN, followers=BASE_FOLLOWERS,
            inflight=BASE_INFLIGHT, conns=None, requests=None):
        p = {"scenario": scenario, "value_len": value_len, "followers": followers,
             "inflight": inflight, "conns": conns, "requests": requests or args.requests}
        key = point_key(p)
        if key not in points:
            p["sweeps"] = []
            points[key] = p
        if sweep not in points[key]["sweeps"]:
            points[key]["sweeps"].append(sweep)

    for v in args.value_lens:
        add("value_len", "Write", value_len=v)
        add("value_len", "Echo", value_len=v)
    for f in args.followers:
        add("followers", "Write", followers=f)
    add("followers", "Echo")  # the ceiling line of the follower plot
    for n in args.inflights:
        # Few requests at low concurrency: at --inflight=1 a run is ~1-2 ms per request.
        requests = min(args.requests, max(1000, 250 * n))
        add("inflight", "Write", inflight=n, conns=1 if n == 1 else None, requests=requests)
    if args.inflights:
        add("inflight", "Echo", inflight=1, conns=1, requests=min(args.requests, 2000))
    add("read", "Read")
    add("read", "Write")
    add("read", "Echo")
    return list(points.values())


def bench_command(args, p, json_out):
    cmd = [args.bench, "--gtest_filter=Benchmark." + p["scenario"],
           "--requests=%d" % p["requests"], "--value_len=%d" % p["value_len"],
           "--followers=%d" % p["followers"], "--inflight=%d" % p["inflight"]]
    if p["conns"]:
        cmd.append("--conns=%d" % p["conns"])
    if p["scenario"] == "Write" and args.verify_sample:
        cmd.append("--verify_sample=%d" % args.verify_sample)
    cmd += shlex.split(args.bench_args)
    cmd.append("--json_out=" + json_out)
    return cmd


def describe(p):
    text = "%-5s value %4d B, %d followers, inflight %4d" % (
        p["scenario"], p["value_len"], p["followers"], p["inflight"])
    if p["conns"]:
        text += ", conns %d" % p["conns"]
    return text


def run_point(args, p, rep, work_dir, index):
    json_out = os.path.join(work_dir, "run-%03d.json" % index)
    cmd = bench_command(args, p, json_out)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=args.run_timeout, cwd=work_dir)
        output = proc.stdout.decode(errors="replace")
        rc = proc.returncode
    except subprocess.TimeoutExpired as e:
        output = (e.stdout or b"").decode(errors="replace") + "\n(killed after %d s)" % args.run_timeout
        rc = -1
    wall = time.monotonic() - start
    with open(os.path.join(work_dir, "run-%03d.out" % index), "w") as f:
        f.write(" ".join(shlex.quote(c) for c in cmd) + "\n" + output)
    report = None
    try:
        with open(json_out) as f:
            reports = json.load(f)
        report = reports[0] if reports else None
    except (OSError, ValueError):
        pass
    run = {"point": {k: v for k, v in p.items() if k != "sweeps"}, "sweeps": p["sweeps"],
           "rep": rep, "exit_code": rc, "wall_seconds": round(wall, 2),
           "command": " ".join(shlex.quote(c) for c in cmd), "report": report,
           "passed": rc == 0 and report is not None and report.get("passed", False)}
    if not run["passed"]:
        run["failure"] = [l for l in output.splitlines() if l.startswith("FAILED")][:3] or \
                         output.splitlines()[-5:]
    return run


def run_sweep(args):
    if not os.access(args.bench, os.X_OK):
        sys.exit("bench_sweep: %s is not an executable; build it first:\n"
                 "  cmake --build build --target raftkv-bench raftkv-server" % args.bench)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="raftkv-bench-sweep-")
    os.makedirs(work_dir, exist_ok=True)
    points = make_points(args)
    total = len(points) * args.reps
    print("bench_sweep: %d points x %d reps = %d runs, %d requests each; raw results in %s"
          % (len(points), args.reps, total, args.requests, work_dir), flush=True)
    print("bench_sweep: describing the machine (includes a short fsync probe)", flush=True)
    machine = machine_info(args.bench)
    meta = {"started": datetime.datetime.now().isoformat(timespec="seconds"),
            "machine": machine,
            "loadavg_start": os.getloadavg(), "argv": sys.argv[1:], "requests": args.requests,
            "reps": args.reps, "bench": args.bench, "bench_args": args.bench_args,
            "verify_sample": args.verify_sample, "plot_note": args.plot_note,
            "series_label": args.series_label}
    runs = []
    t0 = time.monotonic()
    n = 0
    for rep in range(1, args.reps + 1):
        for p in points:
            n += 1
            run = run_point(args, p, rep, work_dir, n)
            runs.append(run)
            r = run["report"]
            if run["passed"]:
                status = "%8.0f ops/s  p50 %7.2f ms  p99 %7.2f ms" % (
                    r["ops_per_sec"], r["latency_us"]["p50"] / 1000, r["latency_us"]["p99"] / 1000)
            else:
                status = "FAILED (exit %d): %s" % (run["exit_code"], " | ".join(run["failure"]))
            elapsed = time.monotonic() - t0
            eta = elapsed / n * (total - n)  # runs of one sweep take about the same time
            left = "%.0f s" % eta if eta < 120 else "%.0f min" % (eta / 60)
            print("[%3d/%d %6.0f s, ~%s left] rep %d  %s: %s  (%.1f s)" % (
                n, total, elapsed, left, rep, describe(p), status, run["wall_seconds"]),
                flush=True)
            # Kept after every run: an interrupted long sweep keeps what it measured
            # (--from-json renders a partial file too).
            with open(os.path.join(work_dir, "results.partial.json"), "w") as f:
                json.dump({"meta": meta, "runs": runs}, f, indent=1)
    meta["finished"] = datetime.datetime.now().isoformat(timespec="seconds")
    meta["loadavg_end"] = os.getloadavg()
    meta["fsync_end"] = fsync_probe(machine["tmpdir"])
    meta["sweep_seconds"] = round(time.monotonic() - t0, 1)
    results = {"meta": meta, "runs": runs}
    with open(os.path.join(work_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    os.remove(os.path.join(work_dir, "results.partial.json"))
    print("bench_sweep: %d runs in %.0f s; results in %s" % (
        len(runs), meta["sweep_seconds"], os.path.join(work_dir, "results.json")), flush=True)
    return results


# ---------------------------------------------------------------------------
# Aggregation


class Stat:
    """Median and spread of one metric over the passed repetitions of a point."""

    def __init__(self, values):
        self.values = [v for v in values if v is not None]
        self.n = len(self.values)
        self.median = statistics.median(self.values) if self.values else float("nan")
        self.min = min(self.values) if self.values else float("nan")
        self.max = max(self.values) if self.values else float("nan")

    def ok(self):
        return self.n > 0


def select(runs, sweep=None, **point):
    out = []
    for run in runs:
        if sweep and sweep not in run["sweeps"]:
            continue
        if all(run["point"].get(k) == v for k, v in point.items()):
            out.append(run)
    return out


class Agg:
    """The runs of one point."""

    def __init__(self, runs):
        self.runs = runs
        self.passed = [r for r in runs if r["passed"]]
        self.failed = len(runs) - len(self.passed)
        rep = [r["report"] for r in self.passed]
        self.ops = Stat([x["ops_per_sec"] for x in rep])
        self.mbs = Stat([x["mb_per_sec"] for x in rep])
        self.p50 = Stat([x["latency_us"]["p50"] / 1000 for x in rep])
        self.p90 = Stat([x["latency_us"]["p90"] / 1000 for x in rep])
        self.p99 = Stat([x["latency_us"]["p99"] / 1000 for x in rep])
        self.p999 = Stat([x["latency_us"]["p999"] / 1000 for x in rep])
        self.max = Stat([x["latency_us"]["max"] / 1000 for x in rep])
        self.avg = Stat([x["latency_us"]["avg"] / 1000 for x in rep])

        def per_request(part):
            vals = []
            for x in rep:
                cpu = (x.get("cpu_seconds") or {}).get(part)
                if cpu is not None and x["acknowledged"]:
                    vals.append(cpu / x["acknowledged"] * 1e6)
            return Stat(vals)

        self.cpu_client = per_request("client")
        self.cpu_leader = per_request("leader")
        self.cpu_followers = per_request("followers")

        def cores(x):
            c = x.get("cpu_seconds") or {}
            parts = [c.get(k) for k in ("client", "leader", "followers")]
            if any(v is None for v in parts) or not x["seconds"]:
                return None
            return sum(parts) / x["seconds"]

        self.cores = Stat([cores(x) for x in rep])
        self.requests = rep[0]["requests"] if rep else (runs[0]["point"]["requests"] if runs else 0)
        self.verified = sum(x["verified"]["checked"] for x in rep)
        self.verify_modes = sorted({x["verified"]["mode"] for x in rep})

    def ok(self):
        return bool(self.passed)


def fmt(stat, digits=0, unit=""):
    if not stat.ok():
        return "n/a"
    if stat.n == 1:
        return "%.*f%s" % (digits, stat.median, unit)
    return "%.*f%s (%.*f–%.*f)" % (digits, stat.median, unit, digits, stat.min, digits, stat.max)


def lat_digits(stat):
    return 2 if stat.ok() and stat.median < 10 else 1


# ---------------------------------------------------------------------------
# Plots


def plots(results, images_dir, compare=None):
    """compare: (label, runs) of another sweep, drawn as a dotted Write line."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("bench_sweep: matplotlib is missing; on Debian: apt-get install -y "
                 "python3-matplotlib")
    os.makedirs(images_dir, exist_ok=True)
    runs = results["runs"]
    reps = results["meta"]["reps"]

    def errbar(ax, xs, stats, **kw):
        xs2 = [x for x, s in zip(xs, stats) if s.ok()]
        ss = [s for s in stats if s.ok()]
        if not ss:
            return
        med = [s.median for s in ss]
        lo = [s.median - s.min for s in ss]
        hi = [s.max - s.median for s in ss]
        ax.errorbar(xs2, med, yerr=[lo, hi], capsize=4, marker="o", **kw)

    series = results["meta"].get("series_label")

    def finish(fig, ax, title, path):
        ax.set_title(title, fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        if series:  # name this sweep's lines when another sweep's line is drawn too
            labels = [l if compare and l.endswith(compare[0]) else "%s, %s" % (l, series)
                      for l in labels]
        ax.legend(handles, labels, fontsize=9)
        fig.tight_layout()
        fig.savefig(os.path.join(images_dir, path), dpi=110)
        plt.close(fig)

    note = "median of %d runs, bars: min–max; shared 2-core machine" % reps
    if results["meta"].get("plot_note"):
        note += "\n" + results["meta"]["plot_note"]
    vlens = sorted({r["point"]["value_len"] for r in select(runs, "value_len")})
    folls = sorted({r["point"]["followers"] for r in select(runs, "followers", scenario="Write")})

    if vlens:
        w = [Agg(select(runs, "value_len", scenario="Write", value_len=v)) for v in vlens]
        e = [Agg(select(runs, "value_len", scenario="Echo", value_len=v)) for v in vlens]
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        errbar(ax, vlens, [a.ops for a in w], label="Write (Put, 2 followers)")
        if compare:
            errbar(ax, vlens, [Agg(select(compare[1], "value_len", scenario="Write", value_len=v)).ops
                               for v in vlens], label="Write, %s" % compare[0], linestyle=":",
                   color="tab:green")
        errbar(ax, vlens, [a.ops for a in e], label="Echo: gRPC ceiling", linestyle="--",
               color="gray")
        ax.set_xscale("log", base=2)
        ax.set_xticks(vlens)
        ax.set_xticklabels([str(v) for v in vlens])
        ax.set_xlabel("value length (bytes; key 16 B)")
        ax.set_ylabel("requests / s")
        ax.set_ylim(bottom=0)
        finish(fig, ax, "Throughput vs value length\n(%s)" % note, IMAGES["tp_vlen"])

        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        errbar(ax, vlens, [a.p50 for a in w], label="Write p50")
        if compare:
            errbar(ax, vlens, [Agg(select(compare[1], "value_len", scenario="Write", value_len=v)).p50
                               for v in vlens], label="Write p50, %s" % compare[0], linestyle=":",
                   color="tab:green")
        errbar(ax, vlens, [a.p99 for a in w], label="Write p99")
        errbar(ax, vlens, [a.p50 for a in e], label="Echo p50", linestyle="--", color="gray")
        ax.set_xscale("log", base=2)
        ax.set_xticks(vlens)
        ax.set_xticklabels([str(v) for v in vlens])
        ax.set_xlabel("value length (bytes; key 16 B)")
        ax.set_ylabel("latency (ms), %d requests in flight" % BASE_INFLIGHT)
        ax.set_ylim(bottom=0)
        finish(fig, ax, "Latency vs value length, 2 followers\n(%s)" % note, IMAGES["lat_vlen"])

    if folls:
        w = [Agg(select(runs, "followers", scenario="Write", followers=f)) for f in folls]
        echo = Agg(select(runs, "followers", scenario="Echo"))
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        errbar(ax, folls, [a.ops for a in w], label="Write (Put, 64 B)")
        if compare:
            errbar(ax, folls, [Agg(select(compare[1], "followers", scenario="Write", followers=f)).ops
                               for f in folls], label="Write, %s" % compare[0], linestyle=":",
                   color="tab:green")
        if echo.ok():
            ax.axhline(echo.ops.median, linestyle="--", color="gray",
                       label="Echo: gRPC ceiling (%.0f/s)" % echo.ops.median)
            ax.axhspan(echo.ops.min, echo.ops.max, color="gray", alpha=0.12)
        ax.set_xticks(folls)
        ax.set_xlabel("followers (cluster of 1 + N processes on the same machine)")
        ax.set_ylabel("requests / s")
        ax.set_ylim(bottom=0)
        finish(fig, ax, "Throughput vs number of followers\n(%s)" % note, IMAGES["tp_foll"])

        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        errbar(ax, folls, [a.p50 for a in w], label="Write p50")
        if compare:
            errbar(ax, folls, [Agg(select(compare[1], "followers", scenario="Write", followers=f)).p50
                               for f in folls], label="Write p50, %s" % compare[0], linestyle=":",
                   color="tab:green")
        errbar(ax, folls, [a.p99 for a in w], label="Write p99")
        ax.set_xticks(folls)
        ax.set_xlabel("followers")
        ax.set_ylabel("latency (ms), %d requests in flight" % BASE_INFLIGHT)
        ax.set_ylim(bottom=0)
        finish(fig, ax, "Latency vs number of followers, 64 B\n(%s)" % note, IMAGES["lat_foll"])

    infl = sorted({r["point"]["inflight"] for r in select(runs, "inflight", scenario="Write")})
    if infl:
        w = [Agg(select(runs, "inflight", scenario="Write", inflight=n)) for n in infl]
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        errbar(ax, infl, [a.ops for a in w], label="Write throughput (left)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(infl)
        ax.set_xticklabels([str(n) for n in infl])
        ax.set_xlabel("requests in flight (--inflight), 64 B, 2 followers")
        ax.set_ylabel("requests / s")
        ax.set_ylim(bottom=0)
        ax2 = ax.twinx()
        errbar(ax2, infl, [a.p50 for a in w], label="p50 latency (right)", color="tab:orange")
        errbar(ax2, infl, [a.p99 for a in w], label="p99 latency (right)", color="tab:red")
        ax2.set_yscale("log")
        ax2.set_ylabel("latency (ms, log scale)")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=9, loc="upper left")
        ax.set_title("Write throughput and latency vs requests in flight\n(%s)" % note,
                     fontsize=11)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(images_dir, IMAGES["inflight"]), dpi=110)
        plt.close(fig)


# ---------------------------------------------------------------------------
# Machine description


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              timeout=30).stdout.decode(errors="replace").strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def fsync_probe(directory, count=200):
    """Latency of an append + fdatasync, as the servers' log does it: 128 B (one small
    record) and 4 KiB (a batch)."""
    path = os.path.join(directory, "raftkv-fsync-probe-%d" % os.getpid())
    parts = []
    for size in (128, 4096):
        times = []
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                block = b"x" * size
                for _ in range(count):
                    t = time.perf_counter()
                    os.write(fd, block)
                    os.fdatasync(fd)
                    times.append((time.perf_counter() - t) * 1000)
            finally:
                os.close(fd)
                os.unlink(path)
        except OSError as e:
            return "fsync probe failed: %s" % e
        times.sort()
        parts.append("%s: median %.2f ms, p99 %.2f ms" % (
            "128 B" if size == 128 else "4 KiB", times[len(times) // 2],
            times[int(len(times) * 0.99)]))
    return "append + fdatasync in %s (%d samples each), %s" % (directory, count, "; ".join(parts))


def machine_info(bench):
    info = {}
    info["nproc"] = sh("nproc") or str(os.cpu_count())
    models = [l.split(":", 1)[1].strip() for l in read("/proc/cpuinfo").splitlines()
              if l.startswith("model name")]
    info["cpu"] = models[0] if models else platform.processor()
    flags = [l for l in read("/proc/cpuinfo").splitlines() if l.startswith("flags")]
    info["virtual"] = bool(flags) and " hypervisor" in flags[0]
    mem = [l for l in read("/proc/meminfo").splitlines() if l.startswith("MemTotal")]
    info["memory"] = "%.1f GiB" % (int(mem[0].split()[1]) / 1024 / 1024) if mem else "?"
    info["kernel"] = platform.release()
    osr = [l for l in read("/etc/os-release").splitlines() if l.startswith("PRETTY_NAME=")]
    info["os"] = osr[0].split("=", 1)[1].strip('"') if osr else platform.system()
    tmpdir = tempfile.gettempdir()
    info["tmp_fs"] = sh("df -hT %s | tail -1" % shlex.quote(tmpdir))
    info["fsync"] = fsync_probe(tmpdir)
    info["tmpdir"] = tmpdir
    info["grpc"] = sh("dpkg-query -W -f='${Version}' libgrpc++-dev")
    cache = read(os.path.join(os.path.dirname(os.path.abspath(bench)), "CMakeCache.txt"))
    build_type = [l.split("=", 1)[1] for l in cache.splitlines()
                  if l.startswith("CMAKE_BUILD_TYPE:")]
    info["build_type"] = build_type[0] if build_type else "?"
    compiler = [l.split("=", 1)[1] for l in cache.splitlines()
                if l.startswith("CMAKE_CXX_COMPILER:")]
    info["compiler"] = sh("%s --version | head -1" % shlex.quote(compiler[0])) if compiler else ""
    info["commit"] = sh("git -C %s rev-parse --short HEAD" % shlex.quote(REPO_ROOT))
    if sh("git -C %s status --porcelain -- src protos CMakeLists.txt" % shlex.quote(REPO_ROOT)):
        info["commit"] += " + uncommitted changes"
    return info


# ---------------------------------------------------------------------------
# The document


def kept_block(doc_path, name):
    """The hand-written block `name` of the existing page, markers included.

    Sections measured by hand (side-by-side runs, profiles, soak runs) live
    between <!-- keep:NAME --> and <!-- /keep:NAME --> and survive a re-render.
    """
    begin, end = "<!-- keep:%s -->" % name, "<!-- /keep:%s -->" % name
    try:
        with open(doc_path) as f:
            text = f.read()
    except OSError:
        return []
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        return []
    return text[i:j + len(end)].split("\n") + [""]


def write_doc(results, args, doc_path, images_dir):
    runs = results["runs"]
    meta = results["meta"]
    m = meta.get("machine") or machine_info(meta.get("bench", args.bench))
    verify_sample = meta.get("verify_sample", 0)
    reps = meta["reps"]
    rel_img = os.path.relpath(images_dir, os.path.dirname(os.path.abspath(doc_path)))
    L = []
    add = L.append

    def img(key, alt):
        if os.path.exists(os.path.join(images_dir, IMAGES[key])):
            add("![%s](%s/%s)" % (alt, rel_img, IMAGES[key]))
            add("")

    base_w = Agg(select(runs, scenario="Write", value_len=BASE_VALUE_LEN, followers=BASE_FOLLOWERS,
                        inflight=BASE_INFLIGHT, conns=None))
    base_e = Agg(select(runs, scenario="Echo", value_len=BASE_VALUE_LEN, followers=BASE_FOLLOWERS,
                        inflight=BASE_INFLIGHT, conns=None))
    base_r = Agg(select(runs, scenario="Read", value_len=BASE_VALUE_LEN, followers=BASE_FOLLOWERS,
                        inflight=BASE_INFLIGHT, conns=None))
    n_failed = sum(1 for r in runs if not r["passed"])

    add("# raftkv benchmark")
    add("")
    add("Generated by `scripts/bench_sweep.py` on %s (sweep of %d runs, %.0f s). "
        "**All numbers come from one shared 2-core virtual machine**: the client, the leader "
        "and every follower run on the same 2 cores (and the same disk), on a machine that "
        "other users share (1-minute load average %.1f at the start, %.1f at the end; the "
        "benchmark's own processes count in it). Treat the numbers as a lower bound and as a "
        "comparison between configurations, not as what raftkv does on dedicated machines."
        % (meta["started"].replace("T", " "), len(runs), meta.get("sweep_seconds", 0),
           meta["loadavg_start"][0], meta["loadavg_end"][0]))
    add("")
    add("## Headline (64 B values, 16 B keys, 2 followers, %d requests in flight)" % BASE_INFLIGHT)
    add("")
    if base_w.ok() and base_e.ok():
        add("| scenario | throughput (ops/s) | p50 latency | p99 latency |")
        add("|---|---|---|---|")
        for name, a in (("Write (Put, replicated + fsynced on a majority)", base_w),
                        ("Read (linearizable Get, ReadIndex)", base_r),
                        ("Echo (no-op RPC: the gRPC ceiling)", base_e)):
            if a.ok():
                add("| %s | %s | %s ms | %s ms |" % (name, fmt(a.ops), fmt(a.p50, 1),
                                                     fmt(a.p99, 1)))
        add("")
        add("Write reaches **%.0f%%** of the Echo ceiling (medians; %d runs each, spread in "
            "parentheses as min–max)." % (100 * base_w.ops.median / base_e.ops.median, reps))
        add("")
    add("Every run %s: %s. Failed runs in the whole sweep: **%d**."
        % ("passed its checks" if n_failed == 0 else "was checked",
           "after each Write run every acknowledged write was read back with a linearizable "
           "Get and compared with the value sent" if not verify_sample else
           "after each Write run a random sample of %d acknowledged writes was read back"
           % verify_sample, n_failed))
    add("")

    L.extend(kept_block(doc_path, "targets"))
    add("## Machine")
    add("")
    add("| | |")
    add("|---|---|")
    add("| CPU | %s, `nproc` = %s%s |" % (m["cpu"], m["nproc"],
                                          " (virtual machine: hypervisor flag set)"
                                          if m["virtual"] else ""))
    add("| memory | %s |" % m["memory"])
    add("| OS / kernel | %s / %s |" % (m["os"], m["kernel"]))
    add("| disk | `%s` (cluster data goes to a fresh `/tmp/raftkv-integ-*` directory) |"
        % m["tmp_fs"])
    add("| fsync, before the sweep | %s |" % m["fsync"])
    if meta.get("fsync_end"):
        add("| fsync, after the sweep | %s |" % meta["fsync_end"])
    add("| build | %s, %s, gRPC %s, commit %s |" % (m["build_type"], m["compiler"], m["grpc"],
                                                 m["commit"]))
    add("")
    add("The servers fdatasync their log before acknowledging: every Write waits for the "
        "leader's and at least one follower's fsync (in parallel), amortized over a batch by "
        "group commit. The virtual disk's fsync latency depends on what the other users of "
        "the machine are doing (it has been seen anywhere from 0.1 ms to 8 ms here).")
    add("")

    add("## How it was measured")
    add("")
    add("`raftkv-bench` (a gtest binary: `src/gtest/benchmark/`, library `src/bench/`) starts a "
        "local cluster of 1 + N `raftkv-server` processes on 127.0.0.1 with default server "
        "flags (data in a temporary directory), waits for a leader, opens `--conns` client "
        "channels to it (each its own TCP connection) and sends `--requests` unary calls "
        "through the asynchronous gRPC API (`PrepareAsyncPut` / `PrepareAsyncGet` / "
        "`PrepareAsyncEcho` on a `grpc::CompletionQueue`, polled by `--client_cq_num` x "
        "`--client_threads_per_cq` threads). It is a closed loop: `--inflight` calls are "
        "outstanding at any time and each completion sends the next. Latency is per request, "
        "from just before the call is started to the moment its completion is taken off the "
        "queue, so **under load it includes queueing**; throughput is acknowledged requests "
        "divided by the time from the first send to the last completion. Client knobs for all "
        "points unless noted: 4 connections, 1 CQ x 2 threads, 256 in flight, deadline "
        "5000 ms, 16 B keys. Each point is a fresh cluster; each is repeated %d time%s, the "
        "repetitions interleaved (all points once, then again ...)."
        % (reps, "" if reps == 1 else "s"))
    add("")
    add("The whole sweep:")
    add("")
    add("```sh")
    add("cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release")
    add("cmake --build build --target raftkv-bench raftkv-server")
    # Local paths (binary, output, scratch) are left out: they do not change the runs.
    local = ("--bench", "--doc", "--images-dir", "--work-dir")
    shown, skip = [], False
    for a in meta.get("argv", []):
        if skip:
            skip = False
        elif a in local:
            skip = True  # "--bench PATH": the path is the next argument
        elif not a.startswith(tuple(f + "=" for f in local)):
            shown.append(a)
    add(" ".join(["scripts/bench_sweep.py"] + [shlex.quote(a) for a in shown]))
    add("```")
    add("")
    add("One point, by hand (what the script runs; `--json_out` gives the report as JSON):")
    add("")
    add("```sh")
    add("build/raftkv-bench --gtest_filter=Benchmark.Write --requests=%d --value_len=64 "
        "--followers=2 --json_out=write.json" % meta["requests"])
    add("build/raftkv-bench --gtest_filter=Benchmark.Echo --requests=%d --value_len=64 "
        "--followers=2" % meta["requests"])
    add("build/raftkv-bench --gtest_filter=Benchmark.Read --requests=%d --value_len=64 "
        "--followers=2" % meta["requests"])
    add("build/raftkv-bench --gtest_filter=Benchmark.Write --target=127.0.0.1:7001,127.0.0.1:7002   "
        "# an existing cluster")
    add("build/raftkv-bench --gtest_filter=Benchmark.Write:Benchmark.Echo --requests=20000"
        "   # a short run: two reports and a summary table")
    add("build/raftkv-bench --help    # every flag")
    add("```")
    add("")
    sample = sample_report(base_w)
    if sample:
        add("What one run prints (the first repetition of the 64 B, 2-follower Write point; "
            "`--json_out` has the same numbers):")
        add("")
        add("```")
        add(sample)
        add("```")
        add("")

    # Value length
    vlens = sorted({r["point"]["value_len"] for r in select(runs, "value_len")})
    if vlens:
        add("## Data length (2 followers)")
        add("")
        img("tp_vlen", "throughput vs value length")
        img("lat_vlen", "latency vs value length")
        add("| value | Write ops/s | Write MB/s | Write p50 ms | Write p99 ms | Echo ops/s "
            "| Echo p50 ms | Write / Echo |")
        add("|---:|---|---|---|---|---|---|---:|")
        for v in vlens:
            w = Agg(select(runs, "value_len", scenario="Write", value_len=v))
            e = Agg(select(runs, "value_len", scenario="Echo", value_len=v))
            ratio = "%.2f" % (w.ops.median / e.ops.median) if w.ok() and e.ok() else "n/a"
            add("| %d B | %s | %s | %s | %s | %s | %s | %s |" % (
                v, fmt(w.ops), fmt(w.mbs, 2), fmt(w.p50, lat_digits(w.p50)),
                fmt(w.p99, lat_digits(w.p99)), fmt(e.ops), fmt(e.p50, lat_digits(e.p50)), ratio))
        add("")
        add("MB/s counts key + value bytes of acknowledged requests; the Echo payload is as "
            "long as key + value.")
        add("")

    folls = sorted({r["point"]["followers"] for r in select(runs, "followers", scenario="Write")})
    if folls:
        add("## Number of followers (64 B values)")
        add("")
        img("tp_foll", "throughput vs followers")
        img("lat_foll", "latency vs followers")
        echo = Agg(select(runs, "followers", scenario="Echo"))
        add("| followers | members | majority | Write ops/s | Write p50 ms | Write p99 ms "
            "| Write p99.9 ms | of Echo ceiling |")
        add("|---:|---:|---:|---|---|---|---|---:|")
        for f in folls:
            w = Agg(select(runs, "followers", scenario="Write", followers=f))
            ratio = "%.2f" % (w.ops.median / echo.ops.median) if w.ok() and echo.ok() else "n/a"
            add("| %d | %d | %d | %s | %s | %s | %s | %s |" % (
                f, f + 1, (f + 1) // 2 + 1, fmt(w.ops), fmt(w.p50, lat_digits(w.p50)),
                fmt(w.p99, lat_digits(w.p99)), fmt(w.p999, lat_digits(w.p999)), ratio))
        add("")
        if echo.ok():
            add("Echo ceiling (64 B, same client): %s ops/s." % fmt(echo.ops))
            add("")

    infl = sorted({r["point"]["inflight"] for r in select(runs, "inflight", scenario="Write")})
    if infl:
        add("## Requests in flight (64 B values, 2 followers)")
        add("")
        add("The load knob: how many requests the client keeps outstanding. With 1 in flight "
            "(and 1 connection) the latency is the unloaded latency of one request: network "
            "round trip plus replication plus fsync, no queueing.")
        add("")
        img("inflight", "throughput and latency vs requests in flight")
        add("| in flight | requests | Write ops/s | p50 ms | p90 ms | p99 ms | max ms |")
        add("|---:|---:|---|---|---|---|---|")
        for n in infl:
            w = Agg(select(runs, "inflight", scenario="Write", inflight=n))
            add("| %d | %d | %s | %s | %s | %s | %s |" % (
                n, w.requests, fmt(w.ops), fmt(w.p50, lat_digits(w.p50)),
                fmt(w.p90, lat_digits(w.p90)), fmt(w.p99, lat_digits(w.p99)),
                fmt(w.max, lat_digits(w.max))))
        e1 = Agg(select(runs, "inflight", scenario="Echo", inflight=1))
        if e1.ok():
            add("| Echo, 1 | %d | %s | %s | %s | %s | %s |" % (
                e1.requests, fmt(e1.ops), fmt(e1.p50, 3), fmt(e1.p90, 3), fmt(e1.p99, 3),
                fmt(e1.max, 3)))
        add("")

    # CPU
    add("## Where the CPU goes (64 B, 2 followers, 256 in flight)")
    add("")
    add("CPU time (user + system) during the timed part of the run, per acknowledged "
        "request: the benchmark client process, the leader process, all followers together; "
        "and the average number of cores these processes kept busy (2 exist, shared with "
        "other users).")
    add("")
    add("| scenario | client µs/req | leader µs/req | followers µs/req | cores busy |")
    add("|---|---|---|---|---|")
    for name, a in (("Write", base_w), ("Read", base_r), ("Echo", base_e)):
        if a.ok() and a.cpu_leader.ok():
            add("| %s | %s | %s | %s | %s |" % (name, fmt(a.cpu_client), fmt(a.cpu_leader),
                                               fmt(a.cpu_followers), fmt(a.cores, 2)))
    add("")

    L.extend(kept_block(doc_path, "notes"))
    L.extend(kept_block(doc_path, "lan"))
    add("## Reading the results")
    add("")
    for para in reading(runs, base_w, base_e, base_r, vlens, folls, infl):
        add(para)
        add("")

    add("## Raw data")
    add("")
    add("Every run's JSON report (keys: `scenario`, `requests`, `acknowledged`, `failed`, "
        "`failed_by_status`, `seconds`, `ops_per_sec`, `mb_per_sec`, `latency_us` "
        "{avg, p50, p90, p99, p999, min, max}, `cpu_seconds`, the knobs, `verified`) is in "
        "the sweep's `results.json` (path printed by the script); `--from-json` re-renders "
        "this page and the plots from it. Failed runs: %d." % n_failed)
    for r in runs:
        if not r["passed"]:
            add("")
            add("- rep %d, %s: exit %d: `%s`" % (r["rep"], describe(r["point"]), r["exit_code"],
                                                 " | ".join(r.get("failure", []))[:300]))
    add("")
    os.makedirs(os.path.dirname(os.path.abspath(doc_path)), exist_ok=True)
    with open(doc_path, "w") as f:
        f.write("\n".join(L))


def sample_report(agg):
    """The text report of the first passed run of a point, from its saved output."""
    for run in agg.passed:
        json_out = run["command"].rsplit("--json_out=", 1)[-1].strip("'\"")
        text = read(json_out[:-len(".json")] + ".out") if json_out.endswith(".json") else ""
        lines = text.splitlines()
        rules = [i for i, l in enumerate(lines) if l.startswith("=====")]
        if len(rules) >= 2:
            return "\n".join(lines[rules[0]:rules[1] + 1])
    return ""


def pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


def reading(runs, base_w, base_e, base_r, vlens, folls, infl):
    """Short, data-driven observations."""
    out = []
    if base_w.ok() and base_e.ok():
        text = ("**Writes run at %.0f%% of the gRPC ceiling.** A 64 B Put, replicated to 2 "
                "followers and fsynced on a majority, completes at %.0f ops/s against %.0f "
                "ops/s for an Echo that does nothing on the same server and connections."
                % (100 * base_w.ops.median / base_e.ops.median, base_w.ops.median,
                   base_e.ops.median))
        if base_w.cpu_client.ok() and base_e.cpu_client.ok() and base_w.cpu_leader.ok():
            text += (" Both are limited by CPU: per request the client itself spends %.0f µs "
                     "of CPU (Echo: %.0f µs), the leader %.0f µs (Echo: %.0f µs) and the "
                     "followers %.0f µs together, and these processes kept %.2f of the 2 "
                     "cores busy during a Write run (%.2f during Echo; other users took the "
                     "rest). Group commit makes the fsync cost per write small (one "
                     "fdatasync per batch), so what Raft adds is mostly CPU: the leader's "
                     "AppendEntries traffic to each follower, the followers' work, and the "
                     "proposal bookkeeping."
                     % (base_w.cpu_client.median, base_e.cpu_client.median,
                        base_w.cpu_leader.median, base_e.cpu_leader.median,
                        base_w.cpu_followers.median, base_w.cores.median,
                        base_e.cores.median))
        out.append(text)
    if base_r.ok() and base_w.ok():
        out.append("**Linearizable reads** (ReadIndex: a heartbeat round confirms leadership, "
                   "shared by all reads that arrive together; no disk) run at %.0f ops/s, "
                   "%.1fx the write rate, p99 %.1f ms."
                   % (base_r.ops.median, base_r.ops.median / base_w.ops.median,
                      base_r.p99.median))
    if len(vlens) >= 2:
        w0 = Agg(select(runs, "value_len", scenario="Write", value_len=vlens[0]))
        w1 = Agg(select(runs, "value_len", scenario="Write", value_len=vlens[-1]))
        e0 = Agg(select(runs, "value_len", scenario="Echo", value_len=vlens[0]))
        e1 = Agg(select(runs, "value_len", scenario="Echo", value_len=vlens[-1]))
        if w0.ok() and w1.ok() and e0.ok() and e1.ok():
            change = pct(w1.ops.median, w0.ops.median)
            text = ("**Value length**: from %d B to %d B Write throughput goes from %.0f to "
                    "%.0f ops/s (%+.0f%%) while the bytes moved grow from %.2f to %.1f MB/s; "
                    "Echo changes %+.0f%% over the same range."
                    % (vlens[0], vlens[-1], w0.ops.median, w1.ops.median, change,
                       w0.mbs.median, w1.mbs.median, pct(e1.ops.median, e0.ops.median)))
            if abs(change) < 30:
                text += (" Per-request costs (RPCs, proposal and batch bookkeeping, one "
                         "fsync per batch) dominate; the bytes themselves are cheap up to "
                         "%d B." % vlens[-1])
            else:
                text += (" With large values the bytes show: each value is copied client to "
                         "leader, leader to every follower, and into every log, and the "
                         "batches fsynced grow.")
            out.append(text)
    if len(folls) >= 2:
        f0 = Agg(select(runs, "followers", scenario="Write", followers=folls[0]))
        f1 = Agg(select(runs, "followers", scenario="Write", followers=folls[-1]))
        if f0.ok() and f1.ok():
            per = (1 - (f1.ops.median / f0.ops.median) ** (1.0 / (folls[-1] - folls[0]))) * 100
            out.append("**Followers** cost throughput on this machine: %d follower%s "
                       "%.0f ops/s, %d give %.0f ops/s (%+.0f%%, about %.0f%% per added "
                       "follower), and p99 goes from %.1f to %.1f ms. The leader sends every "
                       "entry to every follower, and here every follower is another process "
                       "competing for the same 2 cores and disk; on separate machines only the "
                       "leader's per-follower send cost would remain, while the commit still "
                       "waits for just a majority."
                       % (folls[0], " gives" if folls[0] == 1 else "s give", f0.ops.median,
                          folls[-1],
                          f1.ops.median, pct(f1.ops.median, f0.ops.median), per,
                          f0.p99.median, f1.p99.median))
    if infl:
        aggs = {n: Agg(select(runs, "inflight", scenario="Write", inflight=n)) for n in infl}
        ok = {n: a for n, a in aggs.items() if a.ok()}
        if ok:
            best = max(ok, key=lambda n: ok[n].ops.median)
            lo = min(ok)
            text = ("**Concurrency**: with %d request%s in flight a write takes %.2f ms (p50; "
                    "p99 %.2f ms) at %.0f ops/s."
                    % (lo, "" if lo == 1 else "s", ok[lo].p50.median, ok[lo].p99.median,
                       ok[lo].ops.median))
            if best == max(ok):
                text += (" Throughput is still highest at the largest count tried (%.0f ops/s "
                         "at %d in flight): the more requests wait, the larger each batch, and "
                         "the per-batch costs (one AppendEntries per follower, one fsync per "
                         "member, the Ready cycle) are shared by more writes. The price is "
                         "latency, which grows about in proportion to the requests in flight "
                         "(Little's law: latency ≈ in flight / throughput)."
                         % (ok[best].ops.median, best))
            else:
                text += (" Throughput peaks at %.0f ops/s around %d in flight; beyond that "
                         "more requests in flight only add queueing: latency grows in "
                         "proportion (Little's law: latency ≈ in flight / throughput)."
                         % (ok[best].ops.median, best))
            e1 = Agg(select(runs, "inflight", scenario="Echo", inflight=1))
            if e1.ok() and lo == 1:
                text += (" An unloaded Echo round trip takes %.3f ms, so of the unloaded "
                         "write latency about %.2f ms are replication and fsync."
                         % (e1.p50.median, ok[lo].p50.median - e1.p50.median))
            out.append(text)
    out.append("**Compared with the reference** (aurora's benchmark): it measured write "
               "throughput over data length and follower count with the leader and followers "
               "on two machines over a home router, and reported latency without the time "
               "requests wait in queues. Here everything shares one 2-core machine, and the "
               "latency columns are the full time each request took, queueing included; the "
               "in-flight sweep's first row is the number comparable with an unloaded "
               "latency. As in aurora's analysis, the ceiling is gRPC itself: a Write is a gRPC "
               "round trip plus Raft's work, so the Echo rate bounds the Write rate.")
    return out


def ensure_matplotlib(tool="bench_sweep"):
    """Checks for matplotlib (before a long sweep; also used by plot_soak.py). apt
    installs python3-matplotlib for /usr/bin/python3; if another python3 comes first
    in PATH (pyenv, venv), reruns the calling script there."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    system = "/usr/bin/python3"
    if os.path.exists(system) and os.path.realpath(sys.executable) != os.path.realpath(system) \
            and os.environ.get("RAFTKV_PLOT_REEXEC") != "1":
        check = subprocess.run([system, "-c", "import matplotlib"], stderr=subprocess.DEVNULL)
        if check.returncode == 0:
            os.environ["RAFTKV_PLOT_REEXEC"] = "1"
            os.execv(system, [system, os.path.abspath(sys.argv[0])] + sys.argv[1:])
    sys.exit(tool + ": matplotlib is missing; on Debian: apt-get install -y python3-matplotlib")


def main():
    args = parse_args()
    ensure_matplotlib()
    for key in IMAGES:
        IMAGES[key] = args.image_prefix + IMAGES[key]
    if args.from_json:
        with open(args.from_json) as f:
            results = json.load(f)
        if args.plot_note:
            results["meta"]["plot_note"] = args.plot_note
        if args.series_label:
            results["meta"]["series_label"] = args.series_label
    else:
        results = run_sweep(args)
    compare = None
    if args.compare_json:
        with open(args.compare_json) as f:
            compare = (args.compare_label, json.load(f)["runs"])
    plots(results, args.images_dir, compare)
    write_doc(results, args, args.doc, args.images_dir)
    failed = sum(1 for r in results["runs"] if not r["passed"])
    print("bench_sweep: wrote %s and plots in %s; %d failed run(s)"
          % (args.doc, args.images_dir, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
