"""llmbook.reasoning: the addition task and its grader, pass@k and voting, the GRPO loss (vs trl), bad input."""

import itertools
import math
import statistics
from collections import defaultdict
from fractions import Fraction
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llmbook.gpt import GPT, GPTConfig
from llmbook.reasoning import (ADDITION_CHARS, LOSS_TYPES, STOP, Addition, addition_splits, best_of_n,
                               completion_logprobs, completion_mask, equal_reward_groups, extract_answer, grade,
                               group_advantages, grpo_loss, kl_k3, majority_vote, pass_at_k)



# ------------------------------------------------------------------ task and grader
def test_addition_formats():
    p = Addition(23, 58, digits=2)
    assert p.prompt == "23+58=" and p.answer == 81 and p.target() == "81\n"
    assert p.target(scratchpad=True) == "3+8+0=11,2+5+1=08>81\n"
    q = Addition(7, 995, digits=3)  # zero-padded operands, a final carry that adds a digit
    assert q.prompt == "007+995=" and q.target(scratchpad=True) == "7+5+0=12,0+9+1=10,0+9+1=10>1002\n"
    assert set(q.prompt + q.target(True) + p.target()) <= set(ADDITION_CHARS) and q.target().endswith(STOP)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 6).flatmap(lambda d: st.tuples(st.just(d), st.integers(0, 10 ** d - 1), st.integers(0, 10 ** d - 1))))
def test_scratchpad_is_the_column_algorithm(dab):
    """Each step adds one column and the previous carry; the digits written, read back, spell the sum."""
    d, a, b = dab
    p = Addition(a, b, d)
    steps, answer = p.target(True)[:-1].split(">")
    carry, digits = 0, []
    for i, step in enumerate(steps.split(",")):
        lhs, rhs = step.split("=")
        x, y, c = (int(v) for v in lhs.split("+"))
        assert (x, y, c) == (a // 10 ** i % 10, b // 10 ** i % 10, carry) and int(rhs) == x + y + c and len(rhs) == 2
        carry, digit = divmod(int(rhs), 10)
        digits.append(str(digit))
    assert int(str(carry) + "".join(reversed(digits))) == a + b == int(answer) == extract_answer(p.target(True))
    assert len(p.prompt) == 2 * d + 2


def test_splits_are_disjoint_seeded_and_sized():
    sizes = {"train": 2000, "val": 200, "test": 200}
    s = addition_splits(3, sizes, seed=1)
    assert {k: len(v) for k, v in s.items()} == sizes
    keys = {k: {(min(p.a, p.b), max(p.a, p.b)) for p in v} for k, v in s.items()}
    assert all(len(keys[k]) == sizes[k] for k in sizes)  # no repeat inside a split, b+a counted as a+b
    assert not (keys["train"] & keys["val"] or keys["train"] & keys["test"] or keys["val"] & keys["test"])
    assert s == addition_splits(3, sizes, seed=1) and s != addition_splits(3, sizes, seed=2)
    assert all(len(p.prompt) == 8 for v in s.values() for p in v)
    every = addition_splits(1, {"train": 50, "test": 5}, seed=0)  # all 55 one-digit problems, shuffled
    keys = [(min(p.a, p.b), max(p.a, p.b)) for v in every.values() for p in v]
    assert sorted(keys) == [(a, b) for a in range(10) for b in range(a, 10)]
    with pytest.raises(ValueError, match="sizes ask for 56 problems"):
        addition_splits(1, {"train": 50, "test": 6})


def _decorate(n: int, zeros: int, pre: str, post: str, period: bool, form: str) -> str:
    core = "0" * zeros + str(n) + ("." if period else "")
    return {"plain": "", "answer": "answer:", "Answer": "Answer: ", "pad": "1+2+0=03>"}[form] + pre + core + post


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 10 ** 12), st.integers(0, 3), st.sampled_from(["", " ", "\t", "\n "]),
       st.sampled_from(["", " ", "\n", " \n"]), st.booleans(), st.sampled_from(["plain", "answer", "Answer", "pad"]),
       st.integers(-50, 50).filter(lambda d: d != 0))
def test_grader_tolerates_format_and_catches_wrong_numbers(n, zeros, pre, post, period, form, delta):
    text = _decorate(n, zeros, pre, post, period, form)
    assert extract_answer(text) == n and grade(text, n) == 1.0
    assert grade(text, n + delta) == 0.0
    assert grade(_decorate(n + delta, zeros, pre, post, period, form), n) == (1.0 if n + delta == n else 0.0)


@pytest.mark.parametrize("text", ["", " ", "eighty-one", "81 82", "8 1", "81..", "answer:", "3+8+0=11>", "0x51", "1e2"])
def test_grader_refuses_non_answers(text):
    assert extract_answer(text) is None and grade(text, 81) == 0.0


# ------------------------------------------------------------------ pass@k, voting, best-of-N
def _pass_at_k_by_enumeration(n: int, c: int, k: int) -> Fraction:
    right = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(range(n), k))
    return Fraction(sum(any(right[i] for i in s) for s in subsets), len(subsets))


def test_pass_at_k_equals_enumerating_every_subset():
    for n in range(1, 9):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(float(_pass_at_k_by_enumeration(n, c, k)), abs=1e-12)
    assert pass_at_k(7, 3, 1) == pytest.approx(3 / 7)


def test_pass_at_k_is_stable_for_large_n():
    n, c, k = 2000, 3, 500
    exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    assert pass_at_k(n, c, k) == pytest.approx(float(exact), rel=1e-12)
    values = [pass_at_k(200, 20, k) for k in range(1, 201)]
    assert all(a <= b for a, b in zip(values, values[1:])) and values[-1] == 1.0


def test_majority_vote_and_best_of_n():
    assert majority_vote([3, None, 5, 5, 3, None, None]) == 3  # None never wins; 3 and 5 tie, 3 came first
    assert majority_vote(["81", "18", "18"]) == "18" and majority_vote([]) is None
    assert best_of_n([4, 9, 2, 9], verifier=lambda x: x) == 9
    picked = best_of_n(["12", "13", "x"], verifier=lambda s: grade(s, 13))
    assert picked == "13"
    calls = []
    best_of_n([1, 2, 3], verifier=lambda x: calls.append(x) or 0.0)
    assert calls == [1, 2, 3]


# ------------------------------------------------------------------ GRPO pieces
def test_group_advantages_equal_a_per_sample_loop():
    g = torch.Generator().manual_seed(0)
    G = 4
    rewards = torch.randint(0, 2, (5 * G,), generator=g).float()
    rewards[:G] = 1.0  # one group all right: zero advantage
    for scale in (True, False):
        got = group_advantages(rewards, G, scale=scale)
        expect = []
        for i in range(len(rewards)):
            group = rewards[i // G * G: i // G * G + G].tolist()
            a = rewards[i].item() - statistics.mean(group)
            expect.append(a / (statistics.stdev(group) + 1e-4) if scale else a)
        torch.testing.assert_close(got, torch.tensor(expect), rtol=1e-5, atol=1e-6)
    assert group_advantages(rewards, G)[:G].abs().max() == 0
    assert equal_reward_groups(rewards, G).tolist() == [
        len(set(rewards[i:i + G].tolist())) == 1 for i in range(0, len(rewards), G)]


def test_kl_k3_is_nonnegative_and_unbiased():
    g = torch.Generator().manual_seed(0)
    p_logits, q_logits = torch.randn(7, generator=g), torch.randn(7, generator=g)
    logp, logq = p_logits.log_softmax(0).double(), q_logits.log_softmax(0).double()
    k3 = kl_k3(logp, logq)  # token x sampled from p: one estimate per possible token
    assert (k3 >= 0).all() and kl_k3(logp, logp).abs().max() == 0
    exact = (logp.exp() * (logp - logq)).sum()
    torch.testing.assert_close((logp.exp() * k3).sum(), exact)  # its expectation under p is KL(p || q)


def test_completion_mask_and_logprobs():
    ids = torch.tensor([[3, 0, 4, 0], [0, 5, 5, 5], [6, 6, 6, 6]])
    assert completion_mask(ids, 0).tolist() == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 1]]
    model = _tiny_model()
    g = torch.Generator().manual_seed(3)
    prompt, comp = torch.randint(0, 11, (3, 4), generator=g), torch.randint(0, 11, (3, 5), generator=g)
    lp = completion_logprobs(model, prompt, comp)
    full = torch.cat([prompt, comp], 1)
    for b in range(3):
        for t in range(5):
            logits = model(full[b:b + 1, :4 + t])[0][0, -1]  # the model sees the prompt and t completion tokens
            assert lp[b, t].item() == pytest.approx(logits.log_softmax(-1)[comp[b, t]].item(), abs=1e-5)


def _tiny_model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=2, d_model=16, d_ff=32))


def _trl_stub(loss_type: str, beta: float, max_len: int):
    """The trainer state GRPOTrainer._compute_loss reads, for one process, no accumulation, token-level ratios."""

    def logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
                            compute_aux_loss=False, **_):
        logits = model(input_ids)[0][:, -logits_to_keep - 1:-1]  # the book's GPT: positions predicting the completion
        logp = logits.log_softmax(-1)
        per_token = logp.gather(-1, input_ids[:, -logits_to_keep:].unsqueeze(-1)).squeeze(-1)
        entropy = -(logp.exp() * logp).sum(-1)
        return per_token, entropy, None

    accel = SimpleNamespace(num_processes=1, sync_gradients=True, gather=lambda t: t, gather_for_metrics=lambda t: t,
                            reduce=lambda t, reduction="sum": t)
    return SimpleNamespace(
        _get_per_token_logps_and_entropies=logps_and_entropies, aux_loss_enabled=False, top_entropy_quantile=1.0,
        off_policy_mask_threshold=None, importance_sampling_level="token", beta=beta, loss_type=loss_type,
        epsilon_low=0.2, epsilon_high=0.28, use_vllm=False, vllm_importance_sampling_correction=False,
        model=SimpleNamespace(training=True), current_gradient_accumulation_steps=1, max_completion_length=max_len,
        accelerator=accel, _entropy_bonus_enabled=False, _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
        args=SimpleNamespace(use_bias_correction_kl=False, delta=None, steps_per_generation=1))


def _batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    B, P, C = 6, 4, 5
    prompt = torch.randint(0, 11, (B, P), generator=g)
    comp = torch.randint(1, 11, (B, C), generator=g)
    comp[0, 2] = comp[3, 0] = comp[4, 3] = 0  # stop id 0: completions of 3, 1, 4 and 5 tokens
    mask = completion_mask(comp, stop_id=0)
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    return prompt, comp, mask, group_advantages(rewards, group_size=3), g


@pytest.mark.parametrize("loss_type", LOSS_TYPES)
@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("off_policy", [False, True])
def test_loss_and_gradient_equal_trls_grpo_trainer(loss_type, beta, off_policy):
    trl = pytest.importorskip("trl", reason="trl is not installed (it is in the test extras)")
    from packaging.version import Version

    if Version(trl.__version__) < Version("1.16"):  # the stub below lists the trainer state 1.16's code reads
        pytest.skip(f"the stand-in trainer is written for trl 1.16's GRPOTrainer._compute_loss, found {trl.__version__}")
    from trl.trainer.grpo_trainer import GRPOTrainer

    prompt, comp, mask, adv, g = _batch()
    max_len = 7  # longer than any completion: dr_grpo divides by it, not by C
    model = _tiny_model()
    with torch.no_grad():
        now = completion_logprobs(model, prompt, comp)
    inputs = {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": comp,
              "completion_mask": mask.long(), "advantages": adv, "num_items_in_batch": mask.sum()}
    if off_policy:  # an older policy: ratios spread past both clip edges
        inputs["old_per_token_logps"] = now + 0.4 * torch.randn(now.shape, generator=g)
    if beta:
        inputs["ref_per_token_logps"] = now + 0.3 * torch.randn(now.shape, generator=g)

    theirs = GRPOTrainer._compute_loss(_trl_stub(loss_type, beta, max_len), model, inputs)
    their_grads = torch.autograd.grad(theirs, list(model.parameters()))
    logps = completion_logprobs(model, prompt, comp)
    ours = grpo_loss(logps, mask, adv, old_logps=inputs.get("old_per_token_logps"),
                     ref_logps=inputs.get("ref_per_token_logps"), beta=beta, epsilon=0.2, epsilon_high=0.28,
                     loss_type=loss_type, max_completion_length=max_len)
    our_grads = torch.autograd.grad(ours.loss, list(model.parameters()))
    torch.testing.assert_close(ours.loss, theirs, rtol=1e-5, atol=1e-7)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    assert float(ours.loss.detach().abs()) > 0 and any(float(gr.abs().max()) > 0 for gr in our_grads)
    if off_policy:
        assert 0 < float(ours.clip_fraction) < 1  # the comparison went through the clipped branch too
    if beta:
        assert float(ours.kl) > 0


def test_on_policy_gradient_is_reinforce_with_a_group_mean_baseline():
    prompt, comp, mask, _, _ = _batch()
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0])
    B, C = comp.shape
    lengths = mask.sum(1)

    def grads(loss_fn):
        model = _tiny_model()
        return torch.autograd.grad(loss_fn(model), list(model.parameters()))

    def seq_logp(model):  # log pi(o | q): the sum over the completion's tokens
        return (completion_logprobs(model, prompt, comp) * mask).sum(1)

    baseline = rewards.view(-1, 3).mean(1).repeat_interleave(3)
    std = rewards.view(-1, 3).std(1).repeat_interleave(3) + 1e-4
    pairs = [  # (GRPO loss, REINFORCE objective with the same gradient)
        (lambda m: grpo_loss(completion_logprobs(m, prompt, comp), mask, group_advantages(rewards, 3, scale=False),
                             loss_type="dr_grpo").loss,
         lambda m: -((rewards - baseline) * seq_logp(m)).sum() / (B * C)),
        (lambda m: grpo_loss(completion_logprobs(m, prompt, comp), mask, group_advantages(rewards, 3),
                             loss_type="grpo").loss,
         lambda m: -((rewards - baseline) / std / lengths * seq_logp(m)).mean()),
        (lambda m: grpo_loss(completion_logprobs(m, prompt, comp), mask, group_advantages(rewards, 3, scale=False),
                             loss_type="bnpo").loss,
         lambda m: -((rewards - baseline) * seq_logp(m)).sum() / mask.sum()),
    ]
    for grpo, reinforce in pairs:
        for a, b in zip(grads(grpo), grads(reinforce)):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)


def test_clipping_stops_the_gradient_past_the_edge():
    logps = torch.zeros(1, 3, requires_grad=True)
    old = torch.log(torch.tensor([[1.0, 1.5, 0.5]]))  # ratios 1, 1/1.5 = 0.67 (below 0.8), 2 (above 1.2)
    for adv, moving in ((1.0, [True, True, False]), (-1.0, [True, False, True])):
        out = grpo_loss(logps, torch.ones(1, 3), torch.tensor([adv]), old_logps=old, loss_type="bnpo")
        (grad,) = torch.autograd.grad(out.loss, logps)
        assert (grad[0] != 0).tolist() == moving
        assert float(out.clip_fraction) == pytest.approx(1 / 3)


# ------------------------------------------------------------------ bad input
def test_bad_rewards_name_the_parameter():
    with pytest.raises(ValueError, match="rewards is empty"):
        group_advantages(torch.zeros(0), 2)
    with pytest.raises(ValueError, match="group_size must be an int >= 2"):
        group_advantages(torch.zeros(4), 1)
    with pytest.raises(ValueError, match="group_size must be an int >= 2"):
        group_advantages(torch.zeros(4), 0)
    with pytest.raises(ValueError, match="not a multiple of group_size"):
        group_advantages(torch.zeros(5), 2)
    with pytest.raises(ValueError, match="rewards contain NaN"):
        group_advantages(torch.tensor([1.0, float("nan")]), 2)
    with pytest.raises(ValueError, match="rewards must be 1-D"):
        equal_reward_groups(torch.zeros(2, 2), 2)


def test_bad_grpo_inputs_name_the_parameter():
    lp, m, a = torch.zeros(2, 3), torch.ones(2, 3), torch.zeros(2)
    cases = [
        (dict(logps=torch.zeros(2, 0), mask=torch.ones(2, 0)), "logps is empty"),
        (dict(mask=torch.ones(2, 4)), "mask has shape"),
        (dict(advantages=torch.zeros(3)), "advantages must be"),
        (dict(advantages=torch.tensor([0.0, float("nan")])), "advantages contain NaN"),
        (dict(old_logps=torch.zeros(3, 2)), "old_logps has shape"),
        (dict(beta=0.1), "ref_logps is needed"),
        (dict(beta=0.1, ref_logps=torch.zeros(2)), "ref_logps has shape"),
        (dict(beta=-1.0), "beta must be"),
        (dict(epsilon=0.0), "epsilon must be"),
        (dict(loss_type="ppo"), "loss_type must be one of"),
        (dict(max_completion_length=0), "max_completion_length must be"),
    ]
    for override, message in cases:
        kw = dict(logps=lp, mask=m, advantages=a) | override
        with pytest.raises(ValueError, match=message):
            grpo_loss(**kw)
    with pytest.raises(ValueError, match="ref_logps has shape"):
        kl_k3(lp, torch.zeros(3))
    with pytest.raises(ValueError, match="prompt_ids .* and completion_ids"):
        completion_logprobs(_tiny_model(), torch.zeros(2, 3, dtype=torch.long), torch.zeros(3, 2, dtype=torch.long))


def test_bad_task_and_metric_inputs():
    with pytest.raises(ValueError, match="a must be"):
        Addition(100, 1, digits=2)
    with pytest.raises(ValueError, match="digits must be"):
        addition_splits(0, {"train": 1})
    with pytest.raises(ValueError, match="k \\(9\\) must be <= n"):
        pass_at_k(8, 2, 9)
    with pytest.raises(ValueError, match="c \\(right samples"):
        pass_at_k(8, 9, 1)
    with pytest.raises(ValueError, match="k must be"):
        pass_at_k(8, 2, 0)
    with pytest.raises(ValueError, match="candidates is empty"):
        best_of_n([], len)
    with pytest.raises(ValueError, match="verifier returned NaN"):
        best_of_n([1], lambda x: float("nan"))
    with pytest.raises(TypeError, match="answers must be"):
        majority_vote("81")
    with pytest.raises(TypeError, match="text must be"):
        extract_answer(81)


def test_feasibility_script_runs_end_to_end(tmp_path):
    """scripts/grpo_feasibility.py on a toy budget: SFT, evaluation, GRPO with the KL term, JSON out."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / "grpo_feasibility.py"
    spec = importlib.util.spec_from_file_location("grpo_feasibility", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "r.json"
    result = script.main(["--digits", "1", "--n-train", "30", "--n-eval", "5", "--sft-steps", "3", "--grpo-steps", "2",
                          "--prompts", "2", "--group-size", "2", "--samples", "2", "--beta", "0.1", "--split", "val",
                          "--out", str(out)])
    assert json.loads(out.read_text())["after"] == result["after"]
    assert len(result["history"]) == 2 and 0 <= result["equal_groups_share"] <= 1
    for when in ("before", "after"):
        assert 0 <= result[when]["pass@1"] <= result[when]["pass@2"] <= 1
