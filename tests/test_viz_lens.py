"""llmbook.viz.lens: the logit-lens table and grid, the patching pictures, and the explorers' renders."""

import html

import pytest
import torch
from matplotlib.figure import Figure

from llmbook.gpt import GPT, GPTConfig
from llmbook.viz.lens import lens_explorer, lens_figure, lens_html, lens_table, patching_explorer, patching_render


def test_lens_table_and_html():
    logits = torch.tensor([[[0.0, 1.0, 2.0]], [[3.0, 0.0, 0.0]]])  # 2 rows, 1 position, 3 tokens
    t = lens_table(logits, lambda i: "abc"[i], k=2)
    assert t["tokens"] == [[["c", "b"]], [["a", "b"]]]
    p = torch.softmax(torch.tensor([0.0, 1.0, 2.0]), 0)
    assert t["probs"][0][0][0] == round(float(p[2]), 4)
    page = lens_html(t, ["x"], title="T", mark="a")
    assert page.count('class="llmbook-lens-cell"') == 2 and "layer 1" in page and "embed" in page
    assert html.escape(f"c: {p[2]:.3f}\nb: {p[1]:.3f}") in page  # the hover text lists the top k
    assert "2px solid" in page  # the marked token is outlined
    assert isinstance(lens_figure(t, ["x"]), Figure)
    with pytest.raises(ValueError, match="positions"):
        lens_html(t, ["x", "y"])
    with pytest.raises(ValueError, match="k must be"):
        lens_table(logits, str, k=0)


def test_patching_render_and_explorers():
    grid = torch.tensor([[0.0, 1.0], [0.0, 0.2], [0.0, -0.1]])
    assert isinstance(patching_render(grid, ["a", "b"], 1), Figure)
    with pytest.raises(ValueError, match="layer must be"):
        patching_render(grid, ["a", "b"], 3)
    with pytest.raises(ValueError, match="one column per input"):
        patching_explorer(grid, ["a"])
    ex = patching_explorer(grid, ["a", "b"])
    assert isinstance(ex.render(layer=2), Figure)
    torch.manual_seed(0)
    m = GPT(GPTConfig.baby(vocab_size=27, n_layer=2, block_size=16)).eval()
    enc = lambda s: [ord(c) - 97 for c in s if "a" <= c <= "z"]
    lens = lens_explorer({"toy": (m, enc, lambda i: chr(97 + i))}, "abc")
    page = lens.render(text="hello", model="toy")
    assert page.count('class="llmbook-lens-cell"') == 3 * 5  # (2 layers + embedding) x 5 positions
    with pytest.raises(ValueError, match="prompt"):
        lens.render(text="", model="toy")
    with pytest.raises(ValueError, match="no token"):
        lens.render(text="123", model="toy")
