"""The explorers' own error messages name the parameter but never echo a long input whole."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from llmbook.viz.intro import next_char_bar  # noqa: E402
from llmbook.viz.norm import norm_stats  # noqa: E402
from llmbook.viz.post_training import checkpoint_render, sample_answers  # noqa: E402
from llmbook.viz.tokenizers import render_compare  # noqa: E402

LONG = "9" * 5000


class _Uniform(torch.nn.Module):
    """A stand-in language model: uniform logits over 5 tokens, GPT's (logits, ...) return."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(5))

    def forward(self, ids):
        return (self.w.expand(*ids.shape, 5),)


@pytest.mark.parametrize("call,name", [
    (lambda: norm_stats(batch_size=LONG), "batch_size"),
    (lambda: next_char_bar(["a", "b"], [0.5, 0.5], top=LONG), "top"),
    (lambda: render_compare("abc", LONG, {"chars": list}), "examples"),
    (lambda: sample_answers(_Uniform(), [1, 2], 1, 1.0, LONG), "seed"),
    (lambda: sample_answers(_Uniform(), [1, 2], LONG, 1.0, 0), "n"),
    (lambda: checkpoint_render({"a": _Uniform(), "b": _Uniform()}, lambda s: [1] * len(s), lambda ids: "x",
                               "ab", "a", LONG, 1.0, 0), "against"),
])
def test_error_names_the_parameter_and_is_short(call, name):
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(name) and len(msg) < 200, msg
