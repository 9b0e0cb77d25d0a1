"""The whole-model attention view (llmbook.viz.model_view), tested without a browser."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from llmbook.viz import figure_to_png  # noqa: E402
from llmbook.viz.model_view import _mosaic, model_view, model_view_figure  # noqa: E402


def _att(L=3, H=4, T=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(H, T, T, generator=g).mul(2).softmax(-1) for _ in range(L)]


TOKS = ["the", "cat", "sat", "on", "mats"]


def _image_axes(fig):
    return [ax for ax in fig.axes if ax.images]


def test_figure_draws_grid_with_labels_and_zoom_with_tokens():
    atts = _att()
    fig = model_view_figure(atts, TOKS, layer=2, head=1)
    grid, zoom = _image_axes(fig)
    # one mosaic: 3 layers x 4 heads of 5 x 5, separated by one blank pixel
    assert grid.images[0].get_array().shape == (3 * 6 - 1, 4 * 6 - 1)
    assert [t.get_text() for t in grid.get_yticklabels()] == ["layer 0", "layer 1", "layer 2"]
    assert [t.get_text() for t in grid.get_xticklabels()] == ["0", "1", "2", "3"]
    # the zoom panel is the selected head, with the tokens on both axes
    np.testing.assert_allclose(zoom.images[0].get_array(), atts[2][1].double().numpy())
    assert [t.get_text() for t in zoom.get_xticklabels()] == TOKS
    assert [t.get_text() for t in zoom.get_yticklabels()] == TOKS
    assert zoom.get_title() == "layer 2, head 1"
    assert len(figure_to_png(fig)) > 5000


def test_one_shared_colour_scale_and_frame_on_selection():
    atts = _att()
    atts[1][3] = torch.eye(5)  # one head with weights of exactly 1
    fig = model_view_figure(atts, TOKS, layer=1, head=3)
    grid = _image_axes(fig)[0]
    assert grid.images[0].get_clim() == (0.0, 1.0)  # the largest weight anywhere in the model
    frame = [p for p in grid.patches][-1]
    assert frame.get_xy() == (3 * 6 - 1.0, 1 * 6 - 1.0) and frame.get_width() == 6
    plt.close(fig)


def test_mosaic_places_every_head():
    A = np.arange(2 * 3 * 2 * 2, dtype=float).reshape(2, 3, 2, 2)
    m = _mosaic(A)
    for li in range(2):
        for h in range(3):
            np.testing.assert_array_equal(m[li * 3: li * 3 + 2, h * 3: h * 3 + 2], A[li, h])
    assert np.isnan(m[2]).all() and np.isnan(m[:, 2]).all()


def test_cross_attention_and_batch_dim_and_layer_names():
    g = torch.Generator().manual_seed(1)
    atts = [torch.rand(1, 2, 3, 5, generator=g).softmax(-1) for _ in range(2)]  # leftover batch of 1
    fig = model_view_figure(atts, TOKS, query_tokens=["x", "y", "z"], layer_names=["enc", "dec"], layer=1)
    grid, zoom = _image_axes(fig)
    assert [t.get_text() for t in zoom.get_yticklabels()] == ["x", "y", "z"]
    assert [t.get_text() for t in grid.get_yticklabels()] == ["enc", "dec"]
    plt.close(fig)


def test_widget_selection_changes_the_view():
    """Layer and head live in the browser view (FrontView traits); Python reads and sets them."""
    from llmbook.viz.frontend import FrontView

    atts = _att()
    mv = model_view(atts, TOKS)
    assert set(mv.controls) == {"layer", "head"}
    assert "llmbook-view" in mv.view._dom_classes
    (front,) = mv.view.children
    assert isinstance(front, FrontView) and front.spec["kind"] == "model_view"
    # the data is sent once: every layer x head, rounded to 4 significant digits
    sent = np.array(front.spec["weights"])
    assert sent.shape == (3, 4, 5, 5)
    np.testing.assert_allclose(sent, torch.stack(atts).numpy(), rtol=1e-3)
    assert front.spec["layer_names"] == ["layer 0", "layer 1", "layer 2"] and front.spec["keys"] == TOKS
    spec_before = front.spec
    mv.controls["head"].value = "head 2"
    mv.controls["layer"].value = "layer 1"
    assert (front.layer, front.head) == (1, 2) and front.spec is spec_before  # no new data for a selection
    front.head = 3  # as the browser would: Python sees it
    assert mv.values() == {"layer": "layer 1", "head": "head 3"}
    # the render function (static picture) draws the current selection: zoom panel = layer 1, head 3
    fig = mv.render(**mv.values())
    np.testing.assert_allclose(_image_axes(fig)[1].images[0].get_array(), atts[1][3].double().numpy())
    plt.close(fig)


def test_widget_rejects_a_bad_selection_naming_the_control():
    mv = model_view(_att(), TOKS, layer=1, head=3)
    assert mv.values() == {"layer": "layer 1", "head": "head 3"}
    with pytest.raises(ValueError, match="head must be one of"):
        mv.controls["head"].value = "head 9"  # a head the model does not have
    with pytest.raises(ValueError, match="layer must be one of"):
        mv.controls["layer"].value = "layer 7"
    assert mv.values() == {"layer": "layer 1", "head": "head 3"}
    # a selection out of range coming from the browser is clamped, never an index error
    mv.front.head = 99
    assert mv.values()["head"] == "head 3"
    with pytest.raises(ValueError, match="head"):
        mv.render(layer="layer 0", head="head 9")


@pytest.mark.parametrize(
    "kwargs, exc, word",
    [
        (dict(attentions=[], tokens=TOKS), ValueError, "attentions"),
        (dict(attentions="nope", tokens=TOKS), ValueError, "attentions"),
        (dict(attentions=[torch.rand(5, 5)], tokens=TOKS), ValueError, "attentions[0]"),
        (dict(attentions=[torch.rand(2, 5, 5), torch.rand(3, 5, 5)], tokens=TOKS), ValueError, "heads"),
        (dict(attentions=[torch.rand(2, 5, 5), torch.rand(2, 4, 4)], tokens=TOKS), ValueError, "attentions[1]"),
        (dict(attentions=[torch.full((2, 5, 5), float("nan"))], tokens=TOKS), ValueError, "NaN"),
        (dict(attentions=[-torch.rand(2, 5, 5)], tokens=TOKS), ValueError, "non-negative"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens=None), ValueError, "tokens"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens=TOKS[:3]), ValueError, "tokens"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens="the cat"), TypeError, "tokens"),
        (dict(attentions=[torch.rand(2, 3, 5)], tokens=TOKS), ValueError, "query_tokens"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens=TOKS, layer=1), ValueError, "layer"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens=TOKS, head=2), ValueError, "head"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens=TOKS, head=-1), ValueError, "head"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens=TOKS, layer=0.0), TypeError, "layer"),
        (dict(attentions=[torch.rand(2, 5, 5)], tokens=TOKS, layer_names=["a", "b"]), ValueError, "layer_names"),
    ],
)
@pytest.mark.parametrize("fn", [model_view_figure, model_view])
def test_bad_inputs_name_the_parameter(fn, kwargs, exc, word):
    with pytest.raises(exc, match=word.replace("[", r"\[").replace("]", r"\]")):
        fn(**kwargs)
    plt.close("all")
