"""What chapter 7's written-out cells rely on from the library (issue 26)."""

import pytest
import torch

from llmbook.bert import linear_probe


def _data():
    g = torch.Generator().manual_seed(0)
    f_tr, f_va = torch.randn(40, 6, generator=g), torch.randn(20, 6, generator=g)
    w = torch.randn(6, generator=g)
    return f_tr, (f_tr @ w > 0).long(), f_va, (f_va @ w > 0).long()


def test_linear_probe_logits_agree_with_its_per_item_and_accuracy_results():
    f_tr, y_tr, f_va, y_va = _data()
    logits = linear_probe(f_tr, y_tr, f_va, y_va, steps=50, return_logits=True)
    assert logits.shape == (20, 2)
    correct = linear_probe(f_tr, y_tr, f_va, y_va, steps=50, per_item=True)
    assert torch.equal(logits.argmax(-1) == y_va, correct)
    assert linear_probe(f_tr, y_tr, f_va, y_va, steps=50) == pytest.approx(correct.float().mean().item())
    # a different weight decay trains a different layer: the logits can tell two probes apart
    other = linear_probe(f_tr, y_tr, f_va, y_va, steps=50, weight_decay=1.0, return_logits=True)
    assert not torch.allclose(logits, other, atol=1e-5, rtol=0)


def test_linear_probe_refuses_two_results_at_once():
    f_tr, y_tr, f_va, y_va = _data()
    with pytest.raises(ValueError, match="return_logits"):
        linear_probe(f_tr, y_tr, f_va, y_va, per_item=True, return_logits=True)
