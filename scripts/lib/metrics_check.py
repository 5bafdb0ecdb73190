#!/usr/bin/env python3
"""The checks of scripts/metrics_check.sh on scrapes of a raftkv cluster.

  metrics_check.py members --puts N --keys K --leases L --watchers W SCRAPE...
      Every member exports the expected families with sane values: one
      leader, every member knows it, the leader counted >= N Puts, every
      member holds K keys and L leases, W watchers in all, the process
      metrics are plausible.
  metrics_check.py watch-ended SCRAPE...
      A Watch stream was counted as ended, and no member has watchers left.
  metrics_check.py names DASHBOARD RULES SCRAPE...
      DASHBOARD is a Grafana dashboard (panels, each with targets and an
      expr) and every metric name in its queries and in the expressions of
      the Prometheus rules file RULES is exported by the scrapes (or is a
      standard one such as `up`).

Exits 1 with one line per problem, 0 when every check holds.
"""

import json
import re
import sys
import time

# Families every member must export.
REQUIRED = [
    "raftkv_build_info", "raftkv_member_id", "raftkv_role", "raftkv_term", "raftkv_leader_id",
    "raftkv_has_leader", "raftkv_is_leader", "raftkv_commit_index", "raftkv_applied_index",
    "raftkv_revision", "raftkv_keys", "raftkv_leases", "raftkv_session_saved_bytes",
    "raftkv_watchers", "raftkv_log_bytes",
    "raftkv_snapshot_bytes", "raftkv_snapshot_failures_total", "raftkv_proposals_total",
    "raftkv_storage_errors_total", "raftkv_storage_stalled",
    "raftkv_backend_bytes", "raftkv_quota_backend_bytes", "raftkv_alarm_active",
    "raftkv_store_bytes", "raftkv_store_memtable_memory_bytes",
    "raftkv_leader_changes_total", "raftkv_grpc_requests_total",
    "raftkv_grpc_streams_started_total", "raftkv_grpc_request_duration_seconds",
    "raftkv_log_fsync_duration_seconds", "process_cpu_seconds_total",
    "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds",
    "process_max_fds", "process_start_time_seconds",
]
# Series Prometheus itself makes for every target.
STANDARD = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

SAMPLE = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)(\{.*\})? (\S+)$')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Scrape:
    def __init__(self, path):
        self.path = path
        self.types = {}    # family -> type
        self.samples = []  # (name, {label: value}, value)
        with open(path) as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("# TYPE "):
                    _, _, name, kind = line.split(" ", 3)
                    self.types[name] = kind
                elif line and not line.startswith("#"):
                    m = SAMPLE.match(line)
                    if not m:
                        raise ValueError(f"{path}: cannot parse '{line}'")
                    labels = dict(LABEL.findall(m.group(2) or ""))
                    self.samples.append((m.group(1), labels, float(m.group(3))))

    def values(self, name, **labels):
        return [v for n, l, v in self.samples
                if n == name and all(l.get(k) == w for k, w in labels.items())]

    def one(self, name, **labels):
        v = self.values(name, **labels)
        return v[0] if len(v) == 1 else None

    def names(self):
        return {n for n, _, _ in self.samples} | set(self.types)


class Problems(list):
    def check(self, ok, what):
        if not ok:
            self.append(what)
        return ok


def check_members(args):
    opts = {}
    while args and args[0].startswith("--"):
        opts[args[0][2:]] = int(args[1])
        args = args[2:]
    scrapes = [Scrape(p) for p in args]
    p = Problems()
    now = time.time()
    for s in scrapes:
        where = s.path
        for family in REQUIRED:
            p.check(family in s.types, f"{where}: no {family}")
        p.check(s.one("raftkv_has_leader") == 1, f"{where}: raftkv_has_leader is not 1")
        build = [l for n, l, v in s.samples if n == "raftkv_build_info" and v == 1]
        p.check(len(build) == 1 and build[0].get("api") == "raftkv.v1" and build[0].get("version")
                and build[0].get("git_commit"),
                f"{where}: raftkv_build_info is not one sample 1 with version, git_commit, api=\"raftkv.v1\"")
        p.check(s.one("raftkv_keys") == opts["keys"],
                f"{where}: raftkv_keys is {s.one('raftkv_keys')}, expected {opts['keys']}")
        p.check(s.one("raftkv_leases") == opts["leases"],
                f"{where}: raftkv_leases is {s.one('raftkv_leases')}, expected {opts['leases']}")
        p.check((s.one("raftkv_log_bytes") or 0) > 0, f"{where}: raftkv_log_bytes is not > 0")
        p.check((s.one("raftkv_store_bytes") or 0) > 0, f"{where}: raftkv_store_bytes is not > 0")
        p.check((s.one("raftkv_revision") or 0) > 0, f"{where}: raftkv_revision is not > 0")
        fds = s.one("process_open_fds") or 0
        p.check(fds > 0, f"{where}: process_open_fds is not > 0")
        p.check((s.one("process_max_fds") or 0) >= fds, f"{where}: process_max_fds < process_open_fds")
        p.check((s.one("process_resident_memory_bytes") or 0) > 1 << 20,
                f"{where}: process_resident_memory_bytes is not > 1 MiB")
        p.check((s.one("process_virtual_memory_bytes") or 0) >= (s.one("process_resident_memory_bytes") or 0),
                f"{where}: process_virtual_memory_bytes < process_resident_memory_bytes")
        p.check((s.one("process_cpu_seconds_total") or 0) > 0, f"{where}: process_cpu_seconds_total is not > 0")
        start = s.one("process_start_time_seconds") or 0
        p.check(now - 3600 < start <= now + 1,
                f"{where}: process_start_time_seconds {start} is not within the last hour")
    revisions = {s.one("raftkv_revision") for s in scrapes}
    p.check(len(revisions) == 1, f"the members' raftkv_revision differ: {sorted(map(str, revisions))}")
    leaders = [s for s in scrapes if s.one("raftkv_is_leader") == 1]
    if p.check(len(leaders) == 1, f"{len(leaders)} members report raftkv_is_leader 1, expected one"):
        leader = leaders[0]
        ids = {s.one("raftkv_leader_id") for s in scrapes}
        p.check(ids == {leader.one("raftkv_member_id")},
                f"the members' raftkv_leader_id {sorted(map(str, ids))} is not the leader's id")
        puts = leader.one("raftkv_grpc_requests_total", service="KV", method="Put", code="OK") or 0
        if (leader.one("raftkv_leader_changes_total") or 0) > 1:
            # Leadership moved during the test: the Puts are split among
            # leaders; every one reached some member.
            print(f"note: leadership changed during the test; counting the Puts of every member")
            puts = sum(s.one("raftkv_grpc_requests_total", service="KV", method="Put", code="OK") or 0
                       for s in scrapes)
        p.check(puts >= opts["puts"],
                f"{leader.path} (leader): raftkv_grpc_requests_total{{method=\"Put\",code=\"OK\"}} "
                f"is {puts}, expected >= {opts['puts']}")
        latency = leader.one("raftkv_grpc_request_duration_seconds_count", service="KV", method="Put") or 0
        p.check(latency >= puts,
                f"{leader.path} (leader): {latency} Put latencies observed for {puts} Puts")
    total = lambda name, **labels: sum(sum(s.values(name, **labels)) for s in scrapes)
    p.check(total("raftkv_watchers") == opts["watchers"],
            f"the members serve {total('raftkv_watchers')} watchers, expected {opts['watchers']}")
    p.check(total("raftkv_grpc_streams_started_total", method="Watch") >= opts["watchers"],
            "no Watch stream counted as started")
    for method in ("Txn", "LeaseGrant", "Range", "OpenSession"):
        p.check(total("raftkv_grpc_requests_total", method=method, code="OK") >= 1,
                f"no member counted an OK {method}")
    return p


def check_watch_ended(args):
    scrapes = [Scrape(path) for path in args]
    p = Problems()
    ended = sum(sum(s.values("raftkv_grpc_requests_total", method="Watch")) for s in scrapes)
    p.check(ended >= 1, "no Watch stream counted as ended in raftkv_grpc_requests_total")
    watchers = sum(s.one("raftkv_watchers") or 0 for s in scrapes)
    p.check(watchers == 0, f"{watchers} watchers left after the watch ended")
    return p


KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan", "atan2"}


def metric_names(expr):
    """The metric names a PromQL expression selects (functions, keywords,
    label names, strings, ranges and Grafana variables left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", e):
        before = e[m.start() - 1] if m.start() > 0 else " "
        if before.isalnum() or before == ".":  # the exponent of a number (1e9)
            continue
        if e[m.end():].lstrip().startswith("("):  # a function or aggregation
            continue
        if m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def rule_exprs(path):
    """The expr of every rule in a rules file (single-line or block scalar)."""
    exprs, lines = [], open(path).read().split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:- )?expr:\s*(.*)$", lines[i])
        i += 1
        if not m:
            continue
        if m.group(2) not in ("|", ">", "|-", ">-"):
            exprs.append(m.group(2))
            continue
        indent, block = len(m.group(1)), []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            block.append(lines[i].strip())
            i += 1
        exprs.append(" ".join(block))
    return exprs


def check_names(args):
    dashboard_path, rules_path, scrape_paths = args[0], args[1], args[2:]
    exposed = set(STANDARD)
    for path in scrape_paths:
        exposed |= Scrape(path).names()
    p = Problems()
    try:
        with open(dashboard_path) as f:
            dash = json.load(f)
    except ValueError as e:
        p.append(f"{dashboard_path}: not JSON: {e}")
        return p
    if not p.check(isinstance(dash.get("panels"), list) and dash["panels"] and dash.get("title")
                   and "schemaVersion" in dash,
                   f"{dashboard_path}: not a Grafana dashboard (title, schemaVersion, panels)"):
        return p
    queries = 0
    for panel in dash["panels"]:
        if panel.get("type") == "row":
            continue
        title = panel.get("title", "?")
        targets = panel.get("targets") or []
        p.check(targets and panel.get("gridPos"), f"dashboard panel '{title}': no targets or gridPos")
        for t in targets:
            expr = t.get("expr", "")
            if not p.check(expr, f"dashboard panel '{title}': a target without expr"):
                continue
            queries += 1
            for name in sorted(metric_names(expr) - exposed):
                p.append(f"dashboard panel '{title}': {name} is not exported ({expr})")
    exprs = rule_exprs(rules_path)
    p.check(exprs, f"{rules_path}: no rule expressions found")
    for expr in exprs:
        for name in sorted(metric_names(expr) - exposed):
            p.append(f"{rules_path}: {name} is not exported ({expr})")
    if not p:
        print(f"{queries} dashboard queries and {len(exprs)} rule expressions use exported metrics only")
    return p


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = sys.argv[1], sys.argv[2:]
    checks = {"members": check_members, "watch-ended": check_watch_ended, "names": check_names}
    if cmd not in checks:
        print(__doc__, file=sys.stderr)
        return 2
    problems = checks[cmd](args)
    for line in problems:
        print(f"FAIL: {line}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
