"""The models compile as one graph: ``torch.compile(model, fullgraph=True, backend="eager")``.

``backend="eager"`` runs Dynamo's tracing only (no code generation, no C++ compiler), so
this takes seconds on a CPU. ``fullgraph=True`` turns any graph break into an error: a
host sync in a forward pass (``int(t.max())``, ``bool(t.any())``, ``t.item()``) or a
data-dependent shape (``nonzero``) would fail here, and on a GPU would stall every step.
Each compiled model must also give the eager model's numbers.
"""

from __future__ import annotations

import pytest
import torch

from llmbook.bert import Bert, BertConfig
from llmbook.gpt import GPT, GPTConfig
from llmbook.llama import Llama, LlamaConfig
from llmbook.moe import MoEFeedForward, MoEGPT

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def ids(vocab: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(0))


def compiled(model: torch.nn.Module):
    return torch.compile(model, fullgraph=True, backend="eager", dynamic=False)


def test_gpt_compiles_without_graph_breaks():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=32, d_ff=64)).eval()
    x, y = ids(50, 2, 16), ids(50, 2, 16)
    logits, loss = compiled(model)(x, y)
    ref_logits, ref_loss = model(x, y)
    torch.testing.assert_close(logits, ref_logits)
    torch.testing.assert_close(loss, ref_loss)


def test_gpt_training_step_compiles():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=32, d_ff=64))
    _, loss = compiled(model)(ids(50, 2, 16), ids(50, 2, 16))
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_bert_compiles_without_graph_breaks():
    torch.manual_seed(0)
    model = Bert(BertConfig.tiny(vocab_size=60, max_position=16)).eval()
    x = ids(60, 2, 10)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0  # padding: the key padding mask path
    out = compiled(model)(x, attention_mask=mask)
    torch.testing.assert_close(out.last_hidden_state, model(x, attention_mask=mask).last_hidden_state)


def test_llama_compiles_without_graph_breaks():
    torch.manual_seed(0)
    model = Llama(LlamaConfig.tiny()).eval()
    x = ids(model.config.vocab_size, 2, 9)
    torch.testing.assert_close(compiled(model)(x), model(x))


def test_moe_forward_compiles_without_graph_breaks():
    """The CPU eager path picks each expert's tokens (nonzero); traced, the dense dispatch runs."""
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=50, block_size=16, n_layer=2, n_head=2, d_model=32, d_ff=64)
    layer = MoEFeedForward(cfg, n_experts=4, k=2).eval()
    h = torch.randn(2, 8, 32)
    torch.testing.assert_close(compiled(layer)(h), layer(h), rtol=1e-5, atol=1e-6)
    model = MoEGPT(cfg, n_experts=4, k=2).eval()
    x, y = ids(50, 2, 16), ids(50, 2, 16)
    logits, loss = compiled(model)(x, y)
    ref_logits, ref_loss = model(x, y)
    torch.testing.assert_close(logits, ref_logits, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-5)


def test_a_host_sync_is_a_graph_break():
    """The test has teeth: the old style of check (int(idx.max())) fails under fullgraph."""

    class Checked(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(5, 3)

        def forward(self, idx):
            if int(idx.max()) >= 5:
                raise ValueError("idx out of range")
            return self.emb(idx)

    with pytest.raises(Exception):
        compiled(Checked())(torch.tensor([[1, 2]]))
