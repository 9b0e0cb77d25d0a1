"""llmbook.viz.diagrams: every architecture drawing renders, names real classes, fits its figure."""

import importlib
import io
import itertools
import warnings

import matplotlib.pyplot as plt
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.patches import FancyBboxPatch
from matplotlib.text import Text
from PIL import Image

from llmbook.gpt import GPT, GPTConfig
from llmbook.viz import figure_to_png
from llmbook.viz import diagrams as D

# diagram -> (symbols and labels that must be written in it, (module, name) of every class it names)
EXPECTED = {
    "three_families": (
        ["Encoder-only (BERT)", "Decoder-only (GPT)", "Encoder-decoder (T5)", "cross-attention", "causal mask",
         "bidirectional"],
        [("llmbook.bert", "Bert"), ("llmbook.gpt", "GPT"), ("llmbook.transformer", "Transformer"),
         ("llmbook.attention", "causal_mask")]),
    "attention_diagram": (
        ["(B, h, T, d_k)", "(B, h, T, T)", "(B, T, d_model)", "√d_k", "Softmax", "W_O", "h = 8", "d_k = 64",
         "d_model = 512", "concat"],
        [("llmbook.attention", "MultiHeadAttention"), ("llmbook.attention", "scaled_dot_product_attention"),
         ("llmbook.attention", "causal_mask")]),
    "transformer_block": (
        ["N ×", "× N", "Add & Norm", "Masked multi-head self-attention", "cross-attention", "d_model", "(B, S)",
         "(B, T, V)", "Positional encoding"],
        [("llmbook.transformer", "Transformer"), ("llmbook.transformer", "EncoderLayer"),
         ("llmbook.transformer", "DecoderLayer"), ("llmbook.layers", "AddNorm"), ("llmbook.layers", "FeedForward"),
         ("llmbook.attention", "MultiHeadAttention"), ("llmbook.positional", "SinusoidalPositionalEncoding")]),
    "post_vs_pre_ln": (
        ["Post-LN", "Pre-LN", "residual", "norm_first=True", "pre_norm=False"],
        [("llmbook.layers", "LayerNorm"), ("llmbook.layers", "AddNorm"), ("llmbook.layers", "FeedForward"),
         ("llmbook.attention", "MultiHeadAttention"), ("llmbook.transformer", "EncoderLayer"),
         ("llmbook.bert", "BertLayer"), ("llmbook.gpt", "GPTConfig")]),
    "gpt_stack": (
        ["N ×", "(B, T, d_model)", "(B, T, V)", "(B, h, T, d_k)", "4·d_model", "GPT.wte", "GPT.wpe", "GPT.lm_head",
         "GPT.ln_f", "Block.ln_1", "tied", "= 768", "124,439,808"],
        [("llmbook.gpt", "GPT"), ("llmbook.gpt", "Block"), ("llmbook.gpt", "CausalSelfAttention"),
         ("llmbook.gpt", "MLP"), ("llmbook.gpt", "GPTConfig")]),
    "bert_inputs": (
        ["[CLS]", "my", "cute", "[SEP]", "##ing", "[MASK]", "E_A", "E_B", "E_0", "E_10", "E_cute", "Token embeddings",
         "Segment embeddings", "Position embeddings", "IsNext", "dog", "play", "(B, T, d_model)"],
        [("llmbook.bert", "Bert"), ("llmbook.bert", "BertEmbeddings"), ("llmbook.bert", "BertLayer"),
         ("llmbook.bert", "MLMHead"), ("llmbook.bert", "NSPHead"), ("llmbook.bert", "BertForPreTraining"),
         ("llmbook.bert", "mask_tokens")]),
    "llama_block": (
        ["RMSNorm", "RoPE", "h = 9", "n_kv = 3", "(B, n_kv, T, d_k)", "(B, h, T, d_k)", "SiLU", "d_ff",
         "input_layernorm", "post_attention_layernorm", "q/k/v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        [("llmbook.llama", "Llama"), ("llmbook.llama", "LlamaBlock"), ("llmbook.llama", "RMSNorm"),
         ("llmbook.llama", "GroupedQueryAttention"), ("llmbook.llama", "SwiGLU"), ("llmbook.positional", "apply_rope")]),
}


def _renderer(fig):
    """The Agg renderer of a drawn figure (figure_to_png closes it, which detaches its canvas)."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
        fig.canvas.draw()
    return fig.canvas.get_renderer()


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


@pytest.fixture(scope="module")
def figures():
    """Each diagram drawn once for the whole module (drawing text with the CJK fallback font is slow)."""
    cache = {}
    yield cache
    for fig in cache.values():
        plt.close(fig)


def _drawn(figures, name):
    if name not in figures:
        # Any Matplotlib warning while drawing (a glyph missing from the fonts) fails the test.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fig = getattr(D, name)()
            fig.canvas.draw()
        figures[name] = fig
    return figures[name]


@pytest.fixture(params=sorted(EXPECTED))
def drawn(request, figures):
    return request.param, _drawn(figures, request.param)


def test_labels_and_real_class_names(drawn):
    name, fig = drawn
    texts = _texts(fig)
    labels, classes = EXPECTED[name]
    for label in labels:
        assert any(label in t for t in texts), f"{name}: no text contains {label!r}"
    for module, attr in classes:
        assert hasattr(importlib.import_module(module), attr), f"{name} names {module}.{attr}, which does not exist"
        assert any(attr in t for t in texts), f"{name}: {attr} is not named"
        assert any(module in t for t in texts), f"{name}: the footer does not name {module}"


def test_fonts_readable_and_nothing_cut_off(drawn):
    name, fig = drawn
    renderer = _renderer(fig)
    page = fig.bbox
    boxes = []
    for t in fig.findobj(Text):
        if not t.get_text() or not t.get_visible():
            continue
        assert t.get_fontsize() >= 8, (name, t.get_text(), t.get_fontsize())
        bb = t.get_window_extent(renderer)
        assert page.x0 - 1 <= bb.x0 and bb.x1 <= page.x1 + 1 and page.y0 - 1 <= bb.y0 and bb.y1 <= page.y1 + 1, \
            f"{name}: {t.get_text()!r} runs off the figure"
        boxes.append((t.get_text(), bb))
    for patch in fig.axes[0].patches:
        bb = patch.get_window_extent(renderer)
        assert page.x0 - 1 <= bb.x0 and bb.x1 <= page.x1 + 1 and page.y0 - 1 <= bb.y0 and bb.y1 <= page.y1 + 1, \
            f"{name}: a box runs off the figure"
    # No two pieces of text overlap (a shrink of 1 px forgives touching edges).
    for (a, ba), (b, bb) in itertools.combinations(boxes, 2):
        overlap = min(ba.x1, bb.x1) - max(ba.x0, bb.x0) > 1 and min(ba.y1, bb.y1) - max(ba.y0, bb.y0) > 1
        assert not overlap, f"{name}: {a!r} overlaps {b!r}"


def test_text_fits_inside_its_box(drawn):
    """Every label written inside a box stays inside it."""
    name, fig = drawn
    renderer = _renderer(fig)
    ax = fig.axes[0]
    patches = [(p, p.get_window_extent(renderer)) for p in ax.patches if isinstance(p, FancyBboxPatch)]
    for t in ax.texts:
        if not t.get_text():
            continue
        bb = t.get_window_extent(renderer)
        cx, cy = (bb.x0 + bb.x1) / 2, (bb.y0 + bb.y1) / 2
        # The smallest box whose area holds the text's centre is the one it labels.
        holders = [pb for _, pb in patches if pb.x0 < cx < pb.x1 and pb.y0 < cy < pb.y1]
        if not holders:
            continue
        pb = min(holders, key=lambda b: b.width * b.height)
        assert pb.x0 - 1 <= bb.x0 and bb.x1 <= pb.x1 + 1, f"{name}: {t.get_text()!r} is wider than its box"


def _box_colour(fig, label: str):
    """Face colour of the smallest box holding the text ``label``."""
    ax = fig.axes[0]
    renderer = _renderer(fig)
    text = next(t for t in ax.texts if t.get_text() == label)
    bb = text.get_window_extent(renderer)
    cx, cy = (bb.x0 + bb.x1) / 2, (bb.y0 + bb.y1) / 2
    holders = [p for p in ax.patches if isinstance(p, FancyBboxPatch)
               and p.get_window_extent(renderer).contains(cx, cy)]
    return min(holders, key=lambda p: p.get_window_extent(renderer).width).get_facecolor()


@pytest.mark.parametrize("kind, members", [
    ("attn", [("transformer_block", "MultiHeadAttention"), ("gpt_stack", "CausalSelfAttention"),
              ("llama_block", "GroupedQueryAttention"), ("attention_diagram", "out_proj")]),
    ("norm", [("transformer_block", "AddNorm"), ("gpt_stack", "Block.ln_1"), ("llama_block", "input_layernorm"),
              ("post_vs_pre_ln", "LayerNorm"), ("bert_inputs", "BertEmbeddings")]),
    ("ffn", [("transformer_block", "FeedForward"), ("gpt_stack", "MLP"), ("llama_block", "SwiGLU")]),
    ("embed", [("transformer_block", "Transformer.src_embed"), ("gpt_stack", "GPT.wte")]),
    ("pos", [("transformer_block", "SinusoidalPositionalEncoding"), ("gpt_stack", "GPT.wpe"),
             ("llama_block", "apply_rope")]),
    ("head", [("transformer_block", "Transformer.lm_head"), ("gpt_stack", "GPT.lm_head"), ("bert_inputs", "NSPHead"),
              ("bert_inputs", "MLMHead")]),
])
def test_same_kind_same_colour_in_every_diagram(kind, members, figures):
    colours = set()
    for name, label in members:
        colours.add(tuple(round(c, 4) for c in _box_colour(_drawn(figures, name), label)))
    assert len(colours) == 1, (kind, colours)
    want = D._mix(D.KIND_COLOURS[kind], 0.72)  # the tint every box of this kind is filled with
    assert colours.pop()[:3] == tuple(round(c, 4) for c in want)


def test_kinds_have_distinct_colours():
    assert len(set(D.KIND_COLOURS.values())) == len(D.KIND_COLOURS)


def test_arguments_reach_the_drawing():
    fig = D.attention_diagram(d_model=64, n_heads=4, T=10, B=2)
    texts = _texts(fig)
    assert any("= (2, 4, 10, 16)" in t for t in texts)  # (B, h, T, d_k) with the numbers
    plt.close(fig)
    fig = D.gpt_stack(n_layer=4, d_model=128, n_head=4, block_size=64, vocab_size=65)
    assert any("= 128" in t for t in _texts(fig)) and any("T ≤ 64" in t for t in _texts(fig))
    plt.close(fig)
    fig = D.bert_inputs(["[CLS]", "the", "cat", "[SEP]", "sat", "[SEP]"], masked=[2])
    texts = _texts(fig)
    assert "E_cat" not in texts and "E_[MASK]" in texts and "cat" in texts  # masked, then predicted
    assert texts.count("E_A") == 4 and texts.count("E_B") == 2  # segment A up to the first [SEP]
    plt.close(fig)
    fig = D.llama_block(n_heads=8, n_kv_heads=2)
    assert any("each K/V head serves h / n_kv = 4" in t for t in _texts(fig))
    plt.close(fig)
    fig = D.transformer_block(n_layers=6)
    assert "6 ×" in _texts(fig)
    plt.close(fig)
    fig = D.three_families(n_tokens=3)
    assert "$x_3$" in _texts(fig) and "$x_4$" not in _texts(fig)
    plt.close(fig)


def test_parameter_count_matches_the_model():
    for cfg in (GPTConfig.baby(), GPTConfig(n_layer=2, d_model=64, n_head=4, d_ff=256, block_size=32, vocab_size=100)):
        model = GPT(cfg)
        want = sum(p.numel() for p in model.parameters())
        assert D.gpt_parameter_count(cfg.n_layer, cfg.d_model, cfg.vocab_size, cfg.block_size) == want


@pytest.mark.parametrize("call, error, param", [
    (lambda: D.three_families(n_tokens=1), ValueError, "n_tokens"),
    (lambda: D.three_families(n_tokens=2.5), TypeError, "n_tokens"),
    (lambda: D.attention_diagram(d_model=0), ValueError, "d_model"),
    (lambda: D.attention_diagram(d_model=100, n_heads=8), ValueError, "n_heads"),
    (lambda: D.attention_diagram(n_heads=True), TypeError, "n_heads"),
    (lambda: D.attention_diagram(T=""), ValueError, "T"),
    (lambda: D.attention_diagram(B=-1), ValueError, "B"),
    (lambda: D.transformer_block(n_layers=0), ValueError, "n_layers"),
    (lambda: D.transformer_block(n_layers=None), TypeError, "n_layers"),
    (lambda: D.gpt_stack(n_layer=0), ValueError, "n_layer"),
    (lambda: D.gpt_stack(d_model=100, n_head=12), ValueError, "n_head"),
    (lambda: D.gpt_stack(vocab_size="50257"), TypeError, "vocab_size"),
    (lambda: D.gpt_stack(block_size=-4), ValueError, "block_size"),
    (lambda: D.bert_inputs("[CLS] my dog"), TypeError, "tokens"),
    (lambda: D.bert_inputs(["my", "dog"]), ValueError, "tokens"),
    (lambda: D.bert_inputs(["[CLS]"] + ["a"] * 11), ValueError, "tokens"),
    (lambda: D.bert_inputs(masked=[11]), ValueError, "masked"),
    (lambda: D.bert_inputs(masked=[0]), ValueError, "masked"),
    (lambda: D.bert_inputs(masked=3), TypeError, "masked"),
    (lambda: D.llama_block(n_heads=9, n_kv_heads=2), ValueError, "n_kv_heads"),
    (lambda: D.llama_block(n_heads=4, n_kv_heads=8), ValueError, "n_kv_heads"),
    (lambda: D.llama_block(n_heads=0), ValueError, "n_heads"),
    (lambda: D.llama_block(n_heads=16), ValueError, "n_heads"),
    (lambda: D.gpt_parameter_count(0, 8, 8, 8), ValueError, "n_layer"),
])
def test_bad_arguments_name_the_parameter(call, error, param):
    before = plt.get_fignums()
    with pytest.raises(error, match=param):
        call()
    assert plt.get_fignums() == before  # arguments are checked before anything is drawn


def test_renders_to_png_at_notebook_width(drawn):
    """Last in the module: figure_to_png closes the figure the other tests share."""
    name, fig = drawn
    width, height = fig.get_size_inches()
    assert 9.0 <= width <= 10.0 and 3.0 <= height <= 9.0, (name, width, height)
    png = figure_to_png(fig)
    image = Image.open(io.BytesIO(png))
    assert image.size == (round(width * fig.dpi), round(height * fig.dpi))
    # Not a blank page: a drawing has many distinct colours (boxes of several kinds, text).
    assert len(image.convert("RGB").getcolors(maxcolors=1 << 20)) > 50


def test_chinese_tokens_draw_without_missing_glyphs():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Matplotlib warns "Glyph ... missing from font(s)"
        fig = D.bert_inputs(["[CLS]", "我", "爱", "北京", "[SEP]", "天安门", "[SEP]"], masked=[3])
        figure_to_png(fig)
    assert "E_北京" not in _texts(fig) and "北京" in _texts(fig) and "E_天安门" in _texts(fig)
