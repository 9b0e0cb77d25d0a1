"""Training loop: schedule, optimizer groups, checkpoints, exact resume on the CPU."""

import pytest
import torch

from llmbook.gpt import GPT, GPTConfig
from llmbook.train import (TrainConfig, configure_optimizer, load_checkpoint, lr_at, random_windows,
                           save_checkpoint, train)


def tiny_setup(tmp_path, **cfg_kw):
    torch.manual_seed(0)
    ids = torch.randint(0, 20, (3000,))
    model = GPT(GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, d_model=32, d_ff=64, dropout=0.1))
    gb = random_windows(ids[:2500], ids[2500:], block_size=16, batch_size=4)
    base = dict(max_steps=12, lr=3e-3, warmup_steps=3, eval_interval=4, eval_batches=2, progress=False,
                checkpoint_path=str(tmp_path / "ck.safetensors"))
    base.update(cfg_kw)
    return model, gb, TrainConfig(**base)


def test_resume_after_interruption_gives_identical_losses(tmp_path):
    model, gb, cfg = tiny_setup(tmp_path / "a")
    full = train(model, gb, cfg)
    assert len(full.train_losses) == 12

    model, gb, cfg = tiny_setup(tmp_path / "b", stop_after=5)  # dropout on: RNG state must resume too
    part = train(model, gb, cfg)
    assert part.step == 5
    model, gb, cfg = tiny_setup(tmp_path / "b")
    torch.manual_seed(123)  # a fresh process would not share the first run's RNG state
    rest = train(model, gb, cfg, resume=True)
    assert rest.step == 12
    assert rest.train_losses == full.train_losses  # bit-identical on the CPU
    # the interrupted run also evaluated when it stopped (step 5); the others agree exactly
    resumed = {e["step"]: e["val"] for e in rest.evals}
    assert sorted(resumed) == [4, 5, 8, 12]
    assert all(resumed[e["step"]] == e["val"] for e in full.evals)


def test_checkpoint_roundtrip_and_corrupt_file(tmp_path):
    model, _, _ = tiny_setup(tmp_path)
    path = tmp_path / "m.safetensors"
    save_checkpoint(path, model, meta={"note": "x"})
    other = GPT(model.config)
    info = load_checkpoint(path, other)
    assert info["meta"]["note"] == "x"
    for a, b in zip(model.state_dict().values(), other.state_dict().values()):
        assert torch.equal(a, b)
    assert other.lm_head.weight is other.wte.weight  # tying survives
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ValueError, match="corrupt"):
        load_checkpoint(path, other)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.safetensors")


def test_weight_decay_only_on_matrices(tmp_path):
    model, _, cfg = tiny_setup(tmp_path)
    opt = configure_optimizer(model, cfg)
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == cfg.weight_decay and all(p.dim() >= 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.dim() == 1 for p in no_decay["params"])
    n = sum(p.numel() for g in opt.param_groups for p in g["params"])
    assert n == model.num_parameters()  # tied matrix counted once


def test_schedule_and_bad_config():
    cfg = TrainConfig(max_steps=100, lr=1e-3, min_lr=1e-4, warmup_steps=10)
    lrs = [lr_at(s, cfg) for s in range(100)]
    assert max(lrs) == pytest.approx(1e-3) and lrs[9] == pytest.approx(1e-3)
    assert all(a <= b for a, b in zip(lrs[:10], lrs[1:10]))
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    with pytest.raises(ValueError, match="max_steps"):
        TrainConfig(max_steps=0)
    with pytest.raises(ValueError, match="dtype"):
        TrainConfig(dtype="float16")
    with pytest.raises(ValueError, match="block_size"):
        random_windows(torch.arange(5), torch.arange(50), 8, 2)


def test_training_reduces_loss(tmp_path):
    torch.manual_seed(0)
    ids = torch.arange(4000) % 7  # a periodic sequence: easy to learn
    model = GPT(GPTConfig(vocab_size=7, block_size=16, n_layer=1, n_head=2, d_model=32, d_ff=64))
    gb = random_windows(ids[:3500], ids[3500:], 16, 8)
    res = train(model, gb, TrainConfig(max_steps=60, lr=1e-2, warmup_steps=5, eval_interval=60, eval_batches=2,
                                       progress=False))
    assert res.evals[-1]["val"] < 0.2


def test_time_budget_schedule_decays_by_the_end(tmp_path, monkeypatch):
    """With schedule_by_time the last update of a timed run is near min_lr; with the step schedule
    and a long max_steps it is still near the peak (the run stops before the decay). A fake clock
    (each reading 0.05 s later) makes the test independent of the machine's speed."""
    import llmbook.train as tr

    with pytest.raises(ValueError, match="schedule_by_time needs max_seconds"):
        TrainConfig(schedule_by_time=True)
    clock = iter(range(10**6))
    monkeypatch.setattr(tr.time, "perf_counter", lambda: 0.05 * next(clock))
    kw = dict(max_steps=10**6, lr=1e-3, min_lr=1e-4, warmup_steps=2, max_seconds=2.0, checkpoint_path=None,
              eval_interval=10**6)
    model, gb, cfg = tiny_setup(tmp_path, schedule_by_time=True, **kw)
    timed = train(model, gb, cfg)
    model, gb, cfg = tiny_setup(tmp_path, **kw)
    stepped = train(model, gb, cfg)
    assert 10 <= timed.step <= 40 and 10 <= stepped.step <= 40
    assert timed.last_lr < 1.5e-4, timed.last_lr
    assert stepped.last_lr > 9.9e-4, stepped.last_lr


def test_lr_at_without_a_config():
    """lr_at with keywords equals lr_at with a TrainConfig; the warm-up starts at lr / warmup_steps."""
    cfg = TrainConfig(max_steps=50, lr=2e-3, min_lr=2e-4, warmup_steps=5)
    for s in range(60):
        assert lr_at(s, lr=2e-3, min_lr=2e-4, warmup_steps=5, max_steps=50) == lr_at(s, cfg)
    assert lr_at(0, lr=1.0, warmup_steps=4, max_steps=10) == 0.25  # (step + 1) / warmup_steps, never 0
    assert lr_at(3, lr=1.0, warmup_steps=4, max_steps=10) == 1.0
    assert lr_at(10, lr=1.0, warmup_steps=4, max_steps=10) == 0.0  # min_lr defaults to 0
    assert lr_at(0, lr=1.0, warmup_steps=0, max_steps=10) == 1.0  # no warm-up: the cosine's start


@pytest.mark.parametrize("call, exc, match", [
    (lambda: lr_at(-1, lr=1.0, warmup_steps=2, max_steps=9), ValueError, "step must be an int >= 0"),
    (lambda: lr_at(1.5, lr=1.0, warmup_steps=2, max_steps=9), ValueError, "step must be an int >= 0"),
    (lambda: lr_at(1, lr=1.0, warmup_steps=2), TypeError, r"needs the keywords \['max_steps'\]"),
    (lambda: lr_at(1, TrainConfig(), lr=1.0), TypeError, "give cfg or the keywords"),
    (lambda: lr_at(1, {"lr": 1.0}), TypeError, "cfg must be a TrainConfig"),
    (lambda: lr_at(1, lr=float("nan"), warmup_steps=2, max_steps=9), ValueError, "lr must be a finite number"),
    (lambda: lr_at(1, lr=1.0, min_lr=2.0, warmup_steps=2, max_steps=9), ValueError, "min_lr <= lr"),
    (lambda: lr_at(1, lr=1.0, warmup_steps=-2, max_steps=9), ValueError, "warmup_steps must be a non-negative int"),
])
def test_lr_at_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
