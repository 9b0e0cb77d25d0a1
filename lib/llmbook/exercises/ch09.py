"""Checkers for the exercises of chapter 09, registered on import (see :mod:`llmbook.exercises`)."""

from __future__ import annotations

import torch

from ._core import _call, _cases, _is_placeholder, _NotAttempted, _prediction, _register, _seeded, _tgen

PAD = 0  # the pad id of 09.1's batches; it also occurs inside the answers, as a model's end-of-text token would


def _label_batch(rng):
    """A right-padded batch: input_ids (B, T), prompt_lens (B,) and lengths (B,)."""
    from ..post_training import pad_batch, sft_example
    V = rng.randint(5, 40)
    while True:
        shape = [(rng.randint(1, 7), rng.randint(1, 6)) for _ in range(rng.randint(2, 5))]
        if len({p + a for p, a in shape}) > 1:  # rows of different lengths: some padding
            break
    rows = []
    for i, (p, a) in enumerate(shape):
        answer = [rng.randrange(V) for _ in range(a)]
        if i == 0:
            answer[-1] = PAD  # the pad id as a real answer token, learned like any other
        rows.append(sft_example([rng.randrange(1, V) for _ in range(p)], answer))
    return pad_batch(rows, PAD)[0], torch.tensor([p for p, _ in shape]), torch.tensor([p + a for p, a in shape])


def _library_labels(x, prompt_lens, lengths):
    """The labels the library makes for the same rows (sft_example, then pad_batch)."""
    from ..post_training import pad_batch, sft_example
    rows = [sft_example(r[:p].tolist(), r[p:n].tolist()) for r, p, n in zip(x, prompt_lens.tolist(), lengths.tolist())]
    return pad_batch(rows, PAD)[1]


def _call_clone(answer, *args):
    """Call the reader's function on copies (it may write into its inputs); a list comes back as a tensor."""
    out = _call(answer, *(a.clone() if isinstance(a, torch.Tensor) else a for a in args))
    try:
        return out if isinstance(out, torch.Tensor) else torch.as_tensor(out)
    except (TypeError, ValueError, RuntimeError):
        return out  # not a tensor: the comparison reports the mismatch


@_register("09.1", "Mask a batch of labels", "complete",
           "def mask_labels(input_ids, prompt_lens, lengths):\n    return NotImplemented  # your code here")
def _ex_09_1(answer, rng, ctx):
    cases = [_label_batch(rng) for _ in range(5)]

    def positions(x):
        return torch.arange(x.shape[1])[None, :]  # (1, T)

    def keep_only(x, mask):
        return x.masked_fill(~mask, -100)
    return _cases(lambda *a: _call_clone(answer, *a), _library_labels, cases,
                  wrong=[(lambda x, p, n: keep_only(x, positions(x) >= p[:, None]),
                          "padding carries no loss either: -100 from position lengths[i] on"),
                         (lambda x, p, n: keep_only(x, positions(x) < n[:, None]),
                          "the prompt carries no loss: -100 on its positions too"),
                         (lambda x, p, n: keep_only(x, (positions(x) >= p[:, None]) & (x != PAD)),
                          "find the padding with lengths, not with the pad id: id 0 is also a real answer token "
                          "here (the first row's answer ends with it), and its label must stay"),
                         (lambda x, p, n: keep_only(x, (positions(x) > p[:, None]) & (positions(x) < n[:, None])),
                          "the answer starts at position prompt_lens[i]: its first token keeps its id"),
                         (lambda x, p, n: torch.cat([keep_only(x, (positions(x) >= p[:, None]) & (positions(x) < n[:, None]))[:, 1:],
                                                     torch.full((len(x), 1), -100)], 1),
                          "labels line up with input_ids (the loss shifts them): do not shift them yourself"),
                         (lambda x, p, n: (positions(x) >= p[:, None]) & (positions(x) < n[:, None]),
                          "return the labels themselves: the token id where the loss is taken, -100 elsewhere")],
                  hint="label t of row i is input_ids[i, t] when prompt_lens[i] <= t < lengths[i], else -100",
                  show=lambda a: f"input_ids={a[0].tolist()}, prompt_lens={a[1].tolist()}, lengths={a[2].tolist()}",
                  fmt=lambda v: repr(v.tolist()) if isinstance(v, torch.Tensor) else repr(v))


def _ipo_ref(pc, pr, rc, rr, tau):
    """IPO (Azar et al. 2023), as trl's loss_type="ipo": the mean of (h - 1 / (2 tau))^2 over the pairs."""
    h = (pc - rc) - (pr - rr)  # (n,): the policy's log-ratio margin over the reference's
    return ((h - 1 / (2 * tau)) ** 2).mean()


@_register("09.2", "IPO's loss: a bounded preference margin", "complete",
           "def ipo_loss(policy_chosen, policy_rejected, ref_chosen, ref_rejected, tau):\n"
           "    return NotImplemented  # your code here")
def _ex_09_2(answer, rng, ctx):
    cases = []
    for _ in range(5):
        g = _tgen(rng)
        n = rng.randint(2, 7)
        logps = [-torch.rand(n, generator=g) * 30 for _ in range(4)]  # sequence log-probabilities, <= 0
        cases.append((*logps, float(rng.choice([0.05, 0.1, 0.5, 1.0]))))

    def margin(pc, pr, rc, rr):
        return (pc - rc) - (pr - rr)
    return _cases(answer, _ipo_ref, cases, rel=1e-5,
                  wrong=[(lambda pc, pr, rc, rr, t: ((margin(pc, pr, rc, rr) - 1 / t) ** 2).mean(),
                          "IPO's target for the margin is 1 / (2 tau), not 1 / tau"),
                         (lambda pc, pr, rc, rr, t: ((pc - pr - 1 / (2 * t)) ** 2).mean(),
                          "the margin is measured against the reference: subtract ref_chosen - ref_rejected"),
                         (lambda pc, pr, rc, rr, t: -torch.nn.functional.logsigmoid(t * margin(pc, pr, rc, rr)).mean(),
                          "that is DPO's loss, which keeps falling as the margin grows: IPO regresses the margin "
                          "onto a fixed target"),
                         (lambda pc, pr, rc, rr, t: ((margin(pc, pr, rc, rr) - 1 / (2 * t)) ** 2).sum(),
                          "average over the pairs, as dpo_loss does"),
                         (lambda pc, pr, rc, rr, t: ((margin(pc, pr, rc, rr) + 1 / (2 * t)) ** 2).mean(),
                          "the target is +1 / (2 tau): the chosen answer should gain on the rejected one")],
                  hint="h = (log pi(y_w) - log pi_ref(y_w)) - (log pi(y_l) - log pi_ref(y_l)); "
                       "the loss is the mean over the pairs of (h - 1 / (2 tau))^2",
                  show=lambda a: f"{len(a[0])} pairs, tau={a[4]:g}")


def _multi_lora_ref(rng):
    """The library's answer: one LoRALinear per adapter, each applied to the rows that name it."""
    from torch import nn

    from ..lora import LoRALinear

    def ref(x, W, b, A, B, adapter, alpha):
        K, r, d_in = A.shape
        out = torch.empty(len(x), W.shape[0], dtype=x.dtype)
        with torch.no_grad(), _seeded(rng):
            for k in range(K):
                layer = LoRALinear(nn.Linear(d_in, W.shape[0]), r=r, alpha=alpha).to(x.dtype)
                layer.base.weight.copy_(W)
                layer.base.bias.copy_(b)
                layer.lora_A.copy_(A[k])
                layer.lora_B.copy_(B[k])
                rows = adapter == k
                out[rows] = layer(x[rows])
        return out
    return ref


@_register("09.3", "Many LoRA adapters in one batch", "complete",
           "def multi_lora_forward(x, W, b, A, B, adapter, alpha):\n    return NotImplemented  # your code here")
def _ex_09_3(answer, rng, ctx):
    cases = []
    for _ in range(5):
        g = _tgen(rng)
        N, d_in, d_out, K, r = rng.randint(4, 9), rng.randint(3, 10), rng.randint(2, 9), rng.randint(2, 4), rng.randint(2, 4)
        alpha = float(rng.choice([1, 4, 8, 16, 32]))
        adapter = torch.tensor([k % K for k in range(N)])[torch.randperm(N, generator=g)]  # every adapter used
        f64 = dict(generator=g, dtype=torch.float64)  # float32 rounding of large terms that cancel failed atol 1e-6
        cases.append((torch.randn(N, d_in, **f64), torch.randn(d_out, d_in, **f64), torch.randn(d_out, **f64),
                      torch.randn(K, r, d_in, **f64), torch.randn(K, d_out, r, **f64), adapter, alpha))

    def update(x, A, B, adapter):  # (N, d_out): B A x of each row, with the row's own adapter
        return (B[adapter] @ (A[adapter] @ x[:, :, None]))[:, :, 0]

    def first_adapter(x, W, b, A, B, adapter, alpha):
        return x @ W.T + b + alpha / A.shape[1] * update(x, A, B, torch.zeros_like(adapter))
    return _cases(lambda *a: _call_clone(answer, *a),
                  _multi_lora_ref(rng), cases, rel=1e-5,
                  wrong=[(lambda x, W, b, A, B, k, al: x @ W.T + b + update(x, A, B, k),
                          "scale the low-rank update by alpha / r"),
                         (lambda x, W, b, A, B, k, al: x @ W.T + b + al * update(x, A, B, k),
                          "the scale is alpha / r (r = A.shape[1]), not alpha"),
                         (lambda x, W, b, A, B, k, al: x @ W.T + b + A.shape[1] / al * update(x, A, B, k),
                          "the scale is alpha / r, not r / alpha"),
                         (first_adapter, "row i uses adapter[i]'s A and B, not adapter 0's"),
                         (lambda x, W, b, A, B, k, al: x @ W.T + al / A.shape[1] * update(x, A, B, k),
                          "the frozen layer keeps its bias b"),
                         (lambda x, W, b, A, B, k, al: x @ W.T + b,
                          "that is the frozen layer alone: add each row's low-rank update")],
                  hint="for one row: W x + b + (alpha / r) B (A x), with the A and B of that row's adapter",
                  show=lambda a: (f"x of shape {tuple(a[0].shape)}, W {tuple(a[1].shape)}, A {tuple(a[3].shape)}, "
                                  f"B {tuple(a[4].shape)}, adapter={a[5].tolist()}, alpha={a[6]:g}"))


@_register("09.4", "Which LoRA matrix moves at the first step?", "predict",
           "answer = {'A': ..., 'B': ...}  # True: a non-zero gradient at the first training step")
def _ex_09_4(answer, rng, ctx):
    from torch import nn

    from ..lora import LoRALinear
    if isinstance(answer, dict) and any(_is_placeholder(v) for v in answer.values()):
        raise _NotAttempted()
    d_in, d_out, r = rng.randint(4, 32), rng.randint(4, 32), rng.randint(1, 4)
    with _seeded(rng):  # a fresh adapter, as apply_lora makes it
        layer = LoRALinear(nn.Linear(d_in, d_out), r=r, alpha=float(rng.choice([1, 8, 16])))
    g = _tgen(rng)
    x, target = torch.randn(5, d_in, generator=g), torch.randn(5, d_out, generator=g)
    torch.nn.functional.mse_loss(layer(x), target).backward()  # any loss of the layer's output
    measured = {"A": bool(layer.lora_A.grad.abs().max() > 0), "B": bool(layer.lora_B.grad.abs().max() > 0)}
    return _prediction(answer, measured, (d_in, d_out, r), what="the gradients of a fresh adapter after one backward pass",
                       wrong=[({"A": True, "B": True}, "A's gradient passes through B (the update is B A x): "
                                                       "look at B's value at the start"),
                              ({"A": False, "B": False}, "B's gradient is (alpha / r) times the output's gradient "
                                                         "times A x, and A starts random"),
                              ({"A": True, "B": False}, "the other way round: find the matrix that is zero at the start, "
                                                        "and the gradient it multiplies")],
                       hint="write h = W x + (alpha / r) B A x and take the gradient of each matrix at B = 0")
