"""llmbook.post_training's SFT data: masked labels (char GPT and SmolLM2's chat template), padding, packing."""

import pytest
import torch

from llmbook.gpt import GPT, GPTConfig
from llmbook.post_training import (IGNORE_INDEX, causal_lm_loss, chat_segments, pack_examples, pad_batch,
                                   segment_labels, sft_example)

CHAT = [{"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Who says: To be, or not to be?"},
        {"role": "assistant", "content": "Hamlet"},
        {"role": "user", "content": "And in Chinese?"},
        {"role": "assistant", "content": "哈姆雷特"}]


@pytest.fixture(scope="module")
def tok():
    from llmbook.llama import load_tokenizer

    return load_tokenizer()


def test_sft_example_masks_the_prompt():
    ids, labels = sft_example([1, 2, 3], [4, 5])
    assert ids == [1, 2, 3, 4, 5] and labels == [IGNORE_INDEX] * 3 + [4, 5]


def test_chat_labels_on_smollm2_template(tok):
    segments = chat_segments(tok.chat_template, CHAT)
    from llmbook.llama import render_chat

    assert "".join(t for t, _ in segments) == render_chat(tok.chat_template, CHAT, add_generation_prompt=False)
    answers = [t for t, a in segments if a]
    assert answers == ["Hamlet<|im_end|>", "哈姆雷特<|im_end|>"]
    encode = lambda s: tok.encode(s, add_special_tokens=False)  # noqa: E731
    ids, labels = segment_labels(encode, segments)
    # tokenising the pieces apart gives the ids of the whole text
    assert ids == encode("".join(t for t, _ in segments))
    learned = [i for i in labels if i != IGNORE_INDEX]
    assert tok.decode(learned) == "Hamlet<|im_end|>哈姆雷特<|im_end|>"
    start = tok.convert_tokens_to_ids("<|im_start|>")
    end = tok.convert_tokens_to_ids("<|im_end|>")
    # every role marker and every prompt token is masked; only the two end-of-turn markers that close answers are learned
    assert start not in learned and learned.count(end) == 2 and ids.count(end) == 5


def test_causal_lm_loss_matches_the_gpt_loss_on_shifted_targets():
    torch.manual_seed(0)
    model = GPT(GPTConfig.baby(vocab_size=12, n_layer=1))
    ex = [sft_example([1, 2, 3], [4, 5, 6]), sft_example([7, 8], [9])]
    x, y = pad_batch(ex, pad_id=0)
    logits, _ = model(x)
    # the book's GPT takes targets already shifted, with -1 for "no loss"
    shifted = torch.cat([y[:, 1:], torch.full((2, 1), IGNORE_INDEX)], 1)
    targets = shifted.masked_fill(shifted == IGNORE_INDEX, -1)
    _, gpt_loss = model(x, targets)
    torch.testing.assert_close(causal_lm_loss(logits, y), gpt_loss)
    assert causal_lm_loss(logits, y, reduction="sum").item() == pytest.approx(4 * gpt_loss.item(), rel=1e-5)


def test_pad_and_pack_keep_every_learned_token():
    g = torch.Generator().manual_seed(3)
    ex = [sft_example(torch.randint(1, 50, (int(n),), generator=g).tolist(), torch.randint(1, 50, (int(m),), generator=g).tolist())
          for n, m in torch.randint(2, 12, (20, 2), generator=g)]
    x, y = pad_batch(ex, pad_id=0)
    assert x.shape == (20, max(len(i) for i, _ in ex))
    n_answer = sum(len([v for v in lab if v != IGNORE_INDEX]) for _, lab in ex)
    assert int((y != IGNORE_INDEX).sum()) == n_answer
    xp, yp = pack_examples(ex, block_size=16, pad_id=0)
    n_tokens = sum(len(i) for i, _ in ex)
    assert xp.shape == (-(-n_tokens // 16), 16) and xp.numel() < x.numel()      # fewer wasted positions
    assert xp.reshape(-1)[:n_tokens].tolist() == [t for i, _ in ex for t in i]
    flat = [v for _, lab in ex for v in lab]
    assert yp.reshape(-1)[:n_tokens].tolist() == flat


@pytest.mark.parametrize("call, word", [
    (lambda: sft_example([], [1]), "prompt_ids is empty"),
    (lambda: sft_example([1], []), "answer_ids is empty"),
    (lambda: sft_example([1], torch.zeros(2, 2, dtype=torch.long)), "answer_ids must be a 1-D"),
    (lambda: sft_example([1], ["a"]), "answer_ids must be a list of int"),
    (lambda: pad_batch([], 0), "examples is empty"),
    (lambda: pad_batch([([1, 2], [1])], 0), r"examples\[0\]: input_ids \(2\) and labels \(1\)"),
    (lambda: pad_batch([([1], [1])], -1), "pad_id"),
    (lambda: pack_examples([([1], [1])], 1), "block_size"),
    (lambda: causal_lm_loss(torch.zeros(2, 3, 4), torch.zeros(2, 4, dtype=torch.long)), "labels"),
    (lambda: chat_segments("{{ messages }}", [{"role": "user", "content": "hi"}]), "at least one assistant turn"),
    (lambda: segment_labels(lambda s: [1], []), "segments is empty"),
])
def test_bad_inputs_name_the_parameter(call, word):
    with pytest.raises((ValueError, TypeError), match=word):
        call()


def test_sft_train_lowers_the_answer_loss_and_score_answers_reads_choices():
    from llmbook.post_training import score_answers, sft_train

    torch.manual_seed(0)
    model = GPT(GPTConfig.baby(vocab_size=12, n_layer=1, d_model=32, n_head=2, d_ff=64))
    # prompt [1, k] -> answer [k + 5]: a lookup the model can learn
    examples = [sft_example([1, k], [k + 5, 11]) for k in range(1, 6)]
    x, y = pad_batch(examples, 0)
    with torch.no_grad():
        before = float(causal_lm_loss(model(x)[0], y))
    losses = sft_train(model, examples, steps=60, lr=1e-2, batch_size=5, seed=0)
    with torch.no_grad():
        after = float(causal_lm_loss(model(x)[0], y))
    assert len(losses) == 60 and after < before / 3
    enc = lambda s: [int(c) for c in s]  # noqa: E731  ("one char = one id" for the test)
    scores = score_answers(model, enc, ["12", "13"], ["7", "8"])
    assert scores.shape == (2, 2) and scores.argmax(1).tolist() == [0, 1]
    with torch.no_grad():
        manual = causal_lm_loss(model(torch.tensor([[1, 2, 7]]))[0], torch.tensor([[-100, -100, 7]]), reduction="sum")
    assert float(scores[0, 0]) == pytest.approx(-float(manual), rel=1e-5)


def test_sft_loop_bad_inputs():
    from llmbook.post_training import sft_train, speaker_questions

    model = GPT(GPTConfig.baby(vocab_size=12, n_layer=1))
    with pytest.raises(ValueError, match="examples is empty"):
        sft_train(model, [], steps=1, lr=1e-3)
    with pytest.raises(ValueError, match="steps must be"):
        sft_train(model, [sft_example([1], [2])], steps=0, lr=1e-3)
    with pytest.raises(ValueError, match="speakers must be"):
        speaker_questions("A:\nhello there my friend", [])


# ---------------------------------------------------------------- chapter 9's task: the last word of a line

def test_last_word_questions_and_their_pieces():
    from llmbook.line_tasks import last_word_questions, play_lines, question_line, word_candidates

    part = "HAMLET:\nTo be, or not to be: that is the question:\nAy me!\n\nOPHELIA:\nGood my lord, o'er the hill'\n"
    assert play_lines(part) == ["To be, or not to be: that is the", "Good my lord, o'er the hill'"]
    q = last_word_questions(part)
    assert q == [("Last word: To be, or not to be: that is the\n", "the"),
                 ("Last word: Good my lord, o'er the hill'\n", "hill")]   # the closing quote is not part of the word
    assert question_line(q[0][0]) == "To be, or not to be: that is the"
    assert word_candidates(q[0][0]) == [w + "\n" for w in ["To", "be", "or", "not", "to", "that", "is", "the"]]
    assert last_word_questions(part, min_words=7) == [q[0]]
    for call, word in [(lambda: play_lines(3), "part must be a str"), (lambda: play_lines("", 5, 10), "max_chars"),
                       (lambda: last_word_questions("", min_words=0), "min_words"),
                       (lambda: question_line("Who says: x\n"), "question must start")]:
        with pytest.raises((TypeError, ValueError), match=word):
            call()


def test_sample_questions_is_a_uniform_draw_of_distinct_questions():
    from llmbook.line_tasks import sample_questions

    qs = [(f"q{i}", "a") for i in range(100)] + [("q0", "a")] * 50      # one question repeated 50 times
    s = sample_questions(qs, 60, seed=3)
    assert len(set(s)) == 60 and s == sample_questions(qs, 60, seed=3) and s != sample_questions(qs, 60, seed=4)
    assert any(int(q[1:]) >= 60 for q, _ in s)         # not the head of the list
    counts = [0] * 100                                 # every question equally likely, wherever it stands
    for seed in range(400):
        for q, _ in sample_questions(qs, 10, seed):
            counts[int(q[1:])] += 1
    assert max(counts[:50]) < 80 and max(counts[50:]) < 80 and min(counts) > 15      # expected 40 each
    with pytest.raises(ValueError, match="distinct questions"):
        sample_questions(qs, 101, 0)
    with pytest.raises(ValueError, match="n must be"):
        sample_questions(qs, 0, 0)


def test_constant_baselines_and_answer_kinds():
    from llmbook.line_tasks import KINDS, answer_kind, constant_baselines, kind_counts

    b = constant_baselines(["the", "the", "me", "and"], ["me", "me", "the", "you", "and"])
    assert b == {"majority": ("the", 0.2), "best constant": ("me", 0.4)}
    qs = [("Last word: O Romeo, Romeo, wherefore\n", "wherefore")] * 4
    assert kind_counts(["wherefore", "Romeo", "wherfore", ""], qs) == dict(zip(KINDS, [1, 1, 1, 1]))
    assert answer_kind("romeo", qs[0][0], "wherefore") == "not a word of the line"   # case matters
    with pytest.raises(ValueError, match="non-empty"):
        constant_baselines([], ["a"])
    with pytest.raises(ValueError, match="differ in length"):
        kind_counts(["a"], [])


def test_chapter_task_held_out_sets_are_unseen_and_not_a_constant():
    from llmbook.data import load_splits
    from llmbook.line_tasks import constant_baselines, last_word_questions, sample_questions

    s = load_splits("shakespeare")
    train = last_word_questions(s.train)
    seen = {q for q, _ in train}
    every = last_word_questions(s.test)
    assert 0 < sum(q in seen for q, _ in every) < 100             # a few lines ("Good my lord,") recur across plays
    test = sample_questions(every, 400, 0, exclude=seen)
    assert len(train) > 50_000 and not any(q in seen for q, _ in test)
    b = constant_baselines([a for _, a in train], [a for _, a in test])
    assert b["majority"][1] <= b["best constant"][1] < 0.1            # no answer covers a tenth of the questions
    assert max(len(q) + len(a) + 1 for q, a in test) <= 64            # question and answer fit the GPT's context


def test_sft_batches_pad_or_pack_the_same_draws():
    from llmbook.post_training import sft_batches

    g = torch.Generator().manual_seed(1)
    ex = [sft_example(torch.randint(1, 50, (int(n),), generator=g).tolist(), [7, 8]) for n in torch.randint(2, 9, (30,), generator=g)]
    padded = list(sft_batches(ex, 5, 4, seed=2))
    packed = list(sft_batches(ex, 5, 4, seed=2, pack_block=16))
    for (xp, yp), (xk, yk) in zip(padded, packed):
        real = [t for row in xp.tolist() for t in row if t != 0]   # the examples' ids are >= 1, padding is 0
        assert xk.reshape(-1)[:len(real)].tolist() == real       # packing lays the same examples end to end
        assert xk.shape[1] == 16 and xk.numel() < len(real) + 16
        assert int((yk != IGNORE_INDEX).sum()) <= int((yp != IGNORE_INDEX).sum())  # a row's first label is no target
    with pytest.raises(ValueError, match="pack_block"):
        next(sft_batches(ex, 1, 2, pack_block=1))


def test_sft_train_schedule_and_packing():
    from llmbook.post_training import sft_train

    examples = [sft_example([1, k], [k + 5, 11]) for k in range(1, 6)]

    def run(**kw):
        torch.manual_seed(0)
        model = GPT(GPTConfig.baby(vocab_size=12, n_layer=1, d_model=32, n_head=2, d_ff=64, block_size=16))
        return sft_train(model, examples, steps=40, lr=1e-2, batch_size=5, seed=0, **kw)
    constant = run()
    assert run(min_lr=1e-2) == constant                          # a cosine from lr to lr is the constant rate
    decayed = run(min_lr=0.0)
    assert decayed != constant and decayed[-1] < decayed[0] / 2
    packed = run(pack_block=8)
    assert packed[-1] < packed[0] / 2
    with pytest.raises(ValueError, match="min_lr"):
        run(min_lr=1.0)


def test_greedy_match_is_greedy_decoding():
    from llmbook.post_training import greedy_answers, greedy_match, sft_train

    torch.manual_seed(0)
    model = GPT(GPTConfig.baby(vocab_size=12, n_layer=1, d_model=32, n_head=2, d_ff=64, block_size=16))
    enc = lambda s: [11 if c == "|" else int(c) for c in s]  # noqa: E731  (one digit = one id; "|" = 11 stops)
    dec = lambda ids: "".join(str(i) if i < 10 else "|" for i in ids)  # noqa: E731
    sft_train(model, [sft_example([1, k, 2], [k + 1, 11]) for k in range(2, 8)], steps=80, lr=1e-2, batch_size=6)
    prompts = [f"1{k}2" for k in range(2, 9)] + ["11", "3"]
    replies = greedy_answers(model, enc, dec, prompts, max_new=3, stop="|")
    for p, r in zip(prompts, replies):                       # against a token-by-token greedy loop
        ids = enc(p)
        for _ in range(3):
            nxt = int(model(torch.tensor([ids]))[0][0, -1].argmax())
            ids.append(nxt)
            if nxt == 11:
                break
        assert r == dec(ids[len(enc(p)):]).split("|")[0]
    answers = [f"{k + 1}" for k in range(2, 9)] + ["0", "4"]
    ok = greedy_match(model, enc, prompts, [a + "|" for a in answers])
    # right when greedy decoding writes the answer and then the stop token (11)
    assert ok.tolist() == [r == a and _stops(model, enc(p) + enc(a)) for p, r, a in zip(prompts, replies, answers)]
    assert sum(ok.tolist()) >= 5                              # the lookup is learned
    with pytest.raises(ValueError, match="same length"):
        greedy_match(model, enc, ["12"], [])


def _stops(model, ids):
    return int(model(torch.tensor([ids]))[0][0, -1].argmax()) == 11
