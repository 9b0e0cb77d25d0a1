"""Device portability without a GPU: every model and helper run with the model on ``meta``.

A ``meta`` tensor has a shape, a dtype and a device but no values, and PyTorch refuses to
mix it with a CPU tensor ("Tensor on device cpu is not on the expected device meta"),
exactly as CUDA refuses to mix with the CPU. So a helper that builds a batch, a mask, a
cache or a label tensor on the CPU while the model lives elsewhere fails here as it
would on a GPU; one that follows ``next(model.parameters()).device`` passes. The models
also check that their inputs sit on their device (a clear ``ValueError`` naming the
input), so a CPU tensor fed to an embedding, which ``meta`` alone would let through,
is caught too.

Meta tensors cannot be read back, so ``.item()``, ``float()``, ``int()``, ``bool()`` and
``.tolist()`` of a meta tensor return placeholder zeros inside these tests (the
``meta_values`` fixture): the helpers then run to their end, and what is checked is
where every tensor lives, not the numbers.
"""

from __future__ import annotations

import pytest
import torch

from llmbook.bert import (
    Bert,
    BertConfig,
    BertForPreTraining,
    BertForSequenceClassification,
    classify_accuracy,
    fine_tune,
    mask_tokens,
    pooled_features,
    predict_masked,
    pretraining_accuracy,
)
from llmbook.charvocab import CharVocab
from llmbook.gpt import GPT, GPTConfig, KVCache
from llmbook.llama import Llama, LlamaConfig
from llmbook.llama import generate as llama_generate
from llmbook.moe import MoEGPT
from llmbook.retrieval import build_datastore, knn_lm_loss, knn_log_probs, lm_states
from llmbook.rnn import CharLM, CharLMConfig, bits_per_char
from llmbook.toy_seq2seq import DigitTask, exact_match, make_batch, train_seq2seq
from llmbook.train import TrainConfig, estimate_loss, random_windows, train
from llmbook.transformer import Transformer, TransformerConfig

META = torch.device("meta")


@pytest.fixture
def meta_values(monkeypatch):
    """Reading a meta tensor back gives zeros instead of an error (see the module docstring)."""

    def patch(name, placeholder):
        original = getattr(torch.Tensor, name)

        def method(self, *args, **kwargs):
            if self.device.type == "meta":
                return placeholder(self)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, method)

    zero = lambda t: False if t.dtype == torch.bool else (0.0 if t.is_floating_point() else 0)  # noqa: E731
    patch("item", zero)
    patch("__float__", lambda t: 0.0)
    patch("__int__", lambda t: 0)
    patch("__index__", lambda t: 0)
    patch("__bool__", lambda t: False)
    patch("tolist", lambda t: torch.zeros(t.shape, dtype=t.dtype).tolist())
    # Boolean-mask indexing (nonzero) has a data-dependent shape; on meta, assume every
    # element is selected (PyTorch's own switch for this).
    import torch.fx.experimental._config as fx_config

    with fx_config.patch(meta_nonzero_assume_all_nonzero=True):
        yield


def on_meta(model: torch.nn.Module) -> torch.nn.Module:
    return model.to(META)


def check_meta(*tensors: torch.Tensor) -> None:
    for t in tensors:
        assert t.device.type == "meta", t.device


def tiny_gpt() -> GPTConfig:
    return GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16, d_ff=32)


def tokens(vocab: int, *shape: int, device=META) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(0)).to(device)


# ---------------------------------------------------------------------- the meta device itself
def test_meta_device_rejects_a_cpu_tensor_as_cuda_would():
    """The premise of this module: meta and CPU tensors do not mix."""
    lin = torch.nn.Linear(3, 2).to(META)
    with pytest.raises(RuntimeError, match="expected device"):
        lin(torch.zeros(1, 3))


@pytest.mark.parametrize("model_fn", [lambda: GPT(tiny_gpt()), lambda: MoEGPT(tiny_gpt(), n_experts=3, k=2),
                                      lambda: Llama(LlamaConfig.tiny())], ids=["gpt", "moe", "llama"])
def test_cpu_input_to_a_meta_model_is_a_clear_error(model_fn):
    model = on_meta(model_fn())
    with pytest.raises(ValueError, match=r"idx is on cpu but the model is on meta"):
        model(torch.zeros(1, 3, dtype=torch.long))


# ---------------------------------------------------------------------- GPT and MoE
@pytest.mark.parametrize("make", [lambda c: GPT(c), lambda c: GPT(GPTConfig.gpt3("small", **{
    k: getattr(c, k) for k in ("vocab_size", "block_size", "n_layer", "n_head", "d_model", "d_ff")}, local_window=3)),
    lambda c: MoEGPT(c, n_experts=3, k=2)], ids=["gpt", "gpt3-banded", "moe"])
def test_gpt_family_forward_backward_generate_on_meta(make, meta_values):
    model = on_meta(make(tiny_gpt()))
    idx, targets = tokens(11, 2, 8), tokens(11, 2, 8)
    logits, loss = model(idx, targets)
    check_meta(logits, loss)
    loss.backward()
    check_meta(*(p.grad for p in model.parameters()))
    logits, _, atts = model(idx, return_attention=True)
    check_meta(logits, *atts)
    prompt = torch.tensor([[1, 2, 3]])  # made on the CPU: generate moves it to the model
    for use_cache in (True, False):
        for temperature in (0.0, 1.0):
            out = model.generate(prompt, 7, temperature=temperature, use_cache=use_cache)  # past block_size
            check_meta(out)
            assert out.shape == (1, 10)


def test_gpt_kv_cache_without_a_device_follows_the_model(meta_values):
    model = on_meta(GPT(tiny_gpt())).eval()
    cache = KVCache(model.config, 2)  # no device named
    logits, _ = model(tokens(11, 2, 3), kv_cache=cache)
    logits, _ = model(tokens(11, 2, 1), kv_cache=cache)
    check_meta(logits, *cache.k, *cache.v)


def test_charvocab_prompt_follows_the_model(meta_values):
    vocab = CharVocab.from_text("abc")
    model = on_meta(GPT(GPTConfig.baby(len(vocab), n_layer=1)))
    check_meta(vocab.encode_tensor("ab", device=META))
    check_meta(model.generate(vocab.encode_tensor("ab"), 2))


# ---------------------------------------------------------------------- LLaMA
def test_llama_forward_backward_generate_on_meta(meta_values):
    model = on_meta(Llama(LlamaConfig.tiny()))
    idx = tokens(64, 2, 5)
    logits = model(idx)
    check_meta(logits)
    logits.float().sum().backward()
    check_meta(*(p.grad for p in model.parameters()))
    logits, atts = model(idx, return_attention=True)
    check_meta(logits, *atts)
    for use_cache in (True, False):
        out = llama_generate(model, torch.tensor([[1, 2, 3]]), 4, use_cache=use_cache, eos_id=2)
        check_meta(out)


# ---------------------------------------------------------------------- BERT
@pytest.fixture(scope="module")
def wordpiece():
    from llmbook.tokenizers.wordpiece import WordPiece

    return WordPiece.minilm()


def test_bert_models_on_meta(meta_values):
    cfg = BertConfig.tiny(vocab_size=50, max_position=16)
    ids, seg = tokens(50, 2, 6), tokens(2, 2, 6)
    mask = torch.ones(2, 6, dtype=torch.long, device=META)
    bert = on_meta(Bert(cfg))
    out = bert(ids, seg, mask, return_attention=True, output_hidden_states=True)
    check_meta(out.last_hidden_state, out.pooled, *out.attentions, *out.hidden_states)
    out.pooled.sum().backward()
    pre = on_meta(BertForPreTraining(cfg))
    o = pre(ids, seg, mask, nsp_labels=torch.ones(2, dtype=torch.long, device=META))
    check_meta(o.loss, o.mlm_logits, o.nsp_logits)
    o.loss.backward()
    cls = on_meta(BertForSequenceClassification(cfg, n_classes=3))
    check_meta(cls(ids, seg, mask))


def test_bert_helpers_on_meta(wordpiece, meta_values):
    cfg = BertConfig.tiny(vocab_size=len(wordpiece.vocab), max_position=32)
    data = [("a fine day", 1), ("a bad day", 0), ("so so", 1)]
    cls = on_meta(BertForSequenceClassification(cfg))
    assert isinstance(classify_accuracy(cls, wordpiece, data, max_len=16, batch_size=2), float)
    losses = fine_tune(cls, wordpiece, data, epochs=1, batch_size=2, max_len=16)
    assert len(losses) == 2
    check_meta(pooled_features(on_meta(Bert(cfg)), wordpiece, data, max_len=16))
    pre = on_meta(BertForPreTraining(cfg))
    tokens_, preds = predict_masked(pre, wordpiece, "the [MASK] is red", top_k=2)
    assert len(preds) == 1
    ids = tokens(len(wordpiece.vocab), 3, 8)
    corrupted, labels = mask_tokens(ids, mask_id=103, vocab_size=len(wordpiece.vocab), special_ids=[0, 101, 102, 103],
                                    generator=torch.Generator().manual_seed(0))  # CPU generator, meta ids
    check_meta(corrupted, labels)
    batch = {"input_ids": torch.full((3, 8), 5), "token_type_ids": torch.zeros(3, 8, dtype=torch.long),
             "attention_mask": torch.ones(3, 8, dtype=torch.long), "mlm_labels": torch.full((3, 8), 7),
             "nsp_labels": torch.ones(3, dtype=torch.long)}  # built on the CPU, as pretraining_batch does
    mlm_acc, nsp_acc = pretraining_accuracy(pre, batch)
    assert isinstance(mlm_acc, float) and isinstance(nsp_acc, float)


# ---------------------------------------------------------------------- training and evaluation
def test_train_and_estimate_loss_on_meta(meta_values):
    model = on_meta(GPT(tiny_gpt()))
    ids = torch.arange(200) % 11  # token ids on the CPU, as a notebook loads them
    get_batch = random_windows(ids[:150], ids[150:], block_size=8, batch_size=4)
    cfg = TrainConfig(max_steps=3, warmup_steps=1, grad_accum=2, eval_interval=2, eval_batches=2, progress=False)
    result = train(model, get_batch, cfg)
    assert result.step == 3 and len(result.evals) == 2
    assert isinstance(estimate_loss(model, get_batch, "val", 2), float)


def test_seq2seq_training_and_exact_match_on_meta(meta_values):
    task = DigitTask("reverse", 2, 4)
    model = on_meta(Transformer(TransformerConfig.tiny(vocab_size=13, max_len=8)))
    losses = train_seq2seq(model, task, steps=2, batch_size=4, warmup=1, progress=False)
    assert len(losses) == 2
    src, _, tgt = make_batch(task, 3, torch.Generator().manual_seed(1))  # CPU tensors
    assert isinstance(exact_match(model, src, tgt), float)


def test_charlm_on_meta(meta_values):
    model = on_meta(CharLM(CharLMConfig(vocab_size=5, kind="lstm", d_embed=4, d_hidden=8, n_context=2)))
    ids = tokens(5, 2, 6)
    check_meta(model(ids))
    assert isinstance(bits_per_char(model, ids, tokens(5, 2, 6)), float)


def test_knn_lm_on_meta(meta_values):
    model = on_meta(GPT(tiny_gpt()))
    ids = torch.arange(40) % 11  # CPU ids: lm_states moves each window to the model
    st = lm_states(model, ids, stride=4)
    check_meta(st.hidden, st.logits, st.targets)
    store = build_datastore(model, ids, stride=4)
    check_meta(store.keys, store.values)
    check_meta(knn_log_probs(st.hidden, store, vocab_size=11, k=3))
    losses = knn_lm_loss(model, ids, store, lambdas=[0.0, 0.5], k=3, stride=4)
    assert set(losses) == {0.0, 0.5}
