#!/usr/bin/env python3
"""Tables of benches/sustained.sh: one row per rate and manager, then the
ratios of ours to each twin.

    sustained.py OUT_DIR MANAGER...   # OUT_DIR/<manager>/run-<K>/{agent,concurrency,audit.log,rate-R.kv}

With one run of each manager, the tables are that run's; with more, every
run's row, then per rate and manager each figure's median and spread over
the runs (sustained_repeat.py). rate-R.kv holds the load generator's key=value figures (examples/
sustained_load.rs: the counting window, `passes` over it, latencies to
observed, CPU, RSS); audit.log is the apiserver's (tests/cluster/up.sh,
RUNNER_CLUSTER_AUDIT=runners); agent is the prefix of the manager's
User-Agent; concurrency its reconciles in flight. Figures, not assertions:
the exit code is 0.
"""
import bisect
import collections
import statistics
import json
import os
import sys
from datetime import datetime

import sustained_repeat

CHILDREN = ("deployments", "services", "ingresses")
WRITES = ("create", "update", "patch", "delete", "deletecollection")
READS = ("get", "list")
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


def what(o, verb):
    sub = o.get("subresource")
    return f"{o.get('resource')}{'/' + sub if sub else ''} {verb}"


def audit(path, agent):
    """Runner PATCHes by load generator user agent, the manager's successful
    child writes and status writes by Runner name, all its writes as (stage
    time, failed, what) and its reads (gets, lists) as (stage time, what)."""
    patches = collections.defaultdict(list)
    children = collections.defaultdict(list)
    statuses = collections.defaultdict(list)
    writes, reads = [], []
    for raw in open(path):
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        o, ua, verb = e.get("objectRef", {}), e.get("userAgent", ""), e.get("verb")
        if verb not in WRITES + READS or "stageTimestamp" not in e or not o.get("resource"):
            continue
        code = e.get("responseStatus", {}).get("code", 200)
        recv, stage = ts(e["requestReceivedTimestamp"]), ts(e["stageTimestamp"])
        if ua.startswith("runner-load/") and verb == "patch" and o.get("resource") == "runners":
            if code < 300 and not o.get("subresource"):
                patches[ua.split("/", 1)[1]].append((o.get("name"), recv, stage))
        elif ua.startswith(agent) and verb in READS:
            reads.append((stage, what(o, verb)))
        elif ua.startswith(agent):
            writes.append((stage, code if code >= 400 else 0, what(o, verb)))
            if code < 300 and o.get("resource") in CHILDREN and not o.get("subresource") and o.get("name"):
                children[o["name"]].append((recv, stage))
            if code < 300 and o.get("resource") == "runners" and o.get("subresource") == "status":
                statuses[o.get("name")].append((recv, stage))
    for v in list(children.values()) + list(statuses.values()):
        v.sort()
    return patches, children, statuses, sorted(writes), sorted(reads)


def child_latencies(patches, children):
    """Per change: the PATCH's completion to the completion of the manager's
    first write (of a child, or of the status) for that Runner received
    after the PATCH was (ms, 0 at least: the watch may deliver the change,
    and the manager write, before the apiserver logs the PATCH complete);
    and how many changes no such write followed."""
    ms, missing = [], 0
    for name, recv, t in patches:
        w = children.get(name, [])
        i = bisect.bisect_left(w, (recv, 0.0))
        if i < len(w):
            ms.append(max(0.0, 1000 * (w[i][1] - t)))
        else:
            missing += 1
    return ms, missing


def rollout_times(patches, statuses, a, b):
    """Per change: the PATCH to the manager's last status write for that
    Runner before its next change and within the window (s): about when
    the manager saw the rollout done. The progress a status shows is
    written spaced (10 s at least), so a rollout that outlives the spacing
    costs a status write more, whatever the manager's code: this says how
    long the control plane took."""
    by_name = collections.defaultdict(list)
    for name, recv, t in patches:
        by_name[name].append(t)
    out = []
    for name, times in by_name.items():
        w = [x[1] for x in statuses.get(name, []) if a <= x[1] <= b]
        times.sort()
        for i, t in enumerate(times):
            end = times[i + 1] if i + 1 < len(times) else b
            after = [x for x in w if t <= x <= end]
            if after:
                out.append(after[-1] - t)
    return sorted(out)


def in_window(events, a, b):
    """The events (sorted, time first) with a <= time <= b."""
    times = [e[0] for e in events]
    return events[bisect.bisect_left(times, a):bisect.bisect_right(times, b)]


def fmt(v, spec="{:.0f}"):
    return "-" if v is None else spec.format(v)


def per(n, changes):
    return n / changes if changes and n is not None else None


def manager_rows(d, m):
    """One row per rate of the run in directory `d`, labelled `m`, and the
    manager's writes and reads in the windows by resource and verb."""
    agent = open(os.path.join(d, "agent")).read().strip()
    patches, children, statuses, writes, reads = audit(os.path.join(d, "audit.log"), agent)
    rates = sorted(int(f[5:-3]) for f in os.listdir(d) if f.startswith("rate-") and f.endswith(".kv"))
    rows, mix = [], collections.Counter()
    for r in rates:
        kv = read_kv(os.path.join(d, f"rate-{r}.kv"))
        ms, missing = child_latencies(patches.get(f"rate-{r}", []), children)
        # The manager's half of change -> observed; the rest is the watch.
        st, _ = child_latencies(patches.get(f"rate-{r}", []), statuses)
        a, b = kv.get("window_start", 0), kv.get("window_end", 0)
        win_w, win_r = in_window(writes, a, b), in_window(reads, a, b)
        done = rollout_times(patches.get(f"rate-{r}", []), statuses, a, b)
        mix.update(("write", w[2], w[1]) for w in win_w)
        mix.update(("read", x[1], 0) for x in win_r)
        changes = kv.get("changes") or 0
        rows.append({
            "manager": m, "rate": r, "achieved": kv.get("achieved_rate"), "changes": changes,
            "writes": per(len(win_w), changes), "reads": per(len(win_r), changes),
            "passes": per(kv.get("passes"), changes),
            "passes_nr": per(kv["passes"] - kv.get("passes_resync", 0), changes) if "passes" in kv else None,
            "by": {k: per(v, changes) for k, v in kv.items()
                   if k.startswith(("passes_by_", "idle_passes_by_", "status_writes_by_"))},
            "child_p50": pct(ms, 50), "child_p99": pct(ms, 99), "child_max": max(ms) if ms else None,
            "child_missing": missing, "status_p50": pct(st, 50), "status_p99": pct(st, 99),
            "obs_p50": kv.get("observed_p50_ms"), "obs_p99": kv.get("observed_p99_ms"),
            "obs_missing": kv.get("observed_missing"),
            "failed": sum(1 for w in win_w if w[1]),
            "cpu": kv.get("cpu_cores"), "rss": kv.get("rss_mib"), "rss_peak": kv.get("rss_peak_mib"),
            "rollout_p50": pct(done, 50), "rollout_p90": pct(done, 90),
            "outlived": sum(1 for x in done if x > 10) / len(done) if done else None,
            "drain": kv.get("drain_s"), "quiet": kv.get("quiet", 1), "unrolled": kv.get("rollouts_pending"),
        })
    return rows, mix


def sustained(rows):
    ok = [r["rate"] for r in rows
          if r["child_p99"] is not None and r["child_p99"] < LIMIT_MS and not r["child_missing"]
          and not r["obs_missing"]]
    return max(ok) if ok else None


COLUMNS = (  # header, width, key, format
    ("rate/s", 6, "rate", "{}"), ("manager", 10, "manager", "{}"), ("sent/s", 7, "achieved", "{:.1f}"),
    ("writes/chg", 10, "writes", "{:.2f}"), ("reads/chg", 9, "reads", "{:.2f}"),
    ("passes/chg", 10, "passes", "{:.2f}"), ("child p50", 9, "child_p50", "{:.0f}"),
    ("p99", 6, "child_p99", "{:.0f}"), ("max", 6, "child_max", "{:.0f}"),
    ("status p50", 10, "status_p50", "{:.0f}"), ("p99", 6, "status_p99", "{:.0f}"),
    ("observed p50", 12, "obs_p50", "{:.0f}"), ("p99", 6, "obs_p99", "{:.0f}"),
    ("failed", 6, "failed", "{}"), ("CPU cores", 9, "cpu", "{:.3f}"), ("RSS MiB", 7, "rss", "{:.1f}"),
    ("peak", 6, "rss_peak", "{:.1f}"), ("drain s", 7, "drain", "{:.1f}"),
)


def table(rows, flight, labels=None):
    """Rows of `labels` (default: the managers of `flight`), by rate."""
    labels = labels or list(flight)
    print("\n  in flight: " + ", ".join(f"{m} {c}" for m, c in flight.items())
          + "; per change: / changes sent; counted from the first change to the end of the drain")
    wide = max(len(x) for x in labels)
    cols = [(h, max(w, wide) if k == "manager" else w, k, f) for h, w, k, f in COLUMNS]
    print("  " + " ".join(f"{h:>{w}}" for h, w, _, _ in cols))
    for r in sorted(rows, key=lambda r: (r["rate"], labels.index(r["manager"]))):
        print("  " + " ".join(f"{fmt(r[k], f):>{w}}" for _, w, k, f in cols))
        notes = []
        if r["child_missing"]:
            notes.append(f"{r['child_missing']} changes with no child write after them")
        if r["obs_missing"]:
            notes.append(f"{r['obs_missing']:.0f} changes never observed")
        if not r["quiet"]:
            notes.append(f"not quiet at the drain's end ({r['unrolled'] or 0:.0f} Deployments not rolled out)")
        if notes:
            print(f"  {'':17} ({'; '.join(notes)})")
    print("  latencies in ms; CPU over the load phase; sustained throughput (highest rate with"
          f" p99 change -> child written < {LIMIT_MS} ms):")
    by = collections.defaultdict(list)
    for r in rows:
        by[r["manager"]].append(r)
    for m in labels:
        s = sustained(by[m])
        print(f"    {m:<{max(10, wide)}} " + (f"{s} changes/s" if s else "none of the rates"))


def ratios(rows, flight):
    twins = [m for m in flight if m.startswith("twin")]
    if "rust" not in flight or not twins:
        return
    at = {(r["manager"], r["rate"]): r for r in rows}
    same = [t for t in twins if flight[t] == flight["rust"]]
    print(f"\nratios, ours (rust, {flight['rust']} in flight) / each twin (its in-flight count):")
    head = "".join(f" {t + ' (' + str(flight[t]) + ')':>14} {'ratio':>7}" for t in twins)
    print(f"  {'':<36} {'ours':>10}{head}   target (N=1,000)")

    def line(label, ours, bases, spec, target=""):
        cells = "".join(f" {fmt(b, spec):>14} {(f'{ours / b:.2f}x' if ours is not None and b else '-'):>7}"
                        for b in bases)
        print(f"  {label:<36} {fmt(ours, spec):>10}{cells}   {target}")

    line("sustained throughput (changes/s)", sustained([r for r in rows if r["manager"] == "rust"]),
         [sustained([r for r in rows if r["manager"] == t]) for t in twins], "{}", ">= 300 at <= 0.5 core")
    same_txt = f" and <= 0.5x {same[0]}" if same else ""
    for rate in sorted({r["rate"] for r in rows if r["manager"] == "rust"}):
        o = at[("rust", rate)]
        b = [at.get((t, rate), {}) for t in twins]
        targets = {
            "child_p99": f"<= 1000 ms{same_txt}" if rate == 25 else "<= 50 ms" if rate == 100 else "",
            "obs_p99": "no worse than twin (<= 1.00x)" if rate == 10 else "",
            "writes": "<= 2.5" if rate == 25 else "", "passes": "<= 1.5" if rate == 25 else "",
        }
        for key, label, spec in (
                ("child_p99", "change -> child p99 (ms)", "{:.0f}"),
                ("status_p99", "change -> status written p99 (ms)", "{:.0f}"),
                ("obs_p99", "change -> observed p99 (ms)", "{:.0f}"),
                ("writes", "writes per change", "{:.2f}"), ("reads", "reads per change", "{:.2f}"),
                ("passes", "passes per change", "{:.2f}"), ("failed", "failed writes", "{}"),
                ("cpu", "CPU (cores)", "{:.3f}"), ("rss_peak", "RSS peak (MiB)", "{:.1f}")):
            line(f"{rate}/s: {label}", o[key], [x.get(key) for x in b], spec, targets.get(key, ""))


def runs_of(out, m):
    """The run directories of manager `m`, in round order."""
    d = os.path.join(out, m)
    runs = [f for f in os.listdir(d) if f.startswith("run-") and f[4:].isdigit()] if os.path.isdir(d) else []
    return [os.path.join(d, f) for f in sorted(runs, key=lambda f: int(f[4:]))
            if os.path.exists(os.path.join(d, f, "audit.log"))]


def main():
    out, managers = sys.argv[1], sys.argv[2:]
    runs = {m: runs_of(out, m) for m in managers}
    managers = [m for m in managers if runs[m]]
    flight = {}
    for m in managers:
        path = os.path.join(runs[m][0], "concurrency")
        flight[m] = int(open(path).read()) if os.path.exists(path) else "?"
    if any(len(runs[m]) > 1 for m in managers):
        repeated(runs, managers, flight)
        return
    rows, mixes = [], {}
    for m in managers:
        rs, mixes[m] = manager_rows(runs[m][0], m)
        rows += rs
    table(rows, flight)
    mix_lines(mixes)
    breakdown(rows)
    rollout_lines(rows)
    ratios(rows, flight)


def repeated(runs, managers, flight):
    """Every run's rows (labelled MANAGER#ROUND), each manager's writes and
    reads summed over its runs, then the medians and ratios."""
    rows, labels, mixes, throughput = [], [], {}, {}
    for m in managers:
        mixes[m] = collections.Counter()
        for d in runs[m]:
            label = f"{m}#{os.path.basename(d)[4:]}"
            rs, mix = manager_rows(d, label)
            for r in rs:
                r["of"] = m
            rows += rs
            labels.append(label)
            mixes[m].update(mix)
            throughput.setdefault(m, []).append(sustained(rs))
    print("\nevery run (MANAGER#ROUND):", end="")
    table(rows, flight, labels)
    mix_lines(mixes, "all rates, all runs")
    breakdown(rows)
    rollout_lines(rows)
    sustained_repeat.report(rows, managers, flight, throughput)


def rollout_lines(rows):
    """How long the rollouts took (rollout_times), medians over runs."""
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        for k in ("rollout_p50", "rollout_p90", "outlived"):
            if r.get(k) is not None:
                by[(r.get("of", r["manager"]), r["rate"])][k].append(r[k])
    if not by:
        return
    print("  rollouts, change -> the manager's last status write for it (about when it saw the rollout done;"
          " median over runs):")
    for (m, rate), f in sorted(by.items()):
        med = {k: statistics.median(v) for k, v in f.items()}
        print(f"    {m} at {rate}/s: p50 {med.get('rollout_p50', 0):.1f} s, p90 {med.get('rollout_p90', 0):.1f} s,"
              f" outlived 10 s: {100 * med.get('outlived', 0):.0f}%")


def short(key):
    """A breakdown key as printed: idle:, pass: or status: and its labels."""
    for prefix, name in (("idle_passes_by_", "idle:"), ("passes_by_", "pass:"), ("status_writes_by_", "status:")):
        if key.startswith(prefix):
            return name + key[len(prefix):]
    return key


def breakdown(rows):
    """What the passes and status writes were for, per change: each
    manager's counters (ours: runner_passes_total by trigger and kind,
    runner_idle_passes_total, the passes of those that wrote nothing,
    runner_status_writes_total by reason), medians over its runs."""
    by = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows:
        for k, v in r.get("by", {}).items():
            by[(r.get("of", r["manager"]), r["rate"])][k].append(v)
        if r.get("passes_nr") is not None:
            by[(r.get("of", r["manager"]), r["rate"])]["passes without resyncs"].append(r["passes_nr"])
    if not by:
        return
    print("  per change, what the passes and status writes were for (median over runs):")
    for (m, rate), figures in sorted(by.items()):
        parts = [f"{short(k)} "
                 f"{statistics.median(v):.2f}" for k, v in sorted(figures.items())]
        print(f"    {m} at {rate}/s: " + ", ".join(parts))


def mix_lines(mixes, what="all rates"):
    """Each manager's writes and reads in the windows by resource and verb."""
    print(f"  the managers' writes and reads in the windows, {what} (audit log):")
    wide = max([10] + [len(m) for m in mixes])
    for m, mix in mixes.items():
        ops = collections.Counter()
        for (kind, op, _), n in mix.items():
            ops[(kind, op)] += n
        parts = []
        for (kind, op), n in ops.most_common():
            failed = ", ".join(f"{k} answered {c}" for (_, o, c), k in sorted(mix.items()) if o == op and c)
            parts.append(f"{kind} {op} {n}" + (f" ({failed})" if failed else ""))
        print(f"    {m:<{wide}} " + ("; ".join(parts) or "nothing"))


if __name__ == "__main__":
    main()
