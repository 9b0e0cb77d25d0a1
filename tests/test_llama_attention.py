"""Attention probabilities returned by the book's Llama (``return_attention=True``)."""

import torch

from llmbook.llama import KVCache, Llama, LlamaConfig


def _model():
    torch.manual_seed(0)
    return Llama(LlamaConfig.tiny()).eval()


def test_attention_rows_sum_to_one_and_are_causal_in_every_layer_and_head():
    m = _model()
    idx = torch.randint(0, 64, (2, 7))
    with torch.no_grad():
        logits, atts = m(idx, return_attention=True)
    assert len(atts) == m.config.n_layer
    for a in atts:
        assert a.shape == (2, m.config.n_head, 7, 7)
        assert float(a.min()) >= 0.0
        torch.testing.assert_close(a.sum(-1), torch.ones(2, m.config.n_head, 7))
        assert float(a.triu(1).abs().max()) == 0.0  # query i gives no weight to keys j > i
        assert float(a.diagonal(dim1=-2, dim2=-1).min()) > 0.0  # ... but some to itself
    torch.testing.assert_close(logits, m(idx))  # same logits as the fused (SDPA) path


def test_attention_with_a_cache_covers_cached_keys_causally():
    m = _model()
    idx = torch.randint(0, 64, (1, 9))
    cache = KVCache(m.config, 1, 16)
    with torch.no_grad():
        m(idx[:, :5], kv_cache=cache)
        logits, atts = m(idx[:, 5:], kv_cache=cache, return_attention=True)  # 4 queries, 9 keys
        full_logits, full_atts = m(idx, return_attention=True)
    for a, f in zip(atts, full_atts):
        assert a.shape == (1, m.config.n_head, 4, 9)
        torch.testing.assert_close(a.sum(-1), torch.ones(1, m.config.n_head, 4))
        assert float(a.triu(1 + 5).abs().max()) == 0.0  # query at position 5 + i sees keys <= 5 + i
        torch.testing.assert_close(a, f[:, :, 5:])  # the same rows as without the cache
    torch.testing.assert_close(logits, full_logits[:, 5:])
