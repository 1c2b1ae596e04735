"""Repeat-mode tables of benches/sustained.sh (RUNNER_SUSTAINED_REPEAT > 1).

One run cannot tell two managers apart when the same code gives ratios of
0.45x and 1.88x in two runs. So each figure is given as the median over a
manager's runs with its spread (min-max), and a ratio of medians only where
the two spreads do not overlap: where they do, the runs do not say which is
better, and the cell says "~". Figures, not assertions.

Input: the rows of sustained.py's `manager_rows`, one per run and rate, each
with "of" (the manager) besides its figures; nothing here reads a file.
"""
import math
import statistics

FIGURES = (  # key, label, format
    ("achieved", "sent/s", "{:.1f}"), ("writes", "writes/chg", "{:.2f}"), ("reads", "reads/chg", "{:.2f}"),
    ("passes", "passes/chg", "{:.2f}"), ("passes_nr", "passes/chg w/o resync", "{:.2f}"),
    ("child_p50", "child p50 ms", "{:.0f}"),
    ("child_p99", "child p99 ms", "{:.0f}"), ("child_max", "child max ms", "{:.0f}"),
    ("status_p50", "status p50 ms", "{:.0f}"), ("status_p99", "status p99 ms", "{:.0f}"),
    ("obs_p50", "observed p50 ms", "{:.0f}"), ("obs_p99", "observed p99 ms", "{:.0f}"),
    ("failed", "failed writes", "{:.0f}"), ("cpu", "CPU cores", "{:.3f}"), ("rss", "RSS MiB", "{:.1f}"),
    ("rss_peak", "RSS peak MiB", "{:.1f}"), ("drain", "drain s", "{:.1f}"),
)
# The figures the ratio table compares (lower is better for each).
RATIO_FIGURES = ("writes", "reads", "passes", "passes_nr", "child_p50", "child_p99", "status_p50", "status_p99",
                 "obs_p50", "obs_p99", "cpu", "rss", "rss_peak")
CELL = 24


class Spread:
    """The median, least and greatest of one figure over `n` runs."""

    def __init__(self, values, middle=statistics.median):
        xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
        self.n = len(xs)
        self.median = middle(xs) if xs else None
        self.lo, self.hi = (min(xs), max(xs)) if xs else (None, None)

    def cell(self, spec, runs):
        if self.median is None:
            return "-"
        text = f"{spec.format(self.median)} ({spec.format(self.lo)}-{spec.format(self.hi)})"
        return text + (f" n={self.n}" if self.n < runs else "")

    def apart(self, other):
        """True when the two spreads do not overlap."""
        return self.hi < other.lo or other.hi < self.lo

    def ratio(self, base):
        """Median / the base's median where the spreads are apart, "~" where
        they overlap, "-" without figures."""
        if self.median is None or base.median is None or not base.median:
            return "-"
        return f"{self.median / base.median:.2f}x" if self.apart(base) else "~"


def spreads(rows, managers):
    """{(manager, rate): {figure: Spread}} and the runs of each manager."""
    runs = {m: len({r["manager"] for r in rows if r["of"] == m}) for m in managers}
    out = {}
    for m in managers:
        for rate in sorted({r["rate"] for r in rows if r["of"] == m}):
            mine = [r for r in rows if r["of"] == m and r["rate"] == rate]
            out[(m, rate)] = {k: Spread([r.get(k) for r in mine]) for k, _, _ in FIGURES}
    return out, runs


def pairs(managers):
    """(ours, base): each of our rows against each twin, and each variant of
    ours against "rust" (the two designs side by side)."""
    ours = [m for m in managers if m == "rust" or m.startswith("rust-")]
    twins = [m for m in managers if m.startswith("twin")]
    out = [(o, t) for o in ours for t in twins]
    if "rust" in managers:
        out += [(v, "rust") for v in ours if v != "rust"]
    return out


def report(rows, managers, flight, throughput):
    """The median tables, the sustained throughput over the runs, and the
    ratios. `throughput`: {manager: [changes/s per run, None where no rate
    held]}."""
    by, runs = spreads(rows, managers)
    rates = sorted({rate for _, rate in by})
    print("\nmedian (min-max) over each manager's runs; n= where fewer runs gave the figure;"
          " per change: / changes sent")
    print("  in flight: " + ", ".join(f"{m} {flight[m]}" for m in managers))
    for rate in rates:
        here = [m for m in managers if (m, rate) in by]
        print(f"\n  {rate} changes/s   " + " ".join(f"{m + f' ({runs[m]} runs)':>{CELL}}" for m in here))
        for key, label, spec in FIGURES:
            print(f"  {label:<16}" + " ".join(f"{by[(m, rate)][key].cell(spec, runs[m]):>{CELL}}" for m in here))
    print("\n  sustained throughput (highest rate with p99 change -> child written < 1000 ms; 0: none):")
    for m in managers:
        per_run = throughput.get(m, [])
        # A run where no rate held counts as 0 changes/s; of an even count of
        # runs the lower middle one, so the median is a rate that was run.
        s = Spread([t or 0 for t in per_run], statistics.median_low)
        median = f"median {s.cell('{:.0f}', len(per_run))} changes/s" if any(per_run) else "none of the rates"
        runs_txt = ", ".join(str(t) if t else "none" for t in per_run)
        print(f"    {m:<{max(10, *map(len, managers))}} {median} (runs: {runs_txt})")
    ratio_table(by, managers, rates, runs)


def chance_apart(a, b):
    """How often (1 in this many) the spreads of a runs and of b runs miss
    each other when both managers are alike: the a + b figures fall in any
    order with equal odds, and two orders of C(a + b, a) put them apart."""
    return math.comb(a + b, a) / 2


def ratio_table(by, managers, rates, runs):
    """Ours / base, the medians, where the spreads do not overlap."""
    cols = pairs(managers)
    if not cols:
        return
    heads = [f"{o}/{b}" for o, b in cols]
    wide = max(9, *map(len, heads))
    least = min(runs[m] for m in managers)
    print("\nratios of medians, ours / each twin and each variant / rust; only where the spreads do not"
          " overlap (~ where they do; lower is better for each figure);")
    print(f"  two alike managers of {least} runs each have spreads apart by chance 1 time in"
          f" {chance_apart(least, least):.0f} for each figure")
    for rate in rates:
        print(f"\n  {rate} changes/s   " + " ".join(f"{h:>{wide}}" for h in heads))
        for key, label, _ in FIGURES:
            if key not in RATIO_FIGURES:
                continue
            cells = []
            for o, b in cols:
                mine, base = by.get((o, rate)), by.get((b, rate))
                cells.append(mine[key].ratio(base[key]) if mine and base else "-")
            print(f"  {label:<16}" + " ".join(f"{c:>{wide}}" for c in cells))
