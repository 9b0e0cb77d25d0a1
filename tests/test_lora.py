"""llmbook.lora: LoRA adapters from scratch, against the peft library on the same A and B."""

import pytest
import torch
import torch.nn as nn

from llmbook.gpt import GPT, GPTConfig
from llmbook.lora import LoRALinear, apply_lora, merge_lora, trainable_parameters, unmerge_lora


def baby(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig.baby(vocab_size=20, n_layer=2))


def randomise_b(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, LoRALinear):
            with torch.no_grad():
                m.lora_B.copy_(torch.randn(m.lora_B.shape, generator=g) * 0.1)


def test_zero_b_starts_as_the_frozen_model():
    model = baby()
    x = torch.randint(0, 20, (2, 16))
    before = model(x)[0]
    apply_lora(model, ["c_attn", "c_fc"], r=4, alpha=8)
    torch.testing.assert_close(model(x)[0], before, rtol=0, atol=0)


def test_merged_equals_unmerged_and_unmerge_restores():
    model = baby()
    w0 = model.blocks[0].attn.c_attn.weight.clone()
    apply_lora(model, ["c_attn", "attn.c_proj", "c_fc"], r=4, alpha=8)
    randomise_b(model)
    x = torch.randint(0, 20, (2, 16))
    unmerged = model(x)[0]
    assert not torch.allclose(unmerged, GPT.forward(baby(), x)[0])  # the adapters do change the output
    merge_lora(model)
    torch.testing.assert_close(model(x)[0], unmerged, rtol=1e-5, atol=1e-5)
    unmerge_lora(model)
    torch.testing.assert_close(model.blocks[0].attn.c_attn.base.weight, w0, rtol=0, atol=1e-6)
    torch.testing.assert_close(model(x)[0], unmerged, rtol=1e-5, atol=1e-5)


def test_parameter_counts_and_only_adapters_train():
    model = baby()
    total_before = model.num_parameters()
    wrapped = apply_lora(model, ["c_attn", "attn.c_proj"], r=4, alpha=8)
    assert wrapped == ["blocks.0.attn.c_attn", "blocks.0.attn.c_proj", "blocks.1.attn.c_attn", "blocks.1.attn.c_proj"]
    C = 128
    expected = 2 * (4 * (C + 3 * C) + 4 * (C + C))  # r (in + out) per wrapped layer, two layers
    trainable, total = trainable_parameters(model)
    assert trainable == expected and total == total_before + expected
    model(torch.randint(0, 20, (2, 8)), torch.randint(0, 20, (2, 8)))[1].backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad and all("lora_" in n for n in with_grad)
    assert {n for n, p in model.named_parameters() if p.requires_grad} == with_grad


def test_a_training_step_moves_only_the_adapters():
    model = baby()
    apply_lora(model, ["c_fc"], r=2, alpha=2)
    frozen = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    x = torch.randint(0, 20, (4, 16))
    for _ in range(3):
        loss = model(x, x)[1]
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    assert any(m.lora_B.abs().sum() > 0 for m in model.modules() if isinstance(m, LoRALinear))


def test_same_output_as_peft_for_the_same_a_and_b():
    peft = pytest.importorskip("peft", reason="peft is not installed (pip install peft; it is in the test extras)")
    ours, theirs = baby(), baby()
    x = torch.randint(0, 20, (2, 16))
    apply_lora(ours, ["c_attn", "c_fc"], r=4, alpha=16)
    randomise_b(ours)
    cfg = peft.LoraConfig(r=4, lora_alpha=16, lora_dropout=0.0, target_modules=["c_attn", "c_fc"], bias="none")
    theirs = peft.get_peft_model(theirs, cfg)
    n_copied = 0
    for name, m in ours.named_modules():
        if isinstance(m, LoRALinear):
            ref = theirs.base_model.model.get_submodule(name)
            with torch.no_grad():
                ref.lora_A["default"].weight.copy_(m.lora_A)
                ref.lora_B["default"].weight.copy_(m.lora_B)
            n_copied += 1
    assert n_copied == 4
    out_ours, out_theirs = ours(x)[0], theirs(x)[0]
    torch.testing.assert_close(out_ours, out_theirs, rtol=1e-5, atol=1e-5)
    trainable_theirs = sum(p.numel() for p in theirs.parameters() if p.requires_grad)
    assert trainable_parameters(ours)[0] == trainable_theirs
    theirs = theirs.merge_and_unload()
    merge_lora(ours)
    torch.testing.assert_close(ours(x)[0], theirs(x)[0], rtol=1e-5, atol=1e-5)


def test_dropout_acts_only_in_training():
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(16, 8), r=4, alpha=4, dropout=0.5)
    with torch.no_grad():
        layer.lora_B.normal_()
    x = torch.randn(5, 16)
    layer.eval()
    torch.testing.assert_close(layer(x), layer(x))
    layer.train()
    assert not torch.allclose(layer(x), layer(x))


@pytest.mark.parametrize("kwargs, word", [({"r": 0}, "r (the rank)"), ({"r": -2}, "r (the rank)"),
                                          ({"r": 2.5}, "r (the rank)"), ({"alpha": 0}, "alpha"),
                                          ({"dropout": 1.0}, "dropout")])
def test_bad_rank_alpha_dropout(kwargs, word):
    with pytest.raises(ValueError, match=word.replace("(", r"\(").replace(")", r"\)")):
        LoRALinear(nn.Linear(4, 4), **kwargs)
    with pytest.raises(ValueError, match=word.replace("(", r"\(").replace(")", r"\)")):
        apply_lora(baby(), ["c_attn"], **kwargs)


def test_bad_targets_and_models():
    with pytest.raises(ValueError, match="target_modules: 'q_proj' matches no nn.Linear.*c_attn"):
        apply_lora(baby(), ["c_attn", "q_proj"])
    with pytest.raises(ValueError, match="target_modules must be a non-empty"):
        apply_lora(baby(), [])
    with pytest.raises(TypeError, match="base must be an nn.Linear"):
        LoRALinear(nn.Embedding(3, 4))
    with pytest.raises(TypeError, match="model must be an nn.Module"):
        apply_lora("gpt", ["c_attn"])
    model = baby()
    apply_lora(model, ["c_attn"])
    with pytest.raises(ValueError, match="already holds LoRA"):
        apply_lora(model, ["c_fc"])
    with pytest.raises(RuntimeError, match="not merged"):
        unmerge_lora(model)
    merge_lora(model)
    with pytest.raises(RuntimeError, match="already merged"):
        merge_lora(model)
    with pytest.raises(ValueError, match="no LoRALinear"):
        merge_lora(baby())


def test_save_and_load_an_adapter_alone(tmp_path):
    from llmbook.lora import load_lora, lora_state_dict, save_lora
    from llmbook.train import load_checkpoint

    model = baby()
    apply_lora(model, ["c_attn", "c_fc"], r=4, alpha=8)
    randomise_b(model)
    path = tmp_path / "adapter.safetensors"
    save_lora(path, model, meta={"command": "x", "steps": 3})
    ck = load_checkpoint(path)
    assert set(ck["model"]) == set(lora_state_dict(model))          # only A and B are stored
    assert ck["meta"]["steps"] == 3 and ck["meta"]["lora"]["r"] == 4 and ck["meta"]["lora"]["alpha"] == 8
    x = torch.randint(0, 20, (2, 16))
    fresh = baby()                                                   # the same base weights, no adapter yet
    meta = load_lora(path, fresh)
    assert meta["command"] == "x"
    torch.testing.assert_close(fresh(x)[0], model(x)[0], rtol=0, atol=0)
    assert trainable_parameters(fresh) == trainable_parameters(model)


def test_adapter_io_bad_input(tmp_path):
    from llmbook.lora import load_lora, save_lora
    from llmbook.train import save_checkpoint

    model = baby()
    with pytest.raises(ValueError, match="no LoRALinear"):
        save_lora(tmp_path / "a.safetensors", model)
    apply_lora(model, ["c_attn"], r=2)
    merge_lora(model)
    with pytest.raises(ValueError, match="merged"):
        save_lora(tmp_path / "a.safetensors", model)
    unmerge_lora(model)
    save_lora(tmp_path / "a.safetensors", model)
    other = baby()
    apply_lora(other, ["c_fc"], r=2)                                 # other layers than the file's
    with pytest.raises(ValueError, match="does not fit"):
        load_lora(tmp_path / "a.safetensors", other)
    save_checkpoint(tmp_path / "plain.safetensors", baby())
    with pytest.raises(ValueError, match="no LoRA settings"):
        load_lora(tmp_path / "plain.safetensors", baby())
    with pytest.raises(FileNotFoundError):
        load_lora(tmp_path / "missing.safetensors", baby())
    with pytest.raises(ValueError, match="keep selected no model tensor"):
        save_checkpoint(tmp_path / "none.safetensors", baby(), keep=lambda n: False)
