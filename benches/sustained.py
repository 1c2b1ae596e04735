#!/usr/bin/env python3
"""Tables of benches/sustained.sh: one per manager, then the ratios.

    sustained.py OUT_DIR MANAGER...   # OUT_DIR/<manager>/{agent,audit.log,rate-R.kv}

rate-R.kv holds the load generator's key=value figures (examples/
sustained_load.rs) plus `reconciles=` (the manager's /metrics delta);
audit.log is the apiserver's (tests/cluster/up.sh, RUNNER_CLUSTER_AUDIT=runners);
agent is the prefix of the manager's User-Agent. Figures, not assertions:
the exit code is 0.
"""
import bisect
import collections
import json
import os
import sys
from datetime import datetime

from ratios import line

CHILDREN = ("deployments", "services", "ingresses")
WRITES = ("create", "update", "patch", "delete", "deletecollection")
LIMIT_MS = 1000  # the p99 that counts as sustained


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def pct(xs, p):
    """Nearest-rank percentile, as the load generator computes it."""
    if not xs:
        return None
    xs = sorted(xs)
    return xs[max(1, min(len(xs), -(-len(xs) * p // 100))) - 1]


def read_kv(path):
    out = {}
    for raw in open(path):
        k, _, v = raw.strip().partition("=")
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


def audit(path, agent):
    """Runner PATCHes by load generator user agent, the manager's successful
    child writes by Runner name, and all the manager's writes as
    (stage time, failed)."""
    patches = collections.defaultdict(list)
    children = collections.defaultdict(list)
    writes = []
    for raw in open(path):
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        o, ua, verb = e.get("objectRef", {}), e.get("userAgent", ""), e.get("verb")
        if verb not in WRITES or "stageTimestamp" not in e:
            continue
        code = e.get("responseStatus", {}).get("code", 200)
        recv, stage = ts(e["requestReceivedTimestamp"]), ts(e["stageTimestamp"])
        if ua.startswith("runner-load/") and o.get("resource") == "runners" and not o.get("subresource"):
            if code < 300:
                patches[ua.split("/", 1)[1]].append((o.get("name"), stage))
        elif ua.startswith(agent):
            writes.append((stage, code >= 400))
            if code < 300 and o.get("resource") in CHILDREN and not o.get("subresource") and o.get("name"):
                children[o["name"]].append((recv, stage))
    for v in children.values():
        v.sort()
    return patches, children, sorted(writes)


def child_latencies(patches, children):
    """Per change: the PATCH's completion to the completion of the manager's
    first child write for that Runner received after it (ms); and how many
    changes no child write followed."""
    ms, missing = [], 0
    for name, t in patches:
        w = children.get(name, [])
        i = bisect.bisect_left(w, (t, 0.0))
        if i < len(w):
            ms.append(1000 * (w[i][1] - t))
        else:
            missing += 1
    return ms, missing


def in_window(writes, a, b):
    i, j = bisect.bisect_left(writes, (a, False)), bisect.bisect_right(writes, (b, True))
    return writes[i:j]


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def manager_rows(out, m):
    d = os.path.join(out, m)
    agent = open(os.path.join(d, "agent")).read().strip()
    patches, children, writes = audit(os.path.join(d, "audit.log"), agent)
    rates = sorted(int(f[5:-3]) for f in os.listdir(d) if f.startswith("rate-") and f.endswith(".kv"))
    rows = []
    for r in rates:
        kv = read_kv(os.path.join(d, f"rate-{r}.kv"))
        ms, missing = child_latencies(patches.get(f"rate-{r}", []), children)
        win = in_window(writes, kv.get("window_start", 0), kv.get("window_end", 0))
        changes = kv.get("changes") or 0
        rows.append({
            "rate": r,
            "achieved": kv.get("achieved_rate"),
            "changes": changes,
            "child_p50": pct(ms, 50), "child_p99": pct(ms, 99), "child_max": max(ms) if ms else None,
            "child_missing": missing,
            "obs_p50": kv.get("observed_p50_ms"), "obs_p99": kv.get("observed_p99_ms"),
            "obs_missing": kv.get("observed_missing"),
            "cpu": kv.get("cpu_cores"), "rss": kv.get("rss_mib"), "rss_peak": kv.get("rss_peak_mib"),
            "failed": sum(1 for _, f in win if f),
            "writes_per_change": len(win) / changes if changes else None,
            "reconciles_per_change": kv.get("reconciles", 0) / changes if changes else None,
        })
    return rows


def sustained(rows):
    ok = [r["rate"] for r in rows
          if r["child_p99"] is not None and r["child_p99"] < LIMIT_MS and not r["child_missing"]
          and not r["obs_missing"]]
    return max(ok) if ok else None


def table(m, rows):
    print(f"\n{m}:")
    head = ("rate/s", "sent/s", "child p50", "p99", "max", "observed p50", "p99", "CPU cores",
            "RSS MiB", "peak", "failed", "writes/chg", "recon/chg")
    print("  " + " ".join(f"{h:>{w}}" for h, w in zip(head, (7, 7, 10, 6, 6, 13, 6, 10, 8, 6, 7, 11, 10))))
    for r in rows:
        cells = (r["rate"], fmt(r["achieved"], "{:.1f}"), fmt(r["child_p50"]), fmt(r["child_p99"]),
                 fmt(r["child_max"]), fmt(r["obs_p50"]), fmt(r["obs_p99"]), fmt(r["cpu"], "{:.3f}"),
                 fmt(r["rss"], "{:.1f}"), fmt(r["rss_peak"], "{:.1f}"), r["failed"],
                 fmt(r["writes_per_change"], "{:.2f}"), fmt(r["reconciles_per_change"], "{:.2f}"))
        print("  " + " ".join(f"{str(c):>{w}}" for c, w in zip(cells, (7, 7, 10, 6, 6, 13, 6, 10, 8, 6, 7, 11, 10))))
        notes = []
        if r["child_missing"]:
            notes.append(f"{r['child_missing']} changes with no child write after them")
        if r["obs_missing"]:
            notes.append(f"{r['obs_missing']:.0f} changes never observed")
        if notes:
            print(f"  {'':7} ({'; '.join(notes)})")
    s = sustained(rows)
    print(f"  latencies in ms; sustained throughput (p99 change -> child written < {LIMIT_MS} ms): "
          + (f"{s} changes/s" if s else "none of the rates"))


def main():
    out, managers = sys.argv[1], sys.argv[2:]
    rows = {m: manager_rows(out, m) for m in managers if os.path.isdir(os.path.join(out, m))}
    for m, rs in rows.items():
        table(m, rs)
    if "rust" not in rows or "twin" not in rows:
        return
    ours, base = {r["rate"]: r for r in rows["rust"]}, {r["rate"]: r for r in rows["twin"]}
    print("\nratios, this manager / baseline:")
    print(f"  {'':<42} {'ours':>12} {'baseline':>12} {'ratio':>8}   target")
    s_ours, s_base = sustained(rows["rust"]), sustained(rows["twin"])
    line("sustained throughput (changes/s)", s_ours, s_base, ">= 300 at <= 0.5 core")
    for r in sorted(set(ours) & set(base)):
        o, b = ours[r], base[r]
        target = "<= 50 ms" if r == 100 else None
        line(f"{r}/s: change -> child p99 (ms)", o["child_p99"], b["child_p99"], target)
        line(f"{r}/s: change -> observed p99 (ms)", o["obs_p99"], b["obs_p99"])
        line(f"{r}/s: CPU (cores)", o["cpu"], b["cpu"])
        line(f"{r}/s: RSS peak (MiB)", o["rss_peak"], b["rss_peak"])
        line(f"{r}/s: writes per change", o["writes_per_change"], b["writes_per_change"])
        line(f"{r}/s: reconciles per change", o["reconciles_per_change"], b["reconciles_per_change"])


if __name__ == "__main__":
    main()
