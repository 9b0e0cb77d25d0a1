"""llmbook.post_training's DPO loss: a hand computation, the Bradley-Terry view, trl's loss code, bad inputs."""

import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from llmbook.post_training import (IGNORE_INDEX, bradley_terry, dpo_loss, sequence_logprobs, token_kl)


def test_hand_computation():
    # one pair: log pi(y_w) = -1, log pi(y_l) = -2, the reference gives both -1.5; beta = 0.5
    out = dpo_loss(torch.tensor([-1.0]), torch.tensor([-2.0]), torch.tensor([-1.5]), torch.tensor([-1.5]), beta=0.5)
    # rewards: 0.5 * (-1 + 1.5) = 0.25 and 0.5 * (-2 + 1.5) = -0.25; loss = -log sigmoid(0.5) = log(1 + e^-0.5)
    assert out.chosen_rewards.tolist() == [0.25] and out.rejected_rewards.tolist() == [-0.25]
    assert math.isclose(float(out.loss), math.log1p(math.exp(-0.5)), rel_tol=1e-6)
    assert math.isclose(float(out.margin), 0.5, rel_tol=1e-6)


def test_is_minus_log_bradley_terry_and_mean_over_pairs():
    g = torch.Generator().manual_seed(0)
    pc, pr, rc, rr = (torch.randn(7, generator=g) * 3 - 10 for _ in range(4))
    out = dpo_loss(pc, pr, rc, rr, beta=0.2)
    manual = -torch.log(bradley_terry(0.2 * (pc - rc), 0.2 * (pr - rr))).mean()
    torch.testing.assert_close(out.loss, manual)
    # only differences matter: adding the same constant to both policy log-probs (a prompt-only term) changes nothing
    torch.testing.assert_close(dpo_loss(pc + 3, pr + 3, rc, rr, beta=0.2).loss, out.loss)


def test_gradient_raises_chosen_and_lowers_rejected():
    pc, pr = torch.tensor([-3.0], requires_grad=True), torch.tensor([-3.0], requires_grad=True)
    dpo_loss(pc, pr, torch.tensor([-3.0]), torch.tensor([-3.0]), beta=1.0).loss.backward()
    # d loss / d pc = -beta sigmoid(-delta) = -0.5 at delta = 0
    assert math.isclose(float(pc.grad), -0.5, rel_tol=1e-6) and math.isclose(float(pr.grad), 0.5, rel_tol=1e-6)


def test_same_loss_as_trls_dpo_trainer_code():
    trl = pytest.importorskip("trl", reason="trl is not installed (pip install trl; it is in the test extras)")
    from trl import DPOTrainer

    if not hasattr(DPOTrainer, "_compute_loss"):
        pytest.skip(f"trl {trl.__version__} has no DPOTrainer._compute_loss to call on given log-probabilities")
    g = torch.Generator().manual_seed(1)
    N, T, beta = 5, 6, 0.3
    per_token = -torch.rand(2 * N, T - 1, generator=g) * 2           # rows: N chosen, then N rejected
    ref_c, ref_r = -torch.rand(N, generator=g) * 8, -torch.rand(N, generator=g) * 8
    # trl's loss code reads the policy's per-token log-probs from the model output; everything else is bookkeeping
    fake_output = SimpleNamespace(log_probs=per_token, entropy=torch.zeros_like(per_token),
                                  mean_logits=torch.zeros_like(per_token), is_top1=torch.zeros_like(per_token, dtype=torch.bool),
                                  log_sum_sq_probs=torch.zeros_like(per_token), aux_loss=torch.tensor(0.0))
    accel = SimpleNamespace(device=torch.device("cpu"), gather_for_metrics=lambda t: t, gather=lambda t: t)
    stub = SimpleNamespace(model=SimpleNamespace(training=False), accelerator=accel, aux_loss_enabled=False, ld_alpha=None,
                           precompute_ref_logps=True, f_divergence_type="reverse_kl", loss_types=["sigmoid"],
                           loss_weights=[1.0], beta=beta, use_weighting=False, label_smoothing=0.0,
                           _metrics={"train": defaultdict(list), "eval": defaultdict(list)}, _total_train_tokens=0,
                           _tp_size=1, args=SimpleNamespace())
    inputs = {"input_ids": torch.zeros(2 * N, T, dtype=torch.long), "attention_mask": torch.ones(2 * N, T, dtype=torch.long),
              "completion_mask": torch.ones(2 * N, T, dtype=torch.long), "ref_chosen_logps": ref_c, "ref_rejected_logps": ref_r}
    try:
        theirs = DPOTrainer._compute_loss(stub, lambda **kw: fake_output, inputs, return_outputs=False)
    except (AttributeError, KeyError, TypeError) as err:  # a trl whose private loss code needs more than this stub
        pytest.skip(f"trl {trl.__version__}'s DPOTrainer._compute_loss needs more trainer state: {err!r}")
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    logps = per_token.sum(1)
    ours = dpo_loss(logps[:N], logps[N:], ref_c, ref_r, beta=beta)
    torch.testing.assert_close(ours.loss, theirs, rtol=1e-6, atol=1e-6)
    assert stub._metrics["eval"]["rewards/margins"] == pytest.approx([float(ours.margin)], rel=1e-5)


def test_sequence_logprobs_and_token_kl():
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(2, 5, 7, generator=g)
    labels = torch.tensor([[IGNORE_INDEX, IGNORE_INDEX, 3, 4, 5], [IGNORE_INDEX, 1, 2, IGNORE_INDEX, IGNORE_INDEX]])
    lp = logits.log_softmax(-1)
    expected = torch.stack([lp[0, 1, 3] + lp[0, 2, 4] + lp[0, 3, 5], lp[1, 0, 1] + lp[1, 1, 2]])
    torch.testing.assert_close(sequence_logprobs(logits, labels), expected)
    assert float(token_kl(logits, logits, labels)) == pytest.approx(0.0, abs=1e-6)
    other = torch.randn(2, 5, 7, generator=g)
    p, q = lp[0, 1].exp(), other.log_softmax(-1)[0, 1].exp()
    kl01 = float((p * (p.log() - q.log())).sum())
    only_one = torch.full_like(labels, IGNORE_INDEX)
    only_one[0, 2] = 3                                               # one labelled position: row 0 predicted at t = 1
    assert float(token_kl(logits, other, only_one)) == pytest.approx(kl01, rel=1e-5)


@pytest.mark.parametrize("bad, word", [
    ((torch.zeros(0),) * 4, "policy_chosen_logps is empty"),
    ((torch.zeros(3), torch.zeros(2), torch.zeros(3), torch.zeros(3)), "policy_rejected_logps has shape"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(3, 1), torch.zeros(3)), "ref_chosen_logps must be a 1-D"),
    ((torch.zeros(3), torch.zeros(3), torch.zeros(3), [0.0, 0.0, 0.0]), "ref_rejected_logps must be a 1-D"),
])
def test_bad_inputs_name_the_parameter(bad, word):
    with pytest.raises(ValueError, match=word):
        dpo_loss(*bad)


@pytest.mark.parametrize("beta", [0, -0.1, float("inf"), True])
def test_bad_beta(beta):
    with pytest.raises(ValueError, match="beta must be"):
        dpo_loss(*(torch.zeros(2),) * 4, beta=beta)


def test_bad_shapes_for_logprobs_and_kl():
    with pytest.raises(ValueError, match="labels"):
        sequence_logprobs(torch.zeros(2, 5, 7), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="policy_logits and ref_logits"):
        token_kl(torch.zeros(2, 5, 7), torch.zeros(2, 5, 6), torch.zeros(2, 5, dtype=torch.long))


def test_dpo_train_raises_the_margin_and_rejects_empty_pairs():
    import copy

    from llmbook.gpt import GPT, GPTConfig
    from llmbook.post_training import dpo_train, pad_batch, sft_example

    torch.manual_seed(0)
    ref = GPT(GPTConfig.baby(vocab_size=12, n_layer=1, d_model=32, n_head=2, d_ff=64))
    policy = copy.deepcopy(ref)
    pairs = [(sft_example([1, k], [3]), sft_example([1, k], [4])) for k in range(5, 10)]
    xc, yc = pad_batch([c for c, _ in pairs], 0)
    xr, yr = pad_batch([r for _, r in pairs], 0)

    def margin():
        with torch.no_grad():
            return float(((sequence_logprobs(policy(xc)[0], yc) - sequence_logprobs(ref(xc)[0], yc))
                          - (sequence_logprobs(policy(xr)[0], yr) - sequence_logprobs(ref(xr)[0], yr))).mean())
    assert margin() == pytest.approx(0.0, abs=1e-6)
    losses = dpo_train(policy, ref, pairs, steps=20, lr=1e-2, beta=0.5, batch_size=5)
    assert losses[0] == pytest.approx(math.log(2), rel=1e-4) and losses[-1] < losses[0] and margin() > 1.0
    with pytest.raises(ValueError, match="pairs is empty"):
        dpo_train(policy, ref, [], steps=1, lr=1e-3)


def test_sequence_logprobs_ignores_minus_inf_off_the_answer():
    """A logit of -inf where the labels are -100 (a masked-out vocabulary entry) leaves the sum finite."""
    logits = torch.randn(2, 5, 7)
    labels = torch.full((2, 5), IGNORE_INDEX)
    labels[:, 3:] = torch.tensor([[1, 2], [3, 4]])
    logits[:, 0, 0] = float("-inf")                 # position 0 reads token 0 for its -100 label
    got = sequence_logprobs(logits, labels)
    assert torch.isfinite(got).all()
    logp = logits.log_softmax(-1)
    want = torch.stack([logp[b, 2, labels[b, 3]] + logp[b, 3, labels[b, 4]] for b in range(2)])
    torch.testing.assert_close(got, want)
