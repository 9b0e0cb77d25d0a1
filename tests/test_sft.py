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
