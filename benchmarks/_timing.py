"""One timing discipline for every benchmark in this folder.

A benchmark compares the book's code (side A) with a reference (side B) in the same
process. On a shared 2-core machine a single timing of each side says little, so every
benchmark here does the same four things:

1. **Warm-up**: each side runs ``warmup`` times first, untimed (allocator, caches, lazy
   initialisation, a first call that compiles a regex or loads a kernel).
2. **Alternation**: then ``repeats`` rounds; round ``i`` runs the sides forward when ``i``
   is even and backward when it is odd, so two sides run A B B A A B ... Load from other
   programs that drifts over time then hits both sides alike, and neither side always
   runs right after the other.
3. **Median and spread**: each side's time is the median of its ``repeats`` samples; its
   spread is the interquartile range (the 25th and 75th percentiles, inclusive method:
   with 5 samples, the 2nd and 4th smallest).
4. **Ratios from paired samples**: round ``i`` gives one pair, ``A_i / B_i``, two runs
   side by side under the same load. A ratio A/B is the median of these paired ratios,
   its spread their interquartile range (``median(A) / median(B)`` is kept beside it as
   a check). A goal (``<= 1.5``, ``>= 6``) is checked at the median and at the
   pessimistic end of that spread (the upper quartile for ``<=``, the lower for ``>=``).

5. **A steady allocator**: PyTorch's CPU tensors come from glibc's ``malloc``, which
   serves every block over 32 MB with a fresh ``mmap`` and hands it back on ``free``; each
   such tensor is then zero-filled page by page by the kernel on first touch, a cost
   (system time, counted by the clock below) that has nothing to do with the code under
   test and that varies with the machine's memory pressure. ``set_threads`` therefore
   also calls ``steady_allocator()``: glibc keeps freed memory and serves big blocks from
   its heap, so the timed repeats re-use warm pages, as PyTorch's caching allocator does on
   a GPU and as tcmalloc or jemalloc (PyTorch's CPU tuning advice) do. Both sides of every
   ratio run in the one process under the same setting; ``BENCH_ALLOCATOR=default``
   turns it off, and ``bench_attention`` reports its main ratio both ways.

6. **Sessions**: repeats taken within one process, a minute apart, agree more closely than
   two runs of the same script a few minutes apart do: the process's memory layout, which
   core it lands on and the machine's slow drift all change between runs, and an IQR of
   one process's samples does not cover that. ``make bench`` therefore runs every script
   in ``BENCH_SESSIONS`` fresh processes (default 3), one pass of all the scripts after
   another, so each metric's sessions lie minutes apart. With ``S`` sessions each
   ``measure`` call runs ``session_repeats(n)`` = max(3, ceil(1.5 n / S)) rounds instead of
   ``n``; ``benchmarks/report.py`` pools the sessions of a metric (``pool_sessions``): the
   value is the median of all pooled pairs, the spread their full range (min-max). An
   interquartile range, even one widened to every session's median, proved narrower than
   the drift between runs ten minutes apart (3 of 24 ratios apart over three runs); the
   full range of samples from three processes is what a re-run can move the number by.
   A script run on its own (one session) reports the interquartile range of its rounds.

The thread count is fixed (``set_threads``, default one thread: ``BENCH_THREADS`` changes it)
and printed with the machine. With one thread the clock is the CPU time of the process
(``time.process_time``): on a machine shared with other programs a single thread's CPU
time is what the code costs, while its wall time also counts the turns other programs got
(and with two OpenMP threads on two busy cores, every parallel region waits for the
thread that was descheduled: 5-10x slower steps, all noise). With more threads the clock
is wall time (``time.perf_counter``), which is right on an idle machine. Each script
collects its metrics in a ``Results`` and writes them to ``benchmarks/results/<name>.json``;
``benchmarks/report.py`` merges those into ``benchmarks/results.json`` and prints the
markdown table.

>>> t = iter([0.0, 1.0, 1.0, 3.0])  # a fake clock: A takes 1 s, B 2 s
>>> s = measure({"A": lambda: None, "B": lambda: None}, repeats=1, warmup=0, clock=lambda: next(t))
>>> s["A"].median, s["B"].median, ratio(s["A"], s["B"]).value
(1.0, 2.0, 0.5)
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
# git-ignored: per-script fragments of the last run (BENCH_RESULTS_DIR puts them elsewhere)
RESULTS_DIR = Path(os.environ.get("BENCH_RESULTS_DIR", HERE / "results"))
REPORT = HERE / "results.json"  # committed: the merged report


def quartiles(xs: list[float]) -> tuple[float, float]:
    """25th and 75th percentiles, inclusive method (a sample of one is its own quartiles).

    >>> quartiles([5.0, 1.0, 4.0, 2.0, 3.0])
    (2.0, 4.0)
    """
    if not xs:
        raise ValueError("xs is empty: need at least one sample")
    if len(xs) == 1:
        return xs[0], xs[0]
    q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q3


@dataclass
class Timing:
    """The timed samples (seconds) of one side, in the order they ran."""

    name: str
    samples: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> tuple[float, float]:
        return quartiles(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def __str__(self) -> str:
        lo, hi = self.spread
        return f"{self.name}: median {_fmt_s(self.median)} (IQR {_fmt_s(lo)}-{_fmt_s(hi)}, n={len(self.samples)})"


@dataclass
class Ratio:
    """``value``: median of the per-round ratios ``pairs``; ``spread``: their IQR."""

    value: float
    spread: tuple[float, float]
    pairs: list[float]
    ratio_of_medians: float | None = None

    @property
    def repeats(self) -> int:
        return len(self.pairs)


def _fmt_s(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def schedule(names: list[str], repeats: int) -> list[str]:
    """The order of the timed calls: forward in even rounds, backward in odd ones.

    >>> "".join(schedule(["A", "B"], 4))
    'ABBAABBA'
    >>> "".join(schedule(["A", "B", "C"], 2))
    'ABCCBA'
    """
    order: list[str] = []
    for i in range(repeats):
        order += names if i % 2 == 0 else names[::-1]
    return order


def default_clock() -> Callable[[], float]:
    """CPU time of the process with one torch thread, wall time with more (see the module docstring)."""
    import torch

    return time.process_time if torch.get_num_threads() == 1 else time.perf_counter


def clock_name(clock: Callable[[], float] | None = None) -> str:
    clock = clock or default_clock()
    return {time.process_time: "cpu time (process_time)", time.perf_counter: "wall time (perf_counter)"}.get(
        clock, getattr(clock, "__name__", "custom"))


def sessions() -> tuple[int, int]:
    """``(k, S)``: this process is session ``k`` of ``S`` (``BENCH_SESSION``, ``BENCH_SESSIONS``; default 1 of 1)."""
    def _int(name: str) -> int:
        raw = os.environ.get(name, "1") or "1"
        try:
            v = int(raw)
        except ValueError:
            raise ValueError(f"{name} must be a positive integer, got {raw!r}") from None
        if v < 1:
            raise ValueError(f"{name} must be a positive integer, got {raw!r}")
        return v

    k, n = _int("BENCH_SESSION"), _int("BENCH_SESSIONS")
    if k > n:
        raise ValueError(f"BENCH_SESSION ({k}) must be at most BENCH_SESSIONS ({n})")
    return k, n


def session_repeats(repeats: int, n_sessions: int | None = None) -> int:
    """Rounds one session runs when a measurement of ``repeats`` rounds is split over sessions.

    1.5x the rounds in all, at least 3 per session (a median and quartiles need a few).

    >>> session_repeats(7, 1), session_repeats(7, 3), session_repeats(9, 3), session_repeats(5, 3)
    (7, 4, 5, 3)
    """
    n_sessions = sessions()[1] if n_sessions is None else n_sessions
    if n_sessions <= 1:
        return repeats
    return max(3, math.ceil(1.5 * repeats / n_sessions))


def pool_sessions(metrics: list[dict]) -> dict:
    """One metric measured in several sessions (each a ``Results`` entry) as one entry.

    Value: the median of every session's paired samples pooled. Spread: the smallest and
    the largest pooled sample (min-max), so that it covers the drift between processes as
    well as the noise within one; each session's median is kept beside it. Entries without
    samples (a single number per session) pool to the median of the numbers and their min-max.

    >>> m = lambda xs: {"value": statistics.median(xs), "samples": xs, "goal": "<= 1.5", "ratio_of_medians": 1.0}
    >>> p = pool_sessions([m([1.0, 1.1, 1.2]), m([1.3, 1.4, 1.5]), m([1.1, 1.2, 1.3])])
    >>> p["value"], p["spread"], p["session_medians"], p["repeats"], p["goal_holds_pessimistic"]
    (1.2, [1.0, 1.5], [1.1, 1.4, 1.2], 9, True)
    """
    if not metrics:
        raise ValueError("metrics is empty: need the entry of at least one session")
    out = dict(metrics[0])
    if all(m.get("samples") for m in metrics):
        pooled = [x for m in metrics for x in m["samples"]]
        per_session = [statistics.median(m["samples"]) for m in metrics]
        value = statistics.median(pooled)
        q1, q3 = min(pooled), max(pooled)
        kind = f"min-max of the {len(pooled)} samples pooled from {len(metrics)} sessions (separate processes)"
        n = len(pooled)
    else:
        per_session = [float(m["value"]) for m in metrics]
        pooled = None
        value = statistics.median(per_session)
        q1, q3 = min(per_session), max(per_session)
        kind = f"min-max over {len(metrics)} sessions (separate processes)"
        n = len(metrics)
    lo, hi = min([q1, *per_session]), max([q3, *per_session])
    rom = [m["ratio_of_medians"] for m in metrics if m.get("ratio_of_medians") is not None]
    at_median, pessimistic = goal_holds(out.get("goal"), value, (lo, hi))
    loads = [m["load_average_1min"] for m in metrics if m.get("load_average_1min") is not None]
    out.update(value=value, spread=[lo, hi], spread_kind=kind, repeats=n, samples=pooled,
               session_medians=per_session, sessions=len(metrics),
               ratio_of_medians=statistics.median(rom) if rom else None,
               goal_holds_at_median=at_median, goal_holds_pessimistic=pessimistic,
               load_average_1min=max(loads) if loads else out.get("load_average_1min"))
    return out


def measure(fns: dict[str, Callable[[], object]], repeats: int = 5, warmup: int = 1,
            clock: Callable[[], float] | None = None,
            sync: Callable[[], object] | None = None) -> dict[str, Timing]:
    """Time each callable ``repeats`` times, alternating sides, after ``warmup`` untimed runs each.

    ``clock`` is any monotonic clock (``time.perf_counter`` for wall time,
    ``time.process_time`` for the CPU time of single-threaded code; by default
    ``default_clock()``); ``sync`` runs before reading the clock (``torch.cuda.synchronize``
    on a GPU).
    """
    clock = clock or default_clock()
    if not fns:
        raise ValueError("fns is empty: give at least one callable to time")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a non-negative int, got {warmup!r}")
    k, n_sessions = sessions()
    if n_sessions > 1:
        full, repeats = repeats, session_repeats(repeats, n_sessions)
        print(f"  (session {k} of {n_sessions}: {repeats} rounds here; {full} in a single-process run)", flush=True)
    names = list(fns)
    for _ in range(warmup):
        for name in names:
            fns[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for name in schedule(names, repeats):
        if sync is not None:
            sync()
        t0 = clock()
        fns[name]()
        if sync is not None:
            sync()
        samples[name].append(clock() - t0)
    return {name: Timing(name, ts) for name, ts in samples.items()}


def ratio(a: Timing, b: Timing) -> Ratio:
    """A / B, round by round: the median and IQR of the paired ratios ``A_i / B_i``.

    >>> r = ratio(Timing("a", [2.0, 4.0, 3.0]), Timing("b", [1.0, 1.0, 2.0]))
    >>> r.pairs, r.value, r.spread, r.ratio_of_medians
    ([2.0, 4.0, 1.5], 2.0, (1.75, 3.0), 3.0)
    """
    if len(a.samples) != len(b.samples):
        raise ValueError(f"a and b must come from the same run: {len(a.samples)} vs {len(b.samples)} samples")
    pairs = [x / y for x, y in zip(a.samples, b.samples)]
    return Ratio(statistics.median(pairs), quartiles(pairs), pairs, a.median / b.median)


def throughput(amount: float, t: Timing) -> Ratio:
    """``amount`` per second at the median time; the spread from the time quartiles."""
    lo, hi = t.spread
    return Ratio(amount / t.median, (amount / hi, amount / lo), [amount / s for s in t.samples], None)


def goal_holds(goal: str | None, value: float, spread: tuple[float, float]) -> tuple[bool | None, bool | None]:
    """Whether a goal such as ``"<= 1.5"`` or ``">= 6"`` holds at the median and at the pessimistic end.

    >>> goal_holds("<= 1.5", 1.2, (1.1, 1.6))
    (True, False)
    >>> goal_holds(">= 6", 7.0, (6.5, 7.5))
    (True, True)
    """
    if goal is None:
        return None, None
    op, _, target = goal.partition(" ")
    t = float(target)
    if op == "<=":
        return value <= t, max(spread[1], value) <= t
    if op == ">=":
        return value >= t, min(spread[0], value) >= t
    raise ValueError(f"goal must look like '<= 1.5' or '>= 6', got {goal!r}")


def quick_mode(argv: list[str] | None = None) -> bool:
    """``--quick`` on the command line or ``BENCH_QUICK=1``: small sizes, a smoke test only."""
    argv = sys.argv[1:] if argv is None else argv
    return "--quick" in argv or os.environ.get("BENCH_QUICK", "") not in ("", "0")


_ALLOCATOR = "glibc default"


def steady_allocator() -> str:
    """Ask glibc to keep freed memory and to serve big blocks from its heap (see point 5).

    ``mallopt(M_MMAP_MAX, 0)``: no block gets its own ``mmap`` (so none is returned to the
    kernel on ``free``); ``mallopt(M_TRIM_THRESHOLD, 2**31 - 1)``: the heap's free top is
    not trimmed. Returns a description of the allocator now in use. Off with
    ``BENCH_ALLOCATOR=default``; on anything but Linux/glibc it changes nothing.
    """
    global _ALLOCATOR
    if os.environ.get("BENCH_ALLOCATOR", "steady") == "default":
        _ALLOCATOR = "glibc default"
        return _ALLOCATOR
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4
        ok = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1) == 1
    except (OSError, AttributeError):
        ok = False
    _ALLOCATOR = "glibc, steady (no mmap, no trim)" if ok else "platform default (mallopt unavailable)"
    return _ALLOCATOR


def set_threads(n: int | None = None) -> int:
    """Fix torch's intra-op thread count (``n``, else ``BENCH_THREADS``, else 1); return it.

    Also makes the allocator steady (``steady_allocator``), which every CPU benchmark wants.
    """
    import torch

    steady_allocator()
    if n is None:
        n = int(os.environ.get("BENCH_THREADS", "1"))
    torch.set_num_threads(n)
    return torch.get_num_threads()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    import torch

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "clock": clock_name(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "allocator": _ALLOCATOR,
    }


def print_machine(info: dict | None = None) -> dict:
    info = machine_info() if info is None else info
    print(f"torch {info['torch']}, {info['threads']} thread(s), {info['cores']} cores ({info['cpu']}), "
          f"load average {info['load_average_1min']}, clock: {info['clock']}, "
          f"allocator: {info.get('allocator', 'glibc default')}", flush=True)
    return info


@dataclass
class Results:
    """The metrics of one benchmark script: printed as ``name=value`` and written as JSON."""

    bench: str
    quick: bool = False
    metrics: dict = field(default_factory=dict)

    def add(self, name: str, r: Ratio | float, *, goal: str | None = None, description: str = "",
            reference: str | None = None, unit: str = "x", repeats: int | None = None,
            higher_is_better: bool | None = None, digits: int = 3) -> None:
        """Record a metric; ``r`` is a ``Ratio`` (value, spread, repeats) or a bare number (one run)."""
        ratio_of_medians, samples = None, None
        if isinstance(r, Ratio):
            value, spread, n = r.value, r.spread, r.repeats
            ratio_of_medians, samples = r.ratio_of_medians, r.pairs
        else:
            value, spread, n = float(r), (float(r), float(r)), (repeats or 1)
        at_median, pessimistic = goal_holds(goal, value, spread)
        info = machine_info()
        self.metrics[name] = {
            "value": value,
            "spread": list(spread),
            "spread_kind": "interquartile range over repeats" if n > 1 else "single run",
            "repeats": n,
            "samples": samples,
            "ratio_of_medians": ratio_of_medians,
            "unit": unit,
            "goal": goal,
            "goal_holds_at_median": at_median,
            "goal_holds_pessimistic": pessimistic,
            "higher_is_better": higher_is_better,
            "reference": reference,
            "description": description,
            "benchmark": self.bench,
            "threads": info["threads"],
            "clock": info["clock"],
            "torch": info["torch"],
            "cpu": info["cpu"],
            "date": info["date"],
            "load_average_1min": info["load_average_1min"],
            "quick": self.quick,
            "digits": digits,
        }

    def print(self) -> None:
        """The machine-readable lines, last: ``name=value`` (as before), then goal status."""
        for name, m in self.metrics.items():
            print(f"{name}={m['value']:.{m['digits']}g}")
        for name, m in self.metrics.items():
            lo, hi = m["spread"]
            status = ""
            if m["goal"]:
                status = (f"  goal {m['goal']}: median {'holds' if m['goal_holds_at_median'] else 'MISSES'}, "
                          f"pessimistic end {'holds' if m['goal_holds_pessimistic'] else 'MISSES'}")
            print(f"#   {name}: {m['value']:.{m['digits']}g} [spread {lo:.{m['digits']}g}-{hi:.{m['digits']}g}, "
                  f"n={m['repeats']}]{status}")

    def write(self, directory: Path | None = None) -> Path:
        """Write ``<directory>/<bench>.json`` (``benchmarks/results/``, ``.../quick/`` in quick mode)."""
        directory = directory or (RESULTS_DIR / "quick" if self.quick else RESULTS_DIR)
        directory.mkdir(parents=True, exist_ok=True)
        k, n_sessions = sessions()
        # one fragment per session (report.py pools them); a single-process run writes <bench>.json
        path = directory / (f"{self.bench}.json" if n_sessions == 1 else f"{self.bench}.s{k}.json")
        path.write_text(json.dumps({"bench": self.bench, "quick": self.quick, "machine": machine_info(),
                                    "session": k, "sessions": n_sessions, "metrics": self.metrics}, indent=2) + "\n")
        return path

    def finish(self) -> None:
        self.print()
        self.write()


__all__ = ["Timing", "Ratio", "Results", "measure", "default_clock", "clock_name", "ratio", "throughput", "schedule", "quartiles",
           "goal_holds", "quick_mode", "sessions", "session_repeats", "pool_sessions", "set_threads", "steady_allocator", "machine_info", "print_machine"]
