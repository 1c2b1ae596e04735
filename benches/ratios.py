#!/usr/bin/env python3
"""Ratios of this manager ("rust") to the controller-runtime baseline ("twin").

    ratios.py SIDE_BY_SIDE_JSON [AUDIT_LOG]  # from the baseline's side-by-side.sh
    ratios.py --steady STEADY_TXT     # from the baseline's steady-rss.sh

Prints one line per figure: ours, the baseline's, the ratio and the target
it is held to. Figures, not assertions: the exit code is 0.
"""
import json
import re
import sys


def get(d, *path):
    for p in path:
        if not isinstance(d, dict) or d.get(p) is None:
            return None
        d = d[p]
    return d


def line(label, ours, base, target=None, unit=""):
    ratio = f"{ours / base:.2f}x" if isinstance(ours, (int, float)) and base else "-"
    fmt = lambda v: "-" if v is None else (f"{v:.2f}{unit}" if isinstance(v, float) else f"{v}{unit}")
    print(f"  {label:<42} {fmt(ours):>12} {fmt(base):>12} {ratio:>8}   {target or ''}")


def audit_writes(path, namespace, agent):
    """(writes, failed writes) the apiserver's audit log holds for one user
    agent in one namespace: the manager's own, without the control plane's."""
    if not path:
        return None, None
    writes = failed = 0
    for raw in open(path):
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        if e.get("objectRef", {}).get("namespace") != namespace or not e.get("userAgent", "").startswith(agent):
            continue
        if e.get("verb") in ("get", "list", "watch"):
            continue
        writes += 1
        failed += e.get("responseStatus", {}).get("code", 200) >= 300
    return writes, failed


def side_by_side(path, audit=None):
    d = json.load(open(path))
    rust, twin = get(d, "managers", "rust") or {}, get(d, "managers", "twin") or {}
    n = get(d, "config", "n")
    print(f"ratios, this manager / baseline (N={n}):")
    print(f"  {'':<42} {'ours':>12} {'baseline':>12} {'ratio':>8}   target")
    line("CPU, create phase (s)", get(rust, "create", "cpu_s"), get(twin, "create", "cpu_s"), "<= 0.5x")
    line("CPU, whole run (s)", get(rust, "final", "cpu_s_total"), get(twin, "final", "cpu_s_total"), "<= 0.5x")
    line("peak RSS, whole run (MiB)", get(rust, "final", "peak_rss_mib_sampled"),
         get(twin, "final", "peak_rss_mib_sampled"), "<= 0.5x")
    line("idle RSS at start, 0 Runners (MiB)", get(rust, "startup", "rss_mib"), get(twin, "startup", "rss_mib"),
         "< 12 MiB")
    line("all Ready (s)", get(rust, "create", "all_ready_poll_s"), get(twin, "create", "all_ready_poll_s"))
    line("per-Runner to Ready p50 (s)", get(rust, "create", "per_runner_watch_s", "p50"),
         get(twin, "create", "per_runner_watch_s", "p50"))
    line("delete: Runners+children gone (s)", get(rust, "delete", "all_gone_s"), get(twin, "delete", "all_gone_s"),
         "no slower")
    line("delete: ...and Pods gone (s)", get(rust, "delete", "pods_gone_s"), get(twin, "delete", "pods_gone_s"))
    ours, base = audit_writes(audit, "bench-rust", "kubectl-runner"), audit_writes(audit, "bench-twin", "runner-twin")
    line("manager writes, whole run (audit log)", ours[0], base[0])
    line("manager failed writes (audit log)", ours[1], base[1], "0")
    line("manager writes, create phase", get(rust, "create", "manager_self_reported_writes", "writes"),
         get(twin, "create", "manager_self_reported_writes", "writes"))
    line("manager writes, delete phase", get(rust, "delete", "manager_self_reported_writes", "writes"),
         get(twin, "delete", "manager_self_reported_writes", "writes"))
    line("manager writes while idle", get(rust, "idle", "manager_self_reported_writes", "writes"),
         get(twin, "idle", "manager_self_reported_writes", "writes"))


def steady(path):
    text = open(path).read()
    ours = re.search(r"rust restarted on (\d+): RSS ([\d.]+) MiB", text)
    base = re.search(r"twin started on (\d+): RSS ([\d.]+) MiB", text)
    n = ours.group(1) if ours else "?"
    print(f"ratios, steady state holding {n} Runners:")
    line("RSS (MiB)", float(ours.group(2)) if ours else None, float(base.group(2)) if base else None,
         "<= 0.5x and < 32 MiB")


if __name__ == "__main__":
    if sys.argv[1] == "--steady":
        steady(sys.argv[2])
    else:
        side_by_side(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
