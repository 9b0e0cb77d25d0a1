"""Render functions of llmbook.viz.attention, tested without a browser."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from llmbook.viz import figure_to_png  # noqa: E402
from llmbook.viz.attention import (  # noqa: E402
    MAX_LABELS,
    attention_explorer,
    attention_grid,
    attention_heatmap,
    rescale_attention,
)


def _att(L=2, H=3, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(H, T, T, generator=g).softmax(-1) for _ in range(L)]


def test_heatmap_and_grid_draw():
    w = _att()[0]
    toks = list("abcde")
    fig = attention_heatmap(w[0], toks, title="t")
    assert fig.axes[0].get_title() == "t" and len(figure_to_png(fig)) > 1000
    fig = attention_grid(w, toks, title="grid")
    assert sum(ax.get_visible() and bool(ax.images) for ax in fig.axes) == 3
    plt.close("all")
    # cross attention with query tokens
    fig = attention_heatmap(torch.rand(2, 5), toks, query_tokens=["x", "y"])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["x", "y"]
    plt.close(fig)


def test_long_inputs_label_at_most_max_labels():
    T = 300
    w = torch.rand(T, T).softmax(-1)
    fig = attention_heatmap(w, [f"t{i}" for i in range(T)])
    assert len(fig.axes[0].get_xticks()) <= MAX_LABELS
    plt.close(fig)


def test_rescale_identity_sharpen_flatten_causal():
    w = _att()[0]
    torch.testing.assert_close(rescale_attention(w, 1.0), w)
    ent = lambda p: -(p * p.clamp_min(1e-30).log()).sum(-1).mean()  # noqa: E731
    assert ent(rescale_attention(w, 3.0)) < ent(w) < ent(rescale_attention(w, 0.2))
    c = rescale_attention(w, 1.0, causal=True)
    assert (c.triu(1) == 0).all()
    torch.testing.assert_close(c.sum(-1), torch.ones(3, 5))


@pytest.mark.parametrize(
    "call, exc, word",
    [
        (lambda: attention_heatmap(torch.rand(3, 3), ["a", "b"]), ValueError, "tokens"),
        (lambda: attention_heatmap(torch.rand(3), ["a"]), ValueError, "weights"),
        (lambda: attention_heatmap("x", ["a"]), TypeError, "weights"),
        (lambda: attention_heatmap(torch.rand(2, 3), list("abc")), ValueError, "query_tokens"),
        (lambda: attention_grid(torch.rand(2, 2), ["a", "b"]), ValueError, "weights"),
        (lambda: attention_heatmap(torch.rand(2, 2), "ab"), TypeError, "tokens"),
        (lambda: rescale_attention(torch.rand(2, 2), 0.0), ValueError, "scale"),
        (lambda: rescale_attention(torch.rand(2, 3), 1.0, causal=True), ValueError, "square"),
        (lambda: rescale_attention(-torch.rand(2, 2)), ValueError, "non-negative"),
        (lambda: attention_explorer(), ValueError, "attentions"),
        (lambda: attention_explorer([torch.rand(2, 3)], list("abc")), ValueError, "attentions"),
        (lambda: attention_explorer(_att(), list("abc")), ValueError, "tokens"),
        (lambda: attention_explorer(_att(), list("abcde"), layer_names=["x"]), ValueError, "layer_names"),
    ],
)
def test_bad_input_raises_clear_errors(call, exc, word):
    with pytest.raises(exc, match=word):
        call()
    plt.close("all")


def test_explorer_fixed_data_controls_change_view():
    ex = attention_explorer(_att(), list("abcde"))
    assert set(ex.controls) == {"layer", "head", "causal", "scale"}
    render = lambda **kw: figure_to_png(ex.render(**{**ex.values(), **kw}))  # noqa: E731
    base = render()
    assert render(scale=3.0) != base
    assert render(causal=True) != base
    assert render(head="head 1") != base
    assert render(layer="layer 1") != base
    ex.controls["head"].value = "head 0"
    assert ex.last_error is None and len(ex.view.children) == 1


def test_explorer_recompute_and_empty_text_error():
    calls = []

    def recompute(text):
        calls.append(text)
        toks = text.split()
        T = len(toks)
        return [torch.ones(2, T, T) / T], toks

    ex = attention_explorer(recompute=recompute, text="a b c")
    assert "text" in ex.controls
    ex.controls["text"].value = "x y"
    assert ex.last_error is None
    ex.controls["text"].value = "   "
    assert isinstance(ex.last_error, ValueError) and "empty" in str(ex.last_error)
    assert "empty" in ex.error.value
    ex.controls["text"].value = "a b c"  # cached: recompute not called again
    assert calls.count("a b c") == 1 and ex.last_error is None
    with pytest.raises(ValueError, match="text"):
        attention_explorer(recompute=recompute, text="")
    plt.close("all")


def test_grid_long_input_is_readable_and_shares_one_scale():
    """27 tokens, 4 heads: labels on outer panels (every n-th), one colour bar, one scale."""
    from llmbook.viz.attention import GRID_LABELS

    T, H = 27, 4
    w = torch.randn(H, T, T, generator=torch.Generator().manual_seed(1)).softmax(-1)
    w[2] = 1.0 / T  # a flat head: with a shared scale it must look flat (dark), not full range
    toks = [f"t{i}" for i in range(T)]
    fig = attention_grid(w, toks, ncols=2)
    heads = [ax for ax in fig.axes if ax.images]
    assert len(heads) == H
    bars = [ax for ax in fig.axes if not ax.images and ax.get_ylabel().startswith("attention weight")]
    assert len(bars) == 1
    limits = {ax.images[0].get_clim() for ax in heads}
    assert limits == {(0.0, float(w.max()))}
    fig.canvas.draw()
    # bottom row shows key labels, top row hides them; first column shows query labels
    def shown(ax, axis):
        labels = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
        return [t.get_text() for t in labels if t.get_visible() and t.get_text()]
    bottom, top = heads[2], heads[0]
    assert 1 < len(shown(bottom, "x")) <= GRID_LABELS and shown(bottom, "x")[0] == "t0"
    assert shown(top, "x") == []
    assert 1 < len(shown(heads[0], "y")) <= GRID_LABELS and shown(heads[1], "y") == []
    plt.close(fig)
    # per-head scaling is still available
    fig = attention_grid(w, toks, shared_scale=False)
    assert len({ax.images[0].get_clim() for ax in fig.axes if ax.images}) > 1
    plt.close(fig)
    with pytest.raises(TypeError, match="shared_scale"):
        attention_grid(w, toks, shared_scale="yes")


# ----------------------------------------------------------------- the browser view (issue 18)
def test_explorer_sends_every_layer_once_and_selection_stays_in_the_browser():
    import numpy as np

    from llmbook.viz.frontend import FrontView

    atts = _att()
    ex = attention_explorer(atts, list("abcde"))
    (front,) = ex.view.children
    assert isinstance(front, FrontView) and front.spec["kind"] == "attention"
    np.testing.assert_allclose(np.array(front.spec["weights"]), torch.stack(atts).numpy(), rtol=1e-3)
    assert front.spec["causal_ok"] and front.spec["layer_names"] == ["layer 0", "layer 1"]
    spec = front.spec
    ex.controls["head"].value = "head 2"
    ex.controls["scale"].value = 2.5
    ex.controls["causal"].value = True
    assert (front.head, front.scale, front.causal) == (2, 2.5, True) and front.spec is spec
    front.layer, front.head = 1, -1  # what the browser sends back
    assert ex.values() == {"layer": "layer 1", "head": "all heads", "scale": 2.5, "causal": True}
    with pytest.raises(ValueError, match="head must be one of"):
        ex.controls["head"].value = "head 7"


def test_cross_attention_has_no_causal_control():
    cross = [torch.rand(2, 3, 5).softmax(-1) for _ in range(2)]
    ex = attention_explorer(cross, list("abcde"), query_tokens=["x", "y", "z"])
    assert "causal" not in ex.controls and ex.last_error is None
    assert ex.front.spec["causal_ok"] is False and ex.front.spec["queries"] == ["x", "y", "z"]
    ex.controls["head"].value = "head 1"
    plt.close(ex.render(**ex.values()))  # the static picture needs no causal value either


def test_recompute_is_called_once_per_text_and_may_return_byte_tokens():
    from llmbook.viz.attention import byte_token_labels

    calls = []

    def recompute(text):
        calls.append(text)
        pieces = [p for p in text.encode()]  # one byte per token: splits every Chinese character
        T = len(pieces)
        return [torch.ones(1, T, T) / T], [bytes([b]) for b in pieces]

    ex = attention_explorer(recompute=recompute, text="今a")
    assert ex.front.spec["keys"] == ["今[:1]", "今[1:2]", "今[2:]", "a"]
    ex.controls["head"].value = "head 0"
    ex.controls["scale"].value = 3.0
    assert calls == ["今a"]  # display-only controls never re-run the model
    ex.controls["text"].value = "b"
    ex.controls["text"].value = "今a"
    assert calls == ["今a", "b"]
    assert byte_token_labels([b"a", "\u00e9".encode()[:1], "\u00e9".encode()[1:]]) == ["a", "\u00e9[:1]", "\u00e9[1:]"]
    with pytest.raises(TypeError, match="pieces"):
        byte_token_labels(["not bytes"])


def test_gpt2_token_bytes_round_trips_every_byte():
    from llmbook.viz.attention import _gpt2_byte_decoder, gpt2_token_bytes

    encoder = {b: c for c, b in _gpt2_byte_decoder().items()}
    assert len(encoder) == 256
    assert gpt2_token_bytes("".join(encoder[b] for b in range(256))) == bytes(range(256))
    assert gpt2_token_bytes("Ġthe") == b" the"
