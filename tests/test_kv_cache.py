"""One idea, one API: the causal mask, the key/value cache and ``generate``'s convention are
shared by the GPT and the LLaMA (issue 13 item 4)."""

import pytest
import torch

import llmbook.attention as attention
import llmbook.gpt as gpt
import llmbook.llama as llama
from llmbook.gpt import GPT, GPTConfig
from llmbook.kv_cache import KVCache
from llmbook.llama import Llama, LlamaConfig


def test_one_definition_of_each():
    assert gpt.causal_mask is attention.causal_mask
    assert gpt.KVCache is KVCache and llama.KVCache is KVCache


@pytest.mark.parametrize("Tq, Tk, offset", [(1, 1, 0), (4, 4, 0), (1, 7, 6), (3, 9, 6), (2, 5, 1)])
def test_causal_mask_offset_is_the_shifted_lower_triangle(Tq, Tk, offset):
    want = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=offset)
    assert torch.equal(attention.causal_mask(Tq, Tk, offset=offset), want)


def test_causal_mask_window_keeps_the_last_w_keys():
    m = attention.causal_mask(6, window=3)
    assert m.sum(-1).tolist() == [1, 2, 3, 3, 3, 3]
    assert torch.equal(attention.causal_mask(5), attention.causal_mask(5, 5))


@pytest.mark.parametrize("call, exc, name", [
    (lambda: attention.causal_mask(0), ValueError, "n_query"),
    (lambda: attention.causal_mask(3, 0), ValueError, "n_key"),
    (lambda: attention.causal_mask(3, 3, offset=-1), ValueError, "offset"),
    (lambda: attention.causal_mask(3, 3.0), TypeError, "n_key"),
    (lambda: attention.causal_mask(3, window=0), ValueError, "window"),
])
def test_causal_mask_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def _gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, d_model=16, d_ff=32)).eval()


def _llama():
    torch.manual_seed(0)
    return Llama(LlamaConfig.tiny()).eval()


def test_generate_returns_prompt_then_new_tokens_for_both_models():
    prompt = torch.tensor([[1, 2, 3], [4, 5, 6]])
    a = _gpt().generate(prompt, 5, temperature=0)
    b = llama.generate(_llama(), prompt, 5, temperature=0)
    for out in (a, b):
        assert out.shape == (2, 8)
        assert torch.equal(out[:, :3], prompt)
    assert torch.equal(llama.generate(_llama(), prompt, 0), prompt)  # nothing new: the prompt


def test_both_models_take_the_cache_by_one_keyword():
    import inspect

    from llmbook.decoding import TruncatedLlama
    for forward in (GPT.forward, Llama.forward, TruncatedLlama.forward):
        params = inspect.signature(forward).parameters
        assert "kv_cache" in params and "cache" not in params, forward.__qualname__
        assert params["kv_cache"].default is None
    # the blocks and attention layers below them name it the same way
    for forward in (gpt.Block.forward, gpt.CausalSelfAttention.forward, llama.LlamaBlock.forward,
                    llama.GroupedQueryAttention.forward):
        assert "kv_cache" in inspect.signature(forward).parameters, forward.__qualname__


def test_same_cache_api_in_both_models_and_truncate_rolls_back():
    for model, call in ((_gpt(), lambda m, x, c: m(x, kv_cache=c)[0]), (_llama(), lambda m, x, c: m(x, kv_cache=c))):
        ids = torch.tensor([[3, 1, 4, 1, 5, 9]])
        cache = KVCache(model.config, 1, 16)
        assert not cache.allocated and cache.length == 0
        full = call(model, ids, None)
        part = call(model, ids[:, :4], cache)
        assert cache.length == 4 and cache.allocated
        torch.testing.assert_close(part, full[:, :4])
        call(model, torch.tensor([[7, 7]]), cache)  # a wrong continuation ...
        cache.truncate(4)  # ... rolled back
        torch.testing.assert_close(call(model, ids[:, 4:], cache), full[:, 4:], rtol=1e-5, atol=1e-5)
        assert cache.length == 6
        cache.reset()
        assert cache.length == 0


def test_gqa_cache_stores_only_the_kv_heads():
    c = LlamaConfig.tiny()
    assert c.n_kv_head < c.n_head
    full = KVCache(LlamaConfig(**{**c.__dict__, "n_kv_head": c.n_head}), 1, 10, device="meta")
    grouped = KVCache(c, 1, 10, device="meta")
    assert full.nbytes() / grouped.nbytes() == c.n_head / c.n_kv_head
    assert KVCache(GPTConfig.baby(vocab_size=10), 2).shape == (2, 4, 64, 32)  # max_len = block_size


@pytest.mark.parametrize("call, exc, name", [
    (lambda: KVCache(GPTConfig.baby(vocab_size=10), 0), ValueError, "batch_size"),
    (lambda: KVCache(LlamaConfig.tiny(), 1), ValueError, "max_len"),
    (lambda: KVCache(LlamaConfig.tiny(), 1, 0), ValueError, "max_len"),
    (lambda: KVCache("config", 1, 4), TypeError, "config"),
    (lambda: KVCache(LlamaConfig.tiny(), 1, 4, dtype="float16"), TypeError, "dtype"),
])
def test_kv_cache_bad_input(call, exc, name):
    with pytest.raises(exc, match=name):
        call()


def test_kv_cache_overflow_and_bad_truncate():
    cache = KVCache(LlamaConfig.tiny(), 1, 4)
    m = _llama()
    m(torch.tensor([[1, 2, 3]]), kv_cache=cache)
    with pytest.raises(ValueError, match="KV cache full"):
        m(torch.tensor([[1, 2]]), kv_cache=cache)
    with pytest.raises(ValueError, match="n must be"):
        cache.truncate(5)


# ------------------------------------------------- no second definition (grep, issue 13 item 4)
def _written_then_checked(source: str) -> bool:
    """A cell that imports the library's version and asserts the written one equal to it."""
    import re
    lib_names = {n.strip().split(" as ")[-1] for m in re.finditer(r"from llmbook\.[\w.]+ import ([\w, ]+)", source)
                 for n in m.group(1).split(",")}
    checks = re.findall(r"(?:assert_close|torch\.equal)\(([^\n]*)", source)
    return bool(lib_names) and any(n in c or "library" in c for c in checks for n in lib_names)


def test_written_then_checked_needs_the_library_and_an_assert():
    written = "class ListKVCache:\n    pass\nfrom llmbook.kv_cache import KVCache\n"
    assert not _written_then_checked(written)                                        # no check
    assert not _written_then_checked("class ListKVCache:\n    pass\ntorch.testing.assert_close(a, b)\n")  # no import
    assert _written_then_checked(written + "torch.testing.assert_close(ours, KVCache(cfg, 1))\n")


def test_no_second_definition_in_the_library_or_the_notebooks():
    """One causal mask (``attention.causal_mask``), one cache class (``kv_cache.KVCache``), one
    ``generate`` per model family; no library module or notebook builds a causal mask by hand
    with ``tril``/``triu``. Allowed: chapter 6a's step 2, which derives the averaging matrix
    with ``torch.tril`` and asserts it equal to the softmax over ``causal_mask``; asserts
    that attention weights are zero above the diagonal (``.triu(1)`` in an ``assert``); and
    exercise cells and their checkers (the ``exercises`` package builds the plausible wrong masks it
    names in its hints), where a mask built by hand is compared with the library's; and a cell that
    writes the mechanism in front of the reader (issue 26) and, in the same cell, asserts it equal to
    the library's (``assert_close``/``torch.equal`` against a name it imports from ``llmbook``)."""
    import json
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    owner = {r"def causal_mask\b": {"attention.py"}, r"class \w*Cache\b": {"kv_cache.py"},
             r"def generate\b": {"gpt.py", "llama.py"}, r"\b(tril|triu)\(": {"attention.py", "exercises"}}  # exercises: readers' right and wrong masks
    found = []
    for path in sorted((root / "lib" / "llmbook").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            for pattern, allowed in owner.items():
                if re.search(pattern, code) and not allowed & {path.name, path.parent.name} and ">>>" not in line:
                    found.append(f"{path.relative_to(root)}:{n}: {line.strip()}")
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for i, cell in enumerate(nb["cells"]):
            if cell["cell_type"] != "code" or "exercise" in cell.get("metadata", {}).get("llmbook", {}):
                continue
            for line in "".join(cell["source"]).splitlines():
                code = line.split("#", 1)[0]
                if re.search(r"def causal_mask\b|class \w*Cache\b|def generate\b", code):
                    if not _written_then_checked("".join(cell["source"])):
                        found.append(f"{path.name} cell {i}: {line.strip()}")
                elif re.search(r"\b(tril|triu)\(", code) and not code.lstrip().startswith("assert") and not (
                        path.name == "06a_build_gpt.ipynb" and code.startswith("A = torch.tril(")):
                    found.append(f"{path.name} cell {i}: {line.strip()}")
    assert not found, "a second definition of the causal mask, the KV cache or generate:\n" + "\n".join(found)
