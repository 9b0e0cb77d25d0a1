"""train_seq2seq's label smoothing: the first step's loss is PyTorch's smoothed cross-entropy, and bad values fail."""

import pytest
import torch
import torch.nn.functional as F

from llmbook.device import seed_everything
from llmbook.toy_seq2seq import PAD, VOCAB_SIZE, DigitTask, make_batch, train_seq2seq
from llmbook.transformer import Transformer, TransformerConfig


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_first_loss_is_the_smoothed_cross_entropy_of_the_first_batch(eps):
    task = DigitTask("reverse", 1, 4)
    seed_everything(0)
    model = Transformer(TransformerConfig.tiny(vocab_size=VOCAB_SIZE, max_len=8))
    src, tgt_in, tgt_out = make_batch(task, 8, torch.Generator().manual_seed(5))   # the run's first batch (seed 5)
    model.train()
    with torch.no_grad():
        logits = model(src, tgt_in)
    expected = F.cross_entropy(logits.reshape(-1, VOCAB_SIZE), tgt_out.reshape(-1), ignore_index=PAD, label_smoothing=eps)
    losses = train_seq2seq(model, task, steps=1, batch_size=8, warmup=0, seed=5, progress=False, label_smoothing=eps)
    assert losses[0] == pytest.approx(expected.item(), rel=1e-5)


@pytest.mark.parametrize("bad", [-0.1, 1.0, 2, True, "0.1", None])
def test_bad_label_smoothing(bad):
    model = Transformer(TransformerConfig.tiny(vocab_size=VOCAB_SIZE, max_len=8))
    with pytest.raises(ValueError, match="label_smoothing"):
        train_seq2seq(model, DigitTask(), 1, progress=False, label_smoothing=bad)
