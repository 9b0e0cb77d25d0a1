"""Chapter 9's checkpoint comparer, without a browser: render, helpers, bad input shown inline."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from llmbook.charvocab import CharVocab  # noqa: E402
from llmbook.gpt import GPT, GPTConfig  # noqa: E402
from llmbook.llama import Llama, LlamaConfig  # noqa: E402
from llmbook.post_training import score_answers  # noqa: E402
from llmbook.viz.post_training import (answer_probs, checkpoint_explorer, checkpoint_render,  # noqa: E402
                                       comparison_figure, next_token_probs, sample_answers)

PROMPTS = ["Who says: To be?\n", "Who says: O Romeo?\n"]
NAMES = ["HAMLET\n", "Hamlet\n", "ROMEO\n"]


@pytest.fixture(scope="module")
def setup():
    vocab = CharVocab.from_text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:?,\n ")
    models = {}
    for i, name in enumerate(["base", "SFT", "DPO"]):
        torch.manual_seed(i)
        models[name] = GPT(GPTConfig.baby(len(vocab), n_layer=1, d_model=32, n_head=2, d_ff=64, block_size=24)).eval()
    return models, vocab


def test_helpers_agree_with_the_library(setup):
    models, vocab = setup
    ids = vocab.encode(PROMPTS[0])
    p = next_token_probs(models["SFT"], ids)
    assert p.shape == (len(vocab),) and abs(float(p.sum()) - 1) < 1e-5
    torch.testing.assert_close(p, torch.softmax(models["SFT"](torch.tensor([ids]))[0][0, -1], -1))
    a = answer_probs(models["SFT"], ids, [vocab.encode(n) for n in NAMES])
    ref = torch.softmax(score_answers(models["SFT"], vocab.encode, [PROMPTS[0]], NAMES)[0], 0)
    torch.testing.assert_close(a, ref)          # the same reading as score_answers, normalised
    long_prompt = vocab.encode("Who says: " + "a" * 40 + "?\n")  # longer than the context of 24: cropped
    assert answer_probs(models["SFT"], long_prompt, [vocab.encode(n) for n in NAMES]).shape == (3,)


def test_samples_repeat_with_the_seed_and_stop(setup):
    models, vocab = setup
    ids = vocab.encode(PROMPTS[0])
    s1 = sample_answers(models["base"], ids, 3, 1.0, 5, max_new=8, stop_ids=vocab.encode("\n"))
    assert s1 == sample_answers(models["base"], ids, 3, 1.0, 5, max_new=8, stop_ids=vocab.encode("\n"))
    assert all(len(s) <= 8 and vocab.encode("\n")[0] not in s for s in s1)
    greedy = sample_answers(models["base"], ids, 2, 0.0, 0, max_new=6)
    assert greedy[0] == greedy[1]               # temperature 0: argmax every time


def test_works_with_the_books_llama():
    torch.manual_seed(0)
    model = Llama(LlamaConfig.tiny()).eval()
    ids = [1, 2, 3]
    p = next_token_probs(model, ids)
    assert p.shape == (model.config.vocab_size,)
    assert answer_probs(model, ids, [[4], [5, 6]]).shape == (2,)
    assert len(sample_answers(model, ids, 1, 0.0, 0, max_new=3)[0]) == 3


def test_render_changes_with_the_checkpoint(setup):
    models, vocab = setup
    args = dict(prompt=PROMPTS[0], against="base", temperature=1.0, seed=0, candidates=NAMES, max_new=6)
    fig, table = checkpoint_render(models, vocab.encode, vocab.decode, checkpoint="SFT", **args)
    assert isinstance(fig, Figure) and len(fig.axes) == 4 and "SFT" in table and "base" in table
    fig2, table2 = checkpoint_render(models, vocab.encode, vocab.decode, checkpoint="DPO", **args)
    assert table2 != table and "DPO" in table2
    assert fig2.axes[0].get_title().startswith("DPO")
    fig3, _ = checkpoint_render(models, vocab.encode, vocab.decode, checkpoint="SFT", **{**args, "candidates": None})
    assert len(fig3.axes) == 2                  # no candidates: the next-token row only
    _, custom = checkpoint_render(models, vocab.encode, vocab.decode, checkpoint="SFT", custom="Who says: hi?\n", **args)
    assert "hi?" in custom


@pytest.mark.parametrize("change,match", [
    (dict(checkpoint="PPO"), "checkpoint must be one of"), (dict(against="x"), "against must be one of"),
    (dict(prompt=""), "empty"), (dict(custom="日本"), "outside the vocabulary"),
    (dict(temperature=-1.0), "temperature"), (dict(seed=1.5), "seed"),
])
def test_bad_input_raises_clear_errors(setup, change, match):
    models, vocab = setup
    args = dict(prompt=PROMPTS[0], checkpoint="SFT", against="base", temperature=1.0, seed=0, max_new=4)
    with pytest.raises(ValueError, match=match):
        checkpoint_render(models, vocab.encode, vocab.decode, **{**args, **change})


def test_figure_validates():
    with pytest.raises(ValueError, match="same non-zero length"):
        comparison_figure([torch.ones(3) / 3], ["a", "b", "c"], ["x", "y"])
    with pytest.raises(ValueError, match="one entry per label"):
        comparison_figure([torch.ones(3) / 3], ["a", "b"], ["x"])
    with pytest.raises(ValueError, match="answer_p"):
        comparison_figure([torch.ones(3) / 3], ["a", "b", "c"], ["x"], answer_p=[torch.ones(2)], answers=["a"])


def test_explorer_shows_errors_inline_and_recovers(setup):
    models, vocab = setup
    with pytest.raises(ValueError, match="at least two"):
        checkpoint_explorer({"base": models["base"]}, vocab.encode, vocab.decode, PROMPTS)
    with pytest.raises(ValueError, match="checkpoint must be one of"):
        checkpoint_explorer(models, vocab.encode, vocab.decode, PROMPTS, checkpoint="PPO")
    ex = checkpoint_explorer(models, vocab.encode, vocab.decode, PROMPTS, candidates=NAMES, max_new=4)
    assert ex.values()["checkpoint"] == "SFT" and ex.values()["against"] == "base" and ex.last_error is None
    before = ex.view.children[0].value
    ex.controls["checkpoint"].value = "DPO"
    assert ex.last_error is None and ex.view.children[0].value != before
    ex.controls["custom"].value = "日本"
    assert "outside the vocabulary" in str(ex.last_error)
    ex.controls["custom"].value = ""
    assert ex.last_error is None
