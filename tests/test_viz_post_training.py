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
from llmbook.sampling import sample_next  # noqa: E402
from llmbook.viz.frontend import ResultMemo  # noqa: E402
from llmbook.viz.post_training import (answer_probs, checkpoint_data, checkpoint_explorer,  # noqa: E402
                                       checkpoint_render, checkpoint_spec, comparison_figure, next_token_probs,
                                       sample_answers)
from llmbook.viz.sampling import token_label  # noqa: E402

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


def _table(spec: dict) -> dict:
    """The table panel of a checkpoint spec (the sampled answers)."""
    (table,) = [p for p in spec["panels"] if p["type"] == "table"]
    return table


def test_a_typed_question_is_formatted_as_the_menu_prompts(setup):
    """Review 2026-11-26 (UX #2): a question typed in the one-line box lacks the new line every menu
    prompt ends with; the comparer adds it, so the checkpoints answer it as they answer the menu's."""
    models, vocab = setup
    args = dict(checkpoint="SFT", against="base", temperature=0.0, seed=0, n_samples=2, max_new=6)
    menu = checkpoint_data(models, vocab.encode, vocab.decode, PROMPTS[0], **args)
    typed = checkpoint_data(models, vocab.encode, vocab.decode, PROMPTS[1], custom=PROMPTS[0].strip() + "  ",
                            prompts=PROMPTS, **args)
    assert typed["text"] == menu["text"] == PROMPTS[0] and PROMPTS[0].endswith("\n")
    assert typed["samples"] == menu["samples"]
    for a, b in zip(typed["probs"], menu["probs"]):
        torch.testing.assert_close(a, b)
    title = checkpoint_spec(typed, vocab.decode)["title"]
    assert "\\n" not in title and title.endswith("\u21b5")  # the new line drawn as in the menu, not as a literal \n
    with pytest.raises(ValueError, match="both 'SFT'"):
        checkpoint_data(models, vocab.encode, vocab.decode, PROMPTS[0], **{**args, "against": "SFT"})


def test_explorer_shows_errors_inline_and_recovers(setup):
    models, vocab = setup
    with pytest.raises(ValueError, match="at least two"):
        checkpoint_explorer({"base": models["base"]}, vocab.encode, vocab.decode, PROMPTS)
    with pytest.raises(ValueError, match="checkpoint must be one of"):
        checkpoint_explorer(models, vocab.encode, vocab.decode, PROMPTS, checkpoint="PPO")
    ex = checkpoint_explorer(models, vocab.encode, vocab.decode, PROMPTS, candidates=NAMES, max_new=4)
    assert ex.values()["checkpoint"] == "SFT" and ex.values()["against"] == "base" and ex.last_error is None
    before = ex.front.spec
    assert ex.view.children == (ex.front,) and before["kind"] == "panels"
    ex.controls["checkpoint"].value = "DPO"
    assert ex.last_error is None and ex.front.spec != before and _table(ex.front.spec)["header"] == ["DPO", "base"]
    shown = ex.front.spec
    ex.controls["custom"].value = "日本"
    assert "outside the vocabulary" in str(ex.last_error) and "outside the vocabulary" in ex.error.value
    assert ex.front.stale and ex.front.spec == shown  # the last picture stays, greyed out
    ex.controls["custom"].value = ""
    assert ex.last_error is None and not ex.front.stale


def test_batched_samples_are_the_models_own_draws(setup):
    """The n answers drawn as one batch are what a token-by-token loop over the model gives."""
    models, vocab = setup
    ids, stop = vocab.encode(PROMPTS[0]), vocab.encode("\n")
    greedy = sample_answers(models["SFT"], ids, 2, 0.0, 0, max_new=6, stop_ids=stop)
    want, x = [], list(ids)
    for _ in range(6):
        nxt = int(models["SFT"](torch.tensor([x[-24:]]))[0][0, -1].argmax())
        if nxt == stop[0]:
            break
        want.append(nxt)
        x.append(nxt)
    assert greedy == [want, want]
    # one answer at temperature 1: the same draws as sample_next on the model's logits, seed for seed
    g, x, want = torch.Generator().manual_seed(3), list(ids), []
    for _ in range(5):
        nxt = int(sample_next(models["base"](torch.tensor([x[-24:]]))[0][:, -1], temperature=1.0, generator=g)[0])
        if nxt == stop[0]:
            break
        want.append(nxt)
        x.append(nxt)
    assert sample_answers(models["base"], ids, 1, 1.0, 3, max_new=5, stop_ids=stop) == [want]


def test_spec_holds_the_computed_numbers(setup):
    models, vocab = setup
    args = dict(prompt=PROMPTS[0], checkpoint="SFT", against="base", temperature=0.7, seed=2, candidates=NAMES,
                n_samples=2, max_new=5)
    data = checkpoint_data(models, vocab.encode, vocab.decode, **args)
    spec = checkpoint_spec(data, vocab.decode)
    assert spec["kind"] == "panels" and spec["columns"] == 2 and len(spec["panels"]) == 5  # 4 charts + the table
    assert "SFT compared with base" in spec["title"] and "To be?" in spec["title"]
    ids = vocab.encode(PROMPTS[0])
    assert spec["panels"][0]["type"] == "table"  # the samples first, next to the temperature and seed
    charts = spec["panels"][1:]
    for j, name in enumerate(["SFT", "base"]):
        p = next_token_probs(models[name], ids)
        top = torch.topk(p, 10)
        panel = charts[j]
        assert panel["title"].startswith(name) and panel["type"] == "bars" and panel["vmax"] == 1.0
        assert panel["labels"] == [token_label(vocab.decode([i])) for i in top.indices.tolist()]
        torch.testing.assert_close(torch.tensor(panel["values"]), top.values, rtol=1e-3, atol=1e-6)
        answers = charts[2 + j]
        assert answers["type"] == "hbars" and answers["labels"] == [n.strip() for n in NAMES]
        assert abs(sum(answers["values"]) - 1) < 1e-3
        torch.testing.assert_close(torch.tensor(answers["values"]),
                                   answer_probs(models[name], ids, [vocab.encode(n) for n in NAMES]), rtol=1e-3, atol=1e-6)
    samples = {n: [vocab.decode(s) for s in sample_answers(models[n], ids, 2, 0.7, 2, 5, vocab.encode("\n"))]
               for n in ("SFT", "base")}
    assert _table(spec)["header"] == ["SFT", "base"]
    assert _table(spec)["rows"] == [[repr(samples["SFT"][i]), repr(samples["base"][i])] for i in range(2)]
    assert "temperature 0.7, seed 2" in _table(spec)["caption"]
    bare = checkpoint_spec(checkpoint_data(models, vocab.encode, vocab.decode, **{**args, "candidates": None}), vocab.decode)
    assert len(bare["panels"]) == 3                     # no candidates: no whole-answer row


def test_explorer_reuses_what_it_computed(setup):
    """A temperature or seed change samples again but runs no next-token or whole-answer pass;
    going back to a setting already seen runs the models not at all."""
    models, vocab = setup
    calls = []
    hooks = [m.register_forward_hook(lambda mod, inp, out, name=name: calls.append((name, tuple(inp[0].shape))))
             for name, m in models.items()]
    try:
        ex = checkpoint_explorer(models, vocab.encode, vocab.decode, PROMPTS, candidates=NAMES, n_samples=2, max_new=4)
        assert {c[0] for c in calls} == {"SFT", "base"} and ex.last_error is None
        assert any(shape[0] == 1 for _, shape in calls) and any(shape[0] == len(NAMES) for _, shape in calls)
        calls.clear()
        ex.controls["temperature"].value = 1.5
        assert calls and all(shape[0] == 2 for _, shape in calls)  # sampling batches of n_samples only
        assert "temperature 1.5" in _table(ex.front.spec)["caption"]
        calls.clear()
        ex.controls["seed"].value = 7
        assert calls and all(shape[0] == 2 for _, shape in calls)
        calls.clear()
        ex.controls["checkpoint"].value = "DPO"
        assert {c[0] for c in calls} == {"DPO"}             # the base column is kept
        first = ex.front.spec
        calls.clear()
        ex.controls["checkpoint"].value = "SFT"
        ex.controls["checkpoint"].value = "DPO"
        assert calls == [] and ex.front.spec == first        # all seen before: no forward pass at all
        hits = ex.cache.hits
        ex.controls["temperature"].value = 1.0
        ex.controls["seed"].value = 0
        assert ex.cache.hits > hits and ex.last_error is None
    finally:
        for h in hooks:
            h.remove()


def test_cache_is_bounded_and_keeps_no_failure():
    c = ResultMemo(2)
    assert [c.get(k, lambda k=k: k * 10) for k in (1, 2, 1, 3)] == [10, 20, 10, 30]
    assert len(c) == 2 and (c.hits, c.misses) == (1, 3)
    assert c.get(2, lambda: "new") == "new"             # 2 was the least recently used: dropped
    with pytest.raises(RuntimeError):
        c.get(9, lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert c.get(9, lambda: 90) == 90
    with pytest.raises(ValueError, match="size"):
        ResultMemo(0)


def test_seed_is_checked_before_the_cache(setup):
    models, vocab = setup
    args = dict(prompt=PROMPTS[0], checkpoint="SFT", against="base", temperature=1.0, max_new=3)
    cache = ResultMemo()
    checkpoint_data(models, vocab.encode, vocab.decode, seed=1, cache=cache, **args)
    with pytest.raises(ValueError, match="seed must be an int"):
        checkpoint_data(models, vocab.encode, vocab.decode, seed=True, cache=cache, **args)


@pytest.mark.parametrize("temperature,seed", [(0.0, 0), (1.0, 4), (1.6, 9)])
def test_key_value_cache_gives_the_same_samples(setup, temperature, seed):
    models, vocab = setup
    ids, stop = vocab.encode(PROMPTS[1]), vocab.encode("\n")
    for name in ("base", "DPO"):
        got = [sample_answers(models[name], ids, 3, temperature, seed, max_new=5, stop_ids=stop, use_cache=c)
               for c in (True, False)]
        assert got[0] == got[1]
    long_prompt = vocab.encode("Who says: " + "a" * 30 + "?\n")  # past the context: the uncached loop crops it
    assert (sample_answers(models["SFT"], long_prompt, 2, 1.0, 1, max_new=4)
            == sample_answers(models["SFT"], long_prompt, 2, 1.0, 1, max_new=4, use_cache=False))


def test_candidates_can_depend_on_the_prompt(setup):
    """Chapter 9 reads the whole answers among the words of the line a question asks about."""
    models, vocab = setup
    per_prompt = lambda text: [w + "\n" for w in text.replace("?", " ").split()[2:]]  # noqa: E731  (the words after "Who says:")
    args = dict(prompt=PROMPTS[1], checkpoint="SFT", against="base", temperature=0.0, seed=0, max_new=3)
    data = checkpoint_data(models, vocab.encode, vocab.decode, candidates=per_prompt, **args)
    assert data["candidates"] == ["O\n", "Romeo\n"]
    torch.testing.assert_close(data["answer_p"][0], answer_probs(models["SFT"], vocab.encode(PROMPTS[1]),
                                                                 [vocab.encode(c) for c in data["candidates"]]))
    spec = checkpoint_spec(data, vocab.decode)
    assert spec["panels"][3]["labels"] == ["O", "Romeo"]  # after the table and the two next-token charts
    fig, _ = checkpoint_render(models, vocab.encode, vocab.decode, candidates=per_prompt, **args)
    assert len(fig.axes) == 4
    no_words = checkpoint_data(models, vocab.encode, vocab.decode, candidates=lambda text: [], **args)
    assert no_words["answer_p"] is None                      # no candidates for this prompt: no whole-answer row
    with pytest.raises(ValueError, match="candidates"):
        checkpoint_data(models, vocab.encode, vocab.decode, candidates=lambda text: [""], **args)
    ex = checkpoint_explorer(models, vocab.encode, vocab.decode, PROMPTS, candidates=per_prompt, max_new=3)
    assert ex.last_error is None and ex.front.spec["panels"][3]["labels"] == ["To", "be"]
    ex.controls["prompt"].value = PROMPTS[1]
    assert ex.last_error is None and ex.front.spec["panels"][3]["labels"] == ["O", "Romeo"]
