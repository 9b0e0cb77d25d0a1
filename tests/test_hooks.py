"""llmbook.hooks on the book's GPT and LLaMA: names, reading, overwriting, and no change when hooks edit nothing."""

import pytest
import torch

from llmbook.gpt import GPT, GPTConfig
from llmbook.hooks import hook_names, hooks, run_with_cache, run_with_hooks, unembed
from llmbook.llama import Llama, LlamaConfig


def _gpt(pre_norm=True):
    torch.manual_seed(0)
    cfg = GPTConfig.baby(vocab_size=40, n_layer=3, block_size=16, pre_norm=pre_norm, final_norm=pre_norm)
    return GPT(cfg).eval()


def _llama():
    torch.manual_seed(0)
    return Llama(LlamaConfig.tiny()).eval()


MODELS = [pytest.param(_gpt, id="gpt"), pytest.param(lambda: _gpt(False), id="gpt-post-ln"),
          pytest.param(_llama, id="llama")]


def _plain(model, idx, attention=False):
    out = model(idx, return_attention=True) if attention else model(idx)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("make", MODELS)
def test_hooks_that_change_nothing_are_bit_identical(make):
    model = make()
    idx = torch.randint(0, 40, (2, 9), generator=torch.Generator().manual_seed(1))
    names = hook_names(model)
    seen = []

    def read(x, name):
        seen.append(name)
        return None

    def same(x, name):
        return x.clone()  # a new tensor with the same values

    plain = _plain(model, idx)
    fused = [n for n in names if not n.endswith("attn.pattern")]
    assert torch.equal(run_with_hooks(model, idx, [(n, read) for n in fused]), plain)
    assert torch.equal(run_with_hooks(model, idx, [(n, same) for n in fused]), plain)
    assert seen == fused  # each hook ran once, in the order of the forward pass
    # pattern hooks run on the explicit attention path: identical to the plain forward on that path
    explicit = _plain(model, idx, attention=True)
    assert torch.equal(run_with_hooks(model, idx, [(n, same) for n in names]), explicit)
    torch.testing.assert_close(explicit, plain, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("make", MODELS)
def test_cache_shapes_and_consistency(make):
    model = make()
    c = model.config
    n_layer, C, H = c.n_layer, c.d_model, c.n_head
    idx = torch.randint(0, 40, (2, 7), generator=torch.Generator().manual_seed(2))
    logits, cache = run_with_cache(model, idx, hook_names(model))
    B, T = idx.shape
    for i in range(n_layer):
        assert cache[f"blocks.{i}.resid_pre"].shape == (B, T, C)
        assert cache[f"blocks.{i}.attn.z"].shape == (B, T, H, C // H)
        p = cache[f"blocks.{i}.attn.pattern"]
        assert p.shape == (B, H, T, T)
        torch.testing.assert_close(p.sum(-1), torch.ones(B, H, T))
        assert torch.all(p.triu(1) == 0)  # causal
        if i + 1 < n_layer:
            assert torch.equal(cache[f"blocks.{i}.resid_post"], cache[f"blocks.{i + 1}.resid_pre"])
    if getattr(c, "pre_norm", True):
        for i in range(n_layer):  # pre-norm: the block adds its two sub-layers to the residual stream
            torch.testing.assert_close(cache[f"blocks.{i}.resid_pre"] + cache[f"blocks.{i}.attn_out"]
                                       + cache[f"blocks.{i}.mlp_out"], cache[f"blocks.{i}.resid_post"])
    torch.testing.assert_close(unembed(model, cache[f"blocks.{n_layer - 1}.resid_post"]), logits)
    assert torch.equal(model.lm_head(cache["ln_final"]), logits)


@pytest.mark.parametrize("make", MODELS)
def test_overwrites_take_effect(make):
    model = make()
    idx = torch.randint(0, 40, (1, 6), generator=torch.Generator().manual_seed(3))
    plain = _plain(model, idx)
    L = model.config.n_layer
    # zeroing every head of every layer equals removing the attention sub-layers' weights
    zeroed = run_with_hooks(model, idx, {f"blocks.{i}.attn.z": (lambda z, n: torch.zeros_like(z)) for i in range(L)})
    assert not torch.allclose(zeroed, plain)
    # a uniform causal pattern in layer 0 changes the output
    def uniform(p, n):
        m = torch.ones_like(p).tril()  # (T, T) causal: every visible key the same weight
        return m / m.sum(-1, keepdim=True)
    u = run_with_hooks(model, idx, {"blocks.0.attn.pattern": uniform})
    assert not torch.allclose(u, plain)
    # replacing the last residual stream with another prompt's gives that prompt's logits exactly
    other = torch.randint(0, 40, (1, 6), generator=torch.Generator().manual_seed(4))
    other_logits, cache = run_with_cache(model, other)
    name = f"blocks.{L - 1}.resid_post"
    assert torch.equal(run_with_hooks(model, idx, {name: lambda x, n: cache[name]}), other_logits)
    # patching every position of the first block's input restores the other prompt's logits exactly
    assert torch.equal(run_with_hooks(model, idx, {"blocks.0.resid_pre": lambda x, n: cache["blocks.0.resid_pre"]}),
                       other_logits)


def test_hooks_are_removed_even_after_an_error():
    model = _gpt()
    idx = torch.tensor([[1, 2, 3]])

    def boom(x, name):
        raise KeyError("boom")
    with pytest.raises(KeyError):
        run_with_hooks(model, idx, {"blocks.0.resid_pre": boom})
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


def test_bad_names_shapes_and_pattern_without_explicit_path():
    model = _gpt()
    idx = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="unknown hook name"):
        run_with_hooks(model, idx, {"blocks.9.resid_pre": lambda x, n: None})
    with pytest.raises(ValueError, match="unknown hook name"):
        run_with_hooks(model, idx, {"blocks.0.resid": lambda x, n: None})
    with pytest.raises(TypeError, match="hooks must be"):
        run_with_hooks(model, idx, [("blocks.0.resid_pre", 3)])
    with pytest.raises(ValueError, match="returned shape"):
        run_with_hooks(model, idx, {"blocks.0.resid_pre": lambda x, n: x[:, :1]})
    with pytest.raises(TypeError, match="GPT or Llama"):
        hook_names(torch.nn.Linear(2, 2))
    with pytest.raises(RuntimeError, match="return_attention=True"):
        with hooks(model, {"blocks.0.attn.pattern": lambda p, n: None}):
            model(idx)  # the fused kernel forms no pattern: the hook would be ignored
    with hooks(model, {"blocks.0.attn.pattern": lambda p, n: None}) as fired:
        model(idx, return_attention=True)
    assert fired == {"blocks.0.attn.pattern": 1}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_no_host_sync_on_cuda():
    model = _gpt().cuda()
    idx = torch.randint(0, 40, (2, 9), device="cuda")
    names = hook_names(model)
    run_with_cache(model, idx, names)  # warm-up (first calls may sync while kernels load)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        logits, cache = run_with_cache(model, idx, names)
        run_with_hooks(model, idx, {n: (lambda x, _n: x * 1.0) for n in names})
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert logits.device.type == "cuda"


@pytest.mark.parametrize("make", MODELS)
def test_run_blocks_finishes_the_forward_pass(make):
    from llmbook.hooks import run_blocks
    from llmbook.kv_cache import KVCache

    model = make()
    idx = torch.randint(0, 40, (2, 7), generator=torch.Generator().manual_seed(8))
    L = model.config.n_layer
    names = [f"blocks.{i}.resid_pre" for i in range(L)] + [f"blocks.{L - 1}.resid_post"]
    logits, cache = run_with_cache(model, idx, names)
    for i in range(L):
        final = run_blocks(model, cache[f"blocks.{i}.resid_pre"], i)
        torch.testing.assert_close(final, cache[f"blocks.{L - 1}.resid_post"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(unembed(model, final), logits, rtol=1e-5, atol=1e-5)
    # with a key/value cache of the first 4 positions, the last 3 continue them from any block on
    kv = KVCache(model.config, 2, max_len=7)
    run_with_hooks(model, idx[:, :4], {}, kv_cache=kv)
    assert kv.length == 4
    out = run_blocks(model, cache[f"blocks.{L - 1}.resid_pre"][:, 4:], L - 1, kv_cache=kv)
    assert kv.length == 7
    torch.testing.assert_close(unembed(model, out), logits[:, 4:], rtol=1e-5, atol=1e-5)
    # blocks run from `start` fire their hooks; earlier ones do not
    with hooks(model, [(f"blocks.{i}.attn_out", lambda x, n: None) for i in range(L)]) as fired:
        run_blocks(model, cache[f"blocks.{L - 1}.resid_pre"], L - 1)
    assert fired == {f"blocks.{L - 1}.attn_out": 1}
    with pytest.raises(ValueError, match="start"):
        run_blocks(model, cache["blocks.0.resid_pre"], L)
    with pytest.raises(ValueError, match="resid"):
        run_blocks(model, cache["blocks.0.resid_pre"][..., :3], 0)
