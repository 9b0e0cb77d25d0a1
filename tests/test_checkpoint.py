"""Checkpoint IO in one place (issue 32): optimizer hyper-parameters round-trip exactly, a file
object as well as a path, one module (llmbook.checkpoint) for every model."""

from __future__ import annotations

import io

import pytest
import torch

from llmbook import bert
from llmbook.checkpoint import decode_json, encode_json, read_tensors, write_tensors
from llmbook.gpt import GPT, GPTConfig
from llmbook.train import load_checkpoint, save_checkpoint


def _gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=20, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32))


def _step(model, opt, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 20, (2, 8), generator=g)

    def closure():
        opt.zero_grad()
        loss = model(x, x)[1]
        loss.backward()
        return loss

    opt.step(closure)


def _same(a, b):
    """Equal values and equal types, recursively (a tuple is not a list; a tensor stays a tensor)."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b or (a != a and b != b)


OPTIMIZERS = {
    "adam_tuple_betas_tensor_lr": lambda p: torch.optim.Adam(p, lr=torch.tensor(3e-3), betas=(0.8, 0.95), weight_decay=0.1),
    "adamw_groups": lambda p: torch.optim.AdamW([{"params": p[:2], "weight_decay": 0.0}, {"params": p[2:], "lr": 1e-3 / 3}],
                                                lr=2e-3, betas=(0.9, 0.999), amsgrad=True),
    "sgd_momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "lbfgs_lists_and_numbers": lambda p: torch.optim.LBFGS(p, lr=0.5, max_iter=3, history_size=4),
}


@pytest.mark.parametrize("make", OPTIMIZERS.values(), ids=OPTIMIZERS.keys())
@pytest.mark.parametrize("to_file", [False, True], ids=["path", "file"])
def test_optimizer_round_trips_exactly(tmp_path, make, to_file):
    model = _gpt()
    opt = make(list(model.parameters()))
    _step(model, opt)
    if to_file:
        target = io.BytesIO()
        save_checkpoint(target, model, opt)
        target = io.BytesIO(target.getvalue())
    else:
        target = tmp_path / "ck.safetensors"
        save_checkpoint(target, model, opt)
    model2 = _gpt(seed=5)
    opt2 = make(list(model2.parameters()))
    load_checkpoint(target, model2, opt2)
    want, got = opt.state_dict(), opt2.state_dict()
    assert _same(want["param_groups"], got["param_groups"]), (want["param_groups"], got["param_groups"])
    assert _same(want["state"], got["state"])
    # one more step from each gives the same weights
    _step(model, opt, seed=2)
    _step(model2, opt2, seed=2)
    for (n, a), b in zip(model.named_parameters(), model2.parameters()):
        assert torch.equal(a, b), n


def test_betas_tuple_and_tensor_lr_were_the_failures():
    """What the old JSON metadata did: a tensor lr did not serialise, betas came back a list."""
    import json

    opt = torch.optim.Adam([torch.zeros(1, requires_grad=True)], lr=torch.tensor(0.01), betas=(0.9, 0.95))
    with pytest.raises(TypeError):
        json.dumps(opt.state_dict()["param_groups"])
    tensors: dict = {}
    enc = json.loads(json.dumps(encode_json(opt.state_dict()["param_groups"], tensors, "g", "groups")))
    back = decode_json(enc, tensors, "groups")
    assert isinstance(back[0]["betas"], tuple) and isinstance(back[0]["lr"], torch.Tensor)


def test_bert_checkpoint_through_a_file_object():
    cfg = bert.BertConfig(vocab_size=30, hidden_size=16, n_layers=1, n_heads=2, intermediate_size=32, max_position=16)
    torch.manual_seed(0)
    model = bert.BertForPreTraining(cfg)
    buf = io.BytesIO()
    bert.save_checkpoint(model, buf, cfg, extra={"step": 3}, dtype=torch.float32)
    back, extra = bert.load_checkpoint(io.BytesIO(buf.getvalue()))
    assert extra == {"step": 3}
    for (n, a), b in zip(model.state_dict().items(), back.state_dict().values()):
        assert torch.equal(a, b), n


def test_file_objects_bad_input(tmp_path):
    (tmp_path / "t.txt").write_text("text")
    with open(tmp_path / "t.txt") as f, pytest.raises(TypeError, match=r"path must be opened in binary mode \('rb'\)"):
        load_checkpoint(f)
    with pytest.raises(ValueError, match="checkpoint the BytesIO given is corrupt or not a safetensors file"):
        load_checkpoint(io.BytesIO(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}"))
    with pytest.raises(ValueError, match="corrupt or not a safetensors file"):
        read_tensors(io.BytesIO(b"abc"))
    with pytest.raises(TypeError, match="path must be a path or a binary file open for writing, got int"):
        save_checkpoint(3, _gpt())
    with pytest.raises(TypeError, match="metadata must map str to str"):
        write_tensors(io.BytesIO(), {"w": torch.ones(1)}, {"k": 1})
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    opt.param_groups[0]["schedule"] = object()
    with pytest.raises(TypeError, match=r"optimizer.param_groups\[0\]\['schedule'\] is a object, which a checkpoint cannot store"):
        save_checkpoint(io.BytesIO(), _gpt(), opt)


def test_every_model_writes_through_llmbook_checkpoint():
    """One place: no library module but llmbook.checkpoint calls safetensors' file functions."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "lib" / "llmbook"
    found = [f"{p.relative_to(root)}:{n}" for p in sorted(root.rglob("*.py")) if p.name != "checkpoint.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b(save_file|load_file|safe_open)\b|safetensors\.torch", line.split("#")[0])]
    assert not found, found
