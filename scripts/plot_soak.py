#!/usr/bin/env python3
"""Plots the samples of scripts/soak.sh: RSS and data directory size over time.

Reads soak.csv (t_s,node,rss_kib,data_bytes,writes) and writes a PNG with three
panels sharing the time axis: RSS per member (MiB), data directory per member
(MiB), writes acknowledged so far (millions).

Needs python3-matplotlib (Debian: apt-get install -y python3-matplotlib).

  scripts/plot_soak.py /tmp/soak-run/soak.csv doc/images/soak-rss-disk.png
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sweep import ensure_matplotlib  # noqa: E402


def load(path):
    """{node: {"t": [...], "rss": [...], "data": [...]}} and the (t, writes) series."""
    nodes = {}
    writes = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            t = float(row["t_s"])
            n = nodes.setdefault(int(row["node"]), {"t": [], "rss": [], "data": []})
            n["t"].append(t)
            n["rss"].append(int(row["rss_kib"]) / 1024 if row["rss_kib"] else float("nan"))
            n["data"].append(int(row["data_bytes"]) / 1048576 if row["data_bytes"] else float("nan"))
            writes[t] = int(row["writes"])
    return nodes, sorted(writes.items())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__[__doc__.index("\n") + 1:])
    p.add_argument("csv", help="soak.csv written by scripts/soak.sh")
    p.add_argument("png", help="the PNG to write")
    p.add_argument("--title", default="", help="figure title (default: derived from the data)")
    args = p.parse_args()
    ensure_matplotlib("plot_soak")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes, writes = load(args.csv)
    if not nodes:
        sys.exit("plot_soak: no samples in %s" % args.csv)
    ts = [t for t, _ in writes]
    ws = [w for _, w in writes]
    title = args.title or ("3-member cluster under sustained writes: %.1fM acknowledged "
                           "in %.0f s (scripts/soak.sh)" % (ws[-1] / 1e6, ts[-1]))

    fig, (ax_rss, ax_data, ax_w) = plt.subplots(3, 1, figsize=(8, 8.5), sharex=True,
                                               gridspec_kw={"height_ratios": [3, 3, 2]})
    for n in sorted(nodes):
        d = nodes[n]
        ax_rss.plot(d["t"], d["rss"], marker=".", markersize=3, label="node %d" % n)
        ax_data.plot(d["t"], d["data"], marker=".", markersize=3, label="node %d" % n)
    ax_w.step(ts, [w / 1e6 for w in ws], where="post", color="gray")

    ax_rss.set_ylabel("RSS (MiB)")
    ax_data.set_ylabel("data directory (MiB)")
    ax_w.set_ylabel("writes acked (M)")
    ax_w.set_xlabel("time since the first write round began (s)")
    for ax in (ax_rss, ax_data, ax_w):
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    ax_rss.legend(fontsize=9, loc="lower right")
    ax_data.legend(fontsize=9, loc="lower right")
    ax_rss.set_title(title, fontsize=11)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
    fig.savefig(args.png, dpi=110)
    plt.close(fig)
    print("plot_soak: wrote %s" % args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
