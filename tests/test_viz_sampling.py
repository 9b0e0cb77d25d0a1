"""Sampling explorer render functions, without a browser."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.viz.sampling import next_token_figure, sampling_explorer, sampling_render  # noqa: E402


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
    assert "ROMEO:\nab" in ex.view.children[1].value


def test_errors_do_not_echo_a_long_input(model_vocab):
    model, vocab = model_vocab
    with pytest.raises(ValueError) as info:
        sampling_render(model, vocab, "ab", 1.0, 0, 1.0, "7" * 5000, n_new=3)
    assert "seed" in str(info.value) and len(str(info.value)) < 200
    with pytest.raises(ValueError) as info:
        next_token_figure(torch.ones(3) / 3, list("abc"), torch.ones(3, dtype=torch.bool), top_n="9" * 5000)
    assert "top_n" in str(info.value) and len(str(info.value)) < 200
