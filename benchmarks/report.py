"""Merge the benchmarks' results into ``benchmarks/results.json`` and print one markdown table.

Each ``benchmarks/bench_*.py`` writes its metrics to ``benchmarks/results/<name>.json``
(git-ignored; ``benchmarks/_timing.py`` makes them). This script, the last step of
``make bench``:

    python benchmarks/report.py             # merge -> benchmarks/results.json, print the table
    python benchmarks/report.py --readme    # ... and regenerate README.md's table between its markers
    python benchmarks/report.py --table-only [--readme]   # re-print / re-insert from results.json as is
    python benchmarks/report.py --compare run1.json run2.json run3.json   # runs side by side
    python benchmarks/report.py --quick     # merge the --quick fragments (never the committed file)

The README's performance table sits between ``<!-- perf-table:start -->`` and
``<!-- perf-table:end -->``; only the lines between the markers are replaced.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import pool_sessions  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS_DIR = HERE / "results"
REPORT = HERE / "results.json"
README = ROOT / "README.md"
START, END = "<!-- perf-table:start -->", "<!-- perf-table:end -->"
# The order of the table: by benchmark, in the order make bench runs them.
# Run on their own (not by make bench): their metrics in results.json survive a `make bench`.
KEEP = ("bench_widgets",)
ORDER = ["bench_tokenizers", "bench_attention", "bench_gpt", "bench_bert", "bench_llama", "bench_decoding", "bench_flash", "bench_quant"]


def _pool_fragments(frags: list[dict]) -> dict:
    """The fragments of one benchmark (one per session) as one: each metric pooled over sessions."""
    if len(frags) == 1:
        return frags[0]
    frags = sorted(frags, key=lambda f: f.get("session", 1))
    counts = {f.get("sessions", 1) for f in frags}
    if len(counts) != 1 or counts.pop() != len(frags):
        raise SystemExit(f"{frags[0]['bench']}: found sessions {[f.get('session') for f in frags]} of "
                         f"{sorted({f.get('sessions') for f in frags})}: a run was cut short or mixed with another; "
                         f"run `make bench` again")
    names = list(dict.fromkeys(n for f in frags for n in f["metrics"]))
    metrics = {}
    for n in names:
        entries = [f["metrics"][n] for f in frags if n in f["metrics"]]
        if len(entries) != len(frags):
            raise SystemExit(f"{frags[0]['bench']}: metric {n} is missing from some sessions")
        metrics[n] = pool_sessions(entries)
    machine = dict(frags[0]["machine"])
    machine["load_average_1min"] = max(f["machine"]["load_average_1min"] for f in frags)
    machine["session_dates"] = [f["machine"]["date"] for f in frags]
    return {**frags[0], "machine": machine, "metrics": metrics, "session": None}


def merge(directory: Path, previous: Path | None = None) -> dict:
    """Read every fragment in ``directory`` into one report (metrics in benchmark order).

    Fragments of one benchmark from several sessions (``<bench>.s<k>.json``) are pooled
    (``_timing.pool_sessions``). Metrics of ``KEEP`` benchmarks (run on their own, not by
    ``make bench``: the widget latencies) are carried over from ``previous``.
    """
    groups: dict[str, list[dict]] = {}
    for path in sorted(directory.glob("bench_*.json")):
        data = json.loads(path.read_text())
        groups.setdefault(data["bench"], []).append(data)
    if not groups:
        raise SystemExit(f"no benchmark results in {directory}: run `make bench` (or a benchmarks/bench_*.py) first")
    fragments = {b: _pool_fragments(fs) for b, fs in groups.items()}
    names = sorted(fragments, key=lambda b: (ORDER.index(b) if b in ORDER else len(ORDER), b))
    metrics = {}
    for b in names:
        metrics.update(fragments[b]["metrics"])
    benchmarks = {b: fragments[b]["machine"] for b in names}
    if previous is not None and previous.exists():
        old = json.loads(previous.read_text())
        for b in KEEP:
            if b in fragments or b not in old.get("benchmarks", {}):
                continue
            benchmarks[b] = old["benchmarks"][b]
            metrics.update({n: m for n, m in old["metrics"].items() if m.get("benchmark") == b})
    first = fragments[names[0]]["machine"]
    return {
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {**{k: first[k] for k in ("cpu", "cores", "threads", "clock", "torch", "python")},
                    "allocator": first.get("allocator", "glibc default"),
                    "sessions": max(f.get("sessions", 1) for fs in groups.values() for f in fs)},
        "benchmarks": benchmarks,
        "metrics": metrics,
    }


def fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return ""
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def _yes(b: bool | None) -> str:
    return "" if b is None else ("yes" if b else "**no**")


def table(report: dict) -> str:
    """The markdown table: one row per metric."""
    rows = ["| Metric | Value | Spread | n | Goal | Holds at median | Holds at pessimistic end |",
            "|---|---:|---|---:|---|---|---|"]
    for name, m in report["metrics"].items():
        d = m.get("digits", 3)
        lo, hi = m["spread"]
        iqr = f"{fmt(lo, d)} - {fmt(hi, d)}" if m["repeats"] > 1 else "(one run)"  # the spread
        unit = "" if m["unit"] in ("x", "ratio") else f" {m['unit']}"
        rows.append(f"| `{name}` | {fmt(m['value'], d)}{unit} | {iqr} | {m['repeats']} | {m['goal'] or ''} | "
                    f"{_yes(m['goal_holds_at_median'])} | {_yes(m['goal_holds_pessimistic'])} |")
    mach = report["machine"]
    n_sess = mach.get("sessions", 1)
    loads = sorted({b["load_average_1min"] for b in report["benchmarks"].values()})
    rows.append("")
    rows.append(f"Measured {report['generated'][:10]} by `make bench` on {mach['cores']} cores ({mach['cpu']}), "
                f"{mach['threads']} torch thread(s), clock: {mach['clock']}, allocator: {mach.get('allocator', 'glibc default')}, "
                f"torch {mach['torch']}; "
                f"1-minute load average {loads[0]:g} to {loads[-1]:g} while it ran. Value: the median of "
                f"the paired ratios (or of the times) over n alternating rounds"
                + (f", pooled from {n_sess} sessions (separate processes, one pass of every benchmark after "
                   f"another); Spread: the smallest to the largest of them (so it covers the drift between "
                   f"runs, not only the noise within one)"
                   if n_sess > 1 else "; Spread: their interquartile range")
                + ". Source: `benchmarks/results.json`.")
    return "\n".join(rows)


def update_readme(text: str, readme: Path = README) -> bool:
    """Replace the lines between the markers; return whether the README changed."""
    old = readme.read_text()
    if START not in old or END not in old:
        raise SystemExit(f"{readme} has no {START} ... {END} markers")
    head, rest = old.split(START, 1)
    _, tail = rest.split(END, 1)
    new = f"{head}{START}\n{text}\n{END}{tail}"
    if new != old:
        readme.write_text(new)
    return new != old


def compare(paths: list[Path]) -> str:
    """Several results.json side by side: value [spread] per run, and whether the spreads share a point."""
    runs = [json.loads(p.read_text()) for p in paths]
    names = list(dict.fromkeys(n for r in runs for n in r["metrics"]))
    head = "| Metric | " + " | ".join(f"run {i + 1} ({r['generated'][11:16]} UTC)" for i, r in enumerate(runs))
    rows = [head + " | Goal | Spreads overlap |", "|---|" + "---|" * len(runs) + "---|---|"]
    for n in names:
        cells, spans = [], []
        goal = ""
        for r in runs:
            m = r["metrics"].get(n)
            if m is None:
                cells.append("")
                continue
            d = m.get("digits", 3)
            lo, hi = m["spread"]
            cells.append(f"{fmt(m['value'], d)} [{fmt(lo, d)}-{fmt(hi, d)}]")
            spans.append((min(lo, m["value"]), max(hi, m["value"])))
            goal = m["goal"] or ""
        overlap = max(s[0] for s in spans) <= min(s[1] for s in spans) if spans else None
        rows.append(f"| `{n}` | " + " | ".join(cells) + f" | {goal} | {_yes(overlap)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--readme", action="store_true", help="also regenerate README.md's performance table")
    ap.add_argument("--table-only", action="store_true", help="use benchmarks/results.json as it is")
    ap.add_argument("--quick", action="store_true", help="merge the quick fragments into results/results_quick.json")
    ap.add_argument("--compare", nargs="+", type=Path, help="results files to show side by side")
    ap.add_argument("--from-dir", type=Path, default=RESULTS_DIR, help="where the fragments are")
    ap.add_argument("--out", type=Path, default=REPORT, help="the merged report (default benchmarks/results.json)")
    args = ap.parse_args(argv)
    if args.compare:
        print(compare(args.compare))
        return 0
    if args.table_only:
        report = json.loads(REPORT.read_text())
    elif args.quick:
        report = merge(RESULTS_DIR / "quick")
        out = RESULTS_DIR / "results_quick.json"
        out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {out.relative_to(ROOT)} (quick mode: not the committed results)")
    else:
        report = merge(args.from_dir, previous=args.out)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {args.out}")
    text = table(report)
    print()
    print(text)
    if args.readme:
        if args.quick:
            print("quick results never go into the README", file=sys.stderr)
            return 1
        changed = update_readme(text)
        print(f"\nREADME.md performance table {'updated' if changed else 'unchanged'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
