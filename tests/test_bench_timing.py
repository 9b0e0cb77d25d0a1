"""The benchmarks' shared timing helper (benchmarks/_timing.py), driven by a fake clock."""

from __future__ import annotations

import doctest
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import _timing  # noqa: E402
from _timing import Results, Timing, goal_holds, measure, quartiles, ratio, schedule, throughput  # noqa: E402


class FakeClock:
    """A clock that only moves when a timed function says how long it took."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_sides(clock: FakeClock, durations: dict[str, list[float]], log: list[str]):
    """Callables that log their name and advance the clock by their next duration."""
    its = {name: iter(ds) for name, ds in durations.items()}

    def side(name):
        def run():
            log.append(name)
            clock.advance(next(its[name]))
        return run

    return {name: side(name) for name in durations}


def test_alternation_order_is_abba():
    clock, log = FakeClock(), []
    fns = make_sides(clock, {"A": [1.0] * 7, "B": [1.0] * 7}, log)
    measure(fns, repeats=6, warmup=1, clock=clock)
    assert "".join(log) == "AB" + "ABBAABBAABBA"  # warm-up (not alternated), then A B B A ...
    assert "".join(schedule(["x", "y", "z"], 3)) == "xyzzyxxyz"


def test_warmup_is_run_but_not_timed():
    clock, log = FakeClock(), []
    # the warm-up calls take 50 s each; the timed ones 1, 2, 3, ...
    fns = make_sides(clock, {"A": [50.0, 50.0, 1.0, 2.0, 3.0], "B": [50.0, 50.0, 10.0, 20.0, 30.0]}, log)
    t = measure(fns, repeats=3, warmup=2, clock=clock)
    assert log[:4] == ["A", "B", "A", "B"]
    assert t["A"].samples == [1.0, 2.0, 3.0]
    assert t["B"].samples == [10.0, 20.0, 30.0]
    assert 50.0 not in t["A"].samples + t["B"].samples


def test_samples_follow_the_schedule():
    clock, log = FakeClock(), []
    # A's calls in order take 1..5 s, B's 10..50 s; the schedule interleaves them A B B A A B ...
    fns = make_sides(clock, {"A": [1.0, 2.0, 3.0, 4.0, 5.0], "B": [10.0, 20.0, 30.0, 40.0, 50.0]}, log)
    t = measure(fns, repeats=5, warmup=0, clock=clock)
    assert t["A"].samples == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert t["B"].samples == [10.0, 20.0, 30.0, 40.0, 50.0]
    assert clock.now == pytest.approx(100.0 + 15.0 + 150.0)


def test_median_and_interquartile_range():
    t = Timing("x", [9.0, 1.0, 5.0, 3.0, 7.0])
    assert t.median == 5.0
    assert t.spread == (3.0, 7.0)  # inclusive quartiles of 5 samples: 2nd and 4th smallest
    assert (t.min, t.max) == (1.0, 9.0)
    # an even count interpolates: 1 2 3 4 -> positions 0.75 and 2.25
    assert quartiles([4.0, 1.0, 3.0, 2.0]) == pytest.approx((1.75, 3.25))
    assert quartiles([2.5]) == (2.5, 2.5)
    with pytest.raises(ValueError, match="xs"):
        quartiles([])


def test_ratio_from_paired_medians():
    clock, log = FakeClock(), []
    a = [2.0, 2.2, 1.8, 2.4, 2.0]
    b = [1.0, 1.0, 1.2, 1.0, 0.8]
    fns = make_sides(clock, {"A": a, "B": b}, log)
    t = measure(fns, repeats=5, warmup=0, clock=clock)
    r = ratio(t["A"], t["B"])
    assert r.pairs == pytest.approx([2.0, 2.2, 1.5, 2.4, 2.5])  # round by round: A_i / B_i
    assert r.value == pytest.approx(2.2)  # the median of the pairs (not their mean, 2.12)
    assert r.spread == pytest.approx((2.0, 2.4))  # their IQR: 2nd and 4th of 1.5 2.0 2.2 2.4 2.5
    assert r.ratio_of_medians == pytest.approx(2.0 / 1.0)  # median(A) / median(B), kept as a check
    assert r.repeats == 5
    with pytest.raises(ValueError, match="same run"):
        ratio(Timing("a", [1.0, 2.0]), Timing("b", [1.0]))


def test_throughput_inverts_the_spread():
    r = throughput(100.0, Timing("t", [1.0, 2.0, 4.0, 5.0, 10.0]))
    assert r.value == 25.0
    assert r.spread == (20.0, 50.0)  # slow quartile -> low throughput


def test_goal_at_median_and_pessimistic_end():
    assert goal_holds("<= 1.5", 1.4, (1.3, 1.45)) == (True, True)
    assert goal_holds("<= 1.5", 1.4, (1.3, 1.6)) == (True, False)
    assert goal_holds(">= 6", 6.5, (5.9, 7.0)) == (True, False)
    assert goal_holds(">= 6", 5.0, (4.0, 6.5)) == (False, False)
    assert goal_holds(None, 1.0, (1.0, 1.0)) == (None, None)
    with pytest.raises(ValueError, match="goal"):
        goal_holds("< 2", 1.0, (1.0, 1.0))


def test_bad_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="repeats"):
        measure({"A": lambda: None}, repeats=0)
    with pytest.raises(ValueError, match="warmup"):
        measure({"A": lambda: None}, warmup=-1)
    with pytest.raises(ValueError, match="fns"):
        measure({})


def test_results_json_records_goal_and_machine(tmp_path):
    res = Results("bench_fake", quick=True)
    res.add("x_ratio_vs_ref", ratio(Timing("a", [1.0, 1.2, 1.1, 1.3, 1.0]), Timing("b", [1.0] * 5)),
            goal="<= 1.2", description="fake")
    path = res.write(tmp_path)
    m = json.loads(path.read_text())["metrics"]["x_ratio_vs_ref"]
    assert m["value"] == pytest.approx(1.1)  # pairs 1.0 1.2 1.1 1.3 1.0: median 1.1
    assert m["spread"] == pytest.approx([1.0, 1.2])
    assert m["repeats"] == 5
    assert m["goal_holds_at_median"] is True and m["goal_holds_pessimistic"] is True
    for key in ("threads", "torch", "cpu", "date"):
        assert m[key]


def test_doctests():
    assert doctest.testmod(_timing).failed == 0


def test_steady_allocator_is_recorded_and_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("BENCH_ALLOCATOR", "default")
    assert _timing.steady_allocator() == "glibc default"
    assert _timing.machine_info()["allocator"] == "glibc default"
    monkeypatch.delenv("BENCH_ALLOCATOR")
    described = _timing.steady_allocator()
    assert described.startswith("glibc, steady") or "unavailable" in described
    assert _timing.machine_info()["allocator"] == described
    if described.startswith("glibc, steady"):  # give the test process glibc's defaults back
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-4, 65536)  # M_MMAP_MAX
        libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD


def test_sessions_split_the_rounds_and_name_bad_settings(monkeypatch):
    monkeypatch.delenv("BENCH_SESSION", raising=False)
    monkeypatch.delenv("BENCH_SESSIONS", raising=False)
    assert _timing.sessions() == (1, 1)
    clock, log = FakeClock(), []
    measure(make_sides(clock, {"A": [1.0] * 7, "B": [2.0] * 7}, log), repeats=7, warmup=0, clock=clock)
    assert len(log) == 14  # one session: every round
    monkeypatch.setenv("BENCH_SESSIONS", "3")
    monkeypatch.setenv("BENCH_SESSION", "2")
    assert _timing.sessions() == (2, 3)
    log.clear()
    t = measure(make_sides(clock, {"A": [1.0] * 7, "B": [2.0] * 7}, log), repeats=7, warmup=0, clock=clock)
    assert log == list("ABBAABBA")  # ceil(1.5 * 7 / 3) = 4 rounds, still alternating
    assert len(t["A"].samples) == 4
    monkeypatch.setenv("BENCH_SESSION", "4")
    with pytest.raises(ValueError, match="BENCH_SESSION"):
        _timing.sessions()
    monkeypatch.setenv("BENCH_SESSIONS", "zero")
    with pytest.raises(ValueError, match="BENCH_SESSIONS"):
        _timing.sessions()


def test_session_fragments_are_written_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_SESSIONS", "3")
    monkeypatch.setenv("BENCH_SESSION", "2")
    res = Results("bench_fake")
    res.add("x", ratio(Timing("a", [1.0, 2.0, 3.0]), Timing("b", [1.0, 1.0, 1.0])))
    path = res.write(tmp_path)
    assert path.name == "bench_fake.s2.json"
    data = json.loads(path.read_text())
    assert (data["session"], data["sessions"]) == (2, 3)


def _entry(samples, goal=None):
    r = ratio(Timing("a", samples), Timing("b", [1.0] * len(samples)))
    return {"value": r.value, "spread": list(r.spread), "samples": r.pairs, "goal": goal, "repeats": len(samples),
            "ratio_of_medians": r.ratio_of_medians, "load_average_1min": 1.0}


def test_pooled_spread_covers_every_session_median():
    # three processes whose medians drift apart (1.0, 1.5, 1.2): each IQR alone misses the others
    sessions = [_entry([0.98, 1.0, 1.02, 1.0]), _entry([1.48, 1.5, 1.52, 1.5]), _entry([1.18, 1.2, 1.22, 1.2])]
    p = _timing.pool_sessions([dict(s, goal="<= 1.4") for s in sessions])
    assert p["repeats"] == 12 and p["sessions"] == 3
    assert p["value"] == pytest.approx(1.2)
    lo, hi = p["spread"]
    assert (lo, hi) == (0.98, 1.52)  # min-max of the 12 pooled samples: covers every session
    assert p["session_medians"] == pytest.approx([1.0, 1.5, 1.2])
    assert p["goal_holds_at_median"] is True and p["goal_holds_pessimistic"] is False
    # a single number per session (no samples): median and min-max of the numbers
    q = _timing.pool_sessions([{"value": v, "samples": None, "goal": ">= 2"} for v in (3.0, 2.5, 1.5)])
    assert q["value"] == 2.5 and q["spread"] == [1.5, 3.0] and q["goal_holds_pessimistic"] is False
    with pytest.raises(ValueError, match="metrics"):
        _timing.pool_sessions([])


def test_report_pools_sessions_and_keeps_widget_metrics(tmp_path, monkeypatch):
    import report

    frag_dir = tmp_path / "results"
    for k, samples in enumerate(([1.0, 1.1, 1.0], [1.3, 1.3, 1.4], [1.1, 1.2, 1.1]), start=1):
        monkeypatch.setenv("BENCH_SESSIONS", "3")
        monkeypatch.setenv("BENCH_SESSION", str(k))
        res = Results("bench_fake")
        res.add("x_ratio", ratio(Timing("a", samples), Timing("b", [1.0] * 3)), goal="<= 1.5")
        res.write(frag_dir)
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"benchmarks": {"bench_widgets": {"load_average_1min": 2.0}},
                               "metrics": {"widget_latency_p50_ms": {"benchmark": "bench_widgets", "value": 35, "spread": [35, 35],
                                                                    "repeats": 306, "unit": "ms", "goal": "<= 150",
                                                                    "goal_holds_at_median": True,
                                                                    "goal_holds_pessimistic": True},
                                           "gone": {"benchmark": "bench_fake", "value": 1}}}))
    rep = report.merge(frag_dir, previous=old)
    m = rep["metrics"]["x_ratio"]
    assert m["repeats"] == 9 and m["sessions"] == 3 and m["value"] == pytest.approx(1.1)
    assert m["spread"] == pytest.approx([1.0, 1.4])  # min-max of the 9 pooled pairs
    assert rep["metrics"]["widget_latency_p50_ms"]["value"] == 35  # carried over
    assert "gone" not in rep["metrics"]  # an old metric of a re-run benchmark is not
    assert rep["machine"]["sessions"] == 3
    assert "sessions" in report.table(rep)
    # a run cut short (2 of 3 sessions) is refused, not pooled
    (frag_dir / "bench_fake.s3.json").unlink()
    with pytest.raises(SystemExit, match="cut short"):
        report.merge(frag_dir)
