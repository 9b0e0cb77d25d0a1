"""Checkers for the exercises of chapter 04, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import torch

from ._core import _cases, _Fail, _is_placeholder, _prediction, _register, _report, _Result, _seeded, _tgen


@_register("04.1", "Parameters of one encoder layer", "derive",
           "def encoder_layer_params(d, d_ff):\n    return NotImplemented")
def _ex_04_1(answer, rng, ctx):
    from ..transformer import EncoderLayer
    def ref(d, d_ff):  # small sizes built on the CPU (the meta device's first init is slow)
        return sum(p.numel() for p in EncoderLayer(d, 1, d_ff).parameters())
    cases = [(rng.randint(2, 96), rng.randint(2, 384)) for _ in range(5)]
    return _cases(answer, ref, cases,
                  wrong=[(lambda d, f: 4 * d * d + 2 * d * f, "every Linear layer has a bias, and each LayerNorm a gain and a shift"),
                         (lambda d, f: 4 * (d * d + d) + (d * f + f) + (f * d + d) + 2 * d, "each LayerNorm has 2 d parameters (gain a and shift b)"),
                         (lambda d, f: 4 * (d * d + d) + (d * f + f) + (f * d + d), "count the two LayerNorms")],
                  show=lambda a: f"d={a[0]}, d_ff={a[1]}")


@_register("04.2", "LayerNorm of a negated, shifted input", "predict",
           "answer = ...  # s in LN(alpha x + c) = s * LN(x) for alpha < 0")
def _ex_04_2(answer, rng, ctx):
    from ..layers import LayerNorm
    ln = LayerNorm(16, eps=0.0).double()
    x = torch.randn(5, 16, dtype=torch.float64, generator=_tgen(rng))
    alpha, c = -rng.uniform(0.1, 50), rng.uniform(-10, 10)
    with torch.no_grad():
        a, b = ln(alpha * x + c), ln(x)
    measured = float((a * b).sum() / (b * b).sum())  # the s that best maps LN(x) to LN(alpha x + c)
    measured = round(measured, 6)
    return _prediction(answer, measured, ((alpha, c),), what=f"LayerNorm on fresh data with alpha = {alpha:.3g}",
                       wrong=[(1, "the mean absorbs c and the standard deviation absorbs |alpha|, but the sign stays"),
                              (alpha, "the standard deviation is positive whatever the sign of alpha")],
                       hint="divide out the mean and the standard deviation of alpha x + c")


@_register("04.3", "RMSNorm from scratch", "complete",
           "def rms_norm(x, eps=1e-6):\n    return NotImplemented  # over the last dimension, no gain")
def _ex_04_3(answer, rng, ctx):
    import torch.nn.functional as F
    def ref(x, eps):
        return F.rms_norm(x, (x.shape[-1],), eps=eps)
    # inputs with a large mean, so that subtracting it (LayerNorm) is visibly wrong
    cases = [(torch.randn(rng.randint(1, 4), rng.randint(2, 6), rng.randint(2, 12), dtype=torch.float64, generator=_tgen(rng)) * 3 + 2,
              rng.choice([1e-6, 0.1, 1.0])) for _ in range(4)]
    def layer_norm(x, eps):
        return (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + eps)
    def eps_outside(x, eps):
        return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps)
    def l2_norm(x, eps):
        return x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps)
    def over_batch(x, eps):
        return x / torch.sqrt(x.pow(2).mean(0, keepdim=True) + eps)
    return _cases(answer, ref, cases, rel=1e-6,
                  wrong=[(layer_norm, "RMSNorm subtracts no mean: divide x by its root mean square only"),
                         (eps_outside, "eps goes inside the square root: sqrt(mean(x^2) + eps)"),
                         (l2_norm, "the mean of the squares, not their sum: the output's root mean square is 1, not its length"),
                         (over_batch, "normalise each token over its features (the last dimension)")],
                  show=lambda a: f"x of shape {tuple(a[0].shape)}, eps={a[1]}")


@_register("04.4", "The decoder must not see the future", "predict",
           "answer = ...  # the positions (0..6) whose logits change when input token 4 changes")
def _ex_04_4(answer, rng, ctx):
    from ..gpt import GPT, GPTConfig
    with _seeded(rng):
        m = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=8, d_ff=16)).eval()
    a = torch.randint(0, 11, (1, 7), generator=_tgen(rng))
    b = a.clone(); b[0, 4] = (b[0, 4] + 1) % 11
    with torch.no_grad():
        d = (m(a)[0] - m(b)[0]).abs().amax(-1)[0]
    measured = [i for i in range(7) if float(d[i]) > 1e-6]
    if not _is_placeholder(answer) and not isinstance(answer, (list, tuple, range)):
        raise _Fail(f"expected a list of positions, got {type(answer).__name__}", "write e.g. [2, 3]")
    return _prediction(list(answer) if isinstance(answer, (tuple, range)) else answer, measured, (a,),
                       what="a fresh causal decoder",
                       wrong=[([4], "position 5 and 6 attend to position 4 too"),
                              ([5, 6], "position 4 sees its own input token"),
                              (list(range(7)), "a causal mask hides later positions from earlier ones")],
                       hint="position i attends to positions 0..i")


# views whose BatchNorm change the chapter prints or draws: the explorer's default view (its static
# figure) and the batches of 2, 8 and 64 padded to 8 (seed 0) printed above it
SHOWN_04_5 = {(4, 16, 0), (2, 8, 0), (8, 8, 0), (64, 8, 0), (64, 24, 0)}


@_register("04.5", "Report BatchNorm's change from the normalisation explorer", "widget",
           "answer = {'batch_size': ..., 'padded_length': ..., 'seed': ..., 'bn_change': ...}")
def _ex_04_5(answer, rng, ctx):
    from ..viz.norm import norm_stats
    r = _report(answer, ["batch_size", "padded_length", "seed", "bn_change"])
    settings = (int(r["batch_size"]), int(r["padded_length"]), int(r["seed"]))
    if settings in SHOWN_04_5:
        raise _Fail(f"batch {settings[0]}, padded to {settings[1]}, seed {settings[2]} is a view the chapter already shows",
                    "move the sliders to settings of your own (the default view and section 2's printed batches are taken)")
    s = norm_stats(int(r["batch_size"]), int(r["padded_length"]), int(r["seed"]))
    got = float(r["bn_change"])
    if abs(got - s["bn_change"]) <= 0.0015:
        return _Result(f"BatchNorm moves x0 by up to {s['bn_change']:.3f} in that batch, LayerNorm by {s['ln_change']:.1g}", (r,))
    h = ("that is LayerNorm's change; BatchNorm's is in the middle panel" if abs(got - s["ln_change"]) <= 0.0015
         else "read the 'max change' in the BatchNorm panel's title for the settings you report")
    raise _Fail(f"{got:.3f} is {'too high' if got > s['bn_change'] else 'too low'}", h)
