"""Chapter 4's widget exercise refuses the views the chapter already shows (its answer is not on the page)."""

from llmbook.exercises import check
from llmbook.exercises.ch04 import SHOWN_04_5
from llmbook.viz.norm import norm_stats


def test_04_5_refuses_the_views_on_the_page():
    for b, L, seed in SHOWN_04_5:
        r = check("04.5", {"batch_size": b, "padded_length": L, "seed": seed,
                           "bn_change": round(norm_stats(b, L, seed)["bn_change"], 3)})
        assert not r.passed
    r = check("04.5", {"batch_size": 6, "padded_length": 12, "seed": 3,
                       "bn_change": round(norm_stats(6, 12, 3)["bn_change"], 3)})
    assert r.passed
