"""Sampling explorer render functions, without a browser."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.viz.sampling import (  # noqa: E402
    FILTERED, SamplingMemo, next_token_figure, sampling_data, sampling_explorer, sampling_render, sampling_spec, token_label,
)
from llmbook.viz.style import PALETTE  # noqa: E402


@pytest.fixture(scope="module")
def model_vocab():
    vocab = CharVocab.from_text("abcdefgh ROMEO:\n,")
    torch.manual_seed(0)
    model = GPT(GPTConfig.baby(len(vocab), n_layer=1, d_model=32, n_head=2, d_ff=64, block_size=16))
    return model, vocab


def test_render_gives_figure_and_text(model_vocab):
    model, vocab = model_vocab
    fig, body = sampling_render(model, vocab, "ab", 1.0, 3, 1.0, 0, n_new=10)
    assert isinstance(fig, Figure) and "ab" in body
    again = sampling_render(model, vocab, "ab", 1.0, 3, 1.0, 0, n_new=10)[1]
    assert again == body  # the seed makes it repeatable
    greedy = sampling_render(model, vocab, "a" * 40, 0.0, 0, 1.0, 1, n_new=5)  # long prompt: cropped
    assert "title" not in greedy[1]


@pytest.mark.parametrize("args,match", [
    (("", 1.0, 0, 1.0, 0), "empty"), (("xyz", 1.0, 0, 1.0, 0), "outside the vocabulary"),
    (("ab", -1.0, 0, 1.0, 0), "temperature"), (("ab", 1.0, -2, 1.0, 0), "top_k"),
    (("ab", 1.0, 0, 0.0, 0), "top_p"),
])
def test_bad_input_raises_clear_errors(model_vocab, args, match):
    model, vocab = model_vocab
    with pytest.raises(ValueError, match=match):
        sampling_render(model, vocab, *args, n_new=3)


def test_figure_validates_and_explorer_shows_errors(model_vocab):
    with pytest.raises(ValueError, match="labels"):
        next_token_figure(torch.ones(3) / 3, ["a", "b"], torch.ones(3, dtype=torch.bool))
    model, vocab = model_vocab
    ex = sampling_explorer(model, vocab, prompt="ab", n_new=5)
    assert ex.last_error is None
    ex.controls["prompt"].value = "zzz"
    assert "outside the vocabulary" in str(ex.last_error)
    ex.controls["prompt"].value = "ab"
    assert ex.last_error is None


def test_prompt_box_keeps_line_breaks(model_vocab):
    import ipywidgets as widgets

    model, vocab = model_vocab
    ex = sampling_explorer(model, vocab, prompt="ROMEO:\nab", n_new=5)
    box = ex.controls["prompt"]
    assert isinstance(box, widgets.Textarea)  # a one-line Text box shows "ROMEO:ab"
    assert box.value == "ROMEO:\nab" and ex.last_error is None
    # the continuation starts after the line break the model was given
    text = ex.front.spec["panels"][1]
    assert text["segments"][0] == {"text": "ROMEO:\nab", "bold": True}
    assert ex.view.children == (ex.front,)


def test_errors_do_not_echo_a_long_input(model_vocab):
    model, vocab = model_vocab
    with pytest.raises(ValueError) as info:
        sampling_render(model, vocab, "ab", 1.0, 0, 1.0, "7" * 5000, n_new=3)
    assert "seed" in str(info.value) and len(str(info.value)) < 200
    with pytest.raises(ValueError) as info:
        next_token_figure(torch.ones(3) / 3, list("abc"), torch.ones(3, dtype=torch.bool), top_n="9" * 5000)
    assert "top_n" in str(info.value) and len(str(info.value)) < 200


def test_spec_matches_the_python_computation(model_vocab):
    model, vocab = model_vocab
    cache = SamplingMemo(model, vocab, n_new=12)
    spec = sampling_spec(cache, "ab", 0.7, 4, 0.9, 3)
    assert spec["kind"] == "panels"
    assert spec["title"] == "temperature 0.70, top_k 4, top_p 0.90, seed 3"
    bars, text = spec["panels"]
    with torch.no_grad():
        logits = model(vocab.encode_tensor("ab"))[0][0, -1]
    probs = torch.softmax(logits / 0.7, dim=-1)
    order = torch.argsort(-probs, stable=True)[:20]
    assert bars["labels"] == [token_label(vocab.decode([i])) for i in order.tolist()]
    torch.testing.assert_close(torch.tensor(bars["values"], dtype=torch.float64), probs[order].double(), rtol=1e-3, atol=1e-7)
    # top_k = 4 keeps the 4 most probable tokens (top_p = 0.9 may remove more): kept bars blue, the rest grey
    kept = [c == PALETTE[0] for c in bars["colors"]]
    assert sum(kept) <= 4 and kept[0] and not any(kept[4:]) and set(bars["colors"]) <= {PALETTE[0], FILTERED}
    assert f"{sum(kept)} of {len(vocab)} tokens kept" in bars["title"]
    # the continuation is the model's own sample with that seed
    g = torch.Generator().manual_seed(3)
    out = model.generate(vocab.encode_tensor("ab"), 12, temperature=0.7, top_k=4, top_p=0.9, generator=g)
    assert text["segments"] == [{"text": "ab", "bold": True}, {"text": vocab.decode(out[0, 2:])}]
    # the static picture draws the same numbers
    fig, body = sampling_render(model, vocab, "ab", 0.7, 4, 0.9, 3, n_new=12, cache=cache)
    assert fig.axes[0].get_title() == bars["title"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == bars["labels"]


def test_cache_reuses_the_logits_and_continuations(model_vocab, monkeypatch):
    model, vocab = model_vocab
    ex = sampling_explorer(model, vocab, prompt="ab", temperature=1.0, n_new=6)
    cache = ex.cache
    assert (cache.calls, cache.generations) == (1, 1)
    forward_lengths = []
    real_forward = model.forward

    def counting_forward(idx, *args, **kwargs):
        forward_lengths.append(idx.shape[1])
        return real_forward(idx, *args, **kwargs)

    monkeypatch.setattr(model, "forward", counting_forward)
    ex.controls["temperature"].value = 0.5
    ex.controls["top_p"].value = 0.8
    ex.controls["top_k"].value = 3
    ex.controls["seed"].value = 5
    assert ex.last_error is None
    # no new forward pass over the prompt for the distribution: only the 4 new continuations ran the model
    assert cache.calls == 1 and cache.generations == 5
    assert ex.front.spec["title"] == "temperature 0.50, top_k 3, top_p 0.80, seed 5"
    # going back to settings seen before reuses their continuation: the model is not called at all
    ex.controls["seed"].value = 9
    assert cache.generations == 6 and ex.last_error is None
    forward_lengths.clear()
    ex.controls["seed"].value = 5
    ex.controls["seed"].value = 9
    assert forward_lengths == [] and cache.generations == 6
    # a new prompt runs the model once more for its logits
    ex.controls["prompt"].value = "ba"
    assert cache.calls == 2 and ex.last_error is None


@pytest.mark.parametrize("args,match", [
    (("", 1.0, 0, 1.0, 0), "prompt is empty"), (("xyz", 1.0, 0, 1.0, 0), "outside the vocabulary"),
    (("ab", -1.0, 0, 1.0, 0), "temperature"), (("ab", 1.0, -2, 1.0, 0), "top_k"),
    (("ab", 1.0, 0, 0.0, 0), "top_p"), (("ab", 1.0, 0, 1.0, 1.5), "seed"),
])
def test_spec_bad_input_names_the_parameter(model_vocab, args, match):
    model, vocab = model_vocab
    with pytest.raises(ValueError, match=match):
        sampling_spec(SamplingMemo(model, vocab, n_new=3), *args)


def test_explorer_error_greys_the_browser_view(model_vocab):
    model, vocab = model_vocab
    ex = sampling_explorer(model, vocab, prompt="ab", n_new=4)
    before = ex.front.spec
    ex.controls["prompt"].value = ""
    assert "empty" in str(ex.last_error) and ex.front.stale and ex.front.spec == before
    ex.controls["prompt"].value = "ab"
    assert ex.last_error is None and not ex.front.stale


def test_prompt_box_applies_as_the_reader_types_after_a_pause(model_vocab):
    """Review 2026-11-26 UX #17: the prompt box applies without leaving it, like chapters 0 and 1a's
    text boxes, once the typing pauses (a new prompt runs the model)."""
    model, vocab = model_vocab
    ex = sampling_explorer(model, vocab, prompt="ROMEO:\nab", n_new=5)
    box = ex.controls["prompt"]
    assert box.continuous_update and ex.typing_pause >= 0.2
    assert "click outside" not in ex.title and "pause typing" in ex.title
