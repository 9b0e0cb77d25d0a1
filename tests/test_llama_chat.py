"""The book's chat rendering (``render_chat``) against transformers' ``apply_chat_template``.

SmolLM2's GGUF file carries its Jinja chat template (``tokenizer.chat_template``);
transformers rebuilds the tokenizer from the same file, so both render the same template.
"""

import pytest

from llmbook.llama import load_tokenizer, render_chat

CHATS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You answer in one word."},
     {"role": "user", "content": "Capital of Peru?"}],
    [{"role": "user", "content": "Hi!"},
     {"role": "assistant", "content": "Hello. How can I help?"},
     {"role": "user", "content": "Name a colour.\nJust one."}],
]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer()


def test_gguf_tokenizer_carries_a_chat_template(tok):
    assert isinstance(tok.chat_template, str) and "<|im_start|>" in tok.chat_template


@pytest.mark.parametrize("messages", CHATS)
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_render_chat_matches_apply_chat_template(tok, messages, add_generation_prompt):
    ours = render_chat(tok.chat_template, messages, add_generation_prompt=add_generation_prompt)
    ref = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    assert ours == ref
    # and the token ids agree too (no special token added twice)
    ids = tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=add_generation_prompt)
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids  # BatchEncoding in newer transformers
    assert tok.encode(ours) == list(ids)


def test_default_system_prompt_and_generation_prompt(tok):
    s = render_chat(tok.chat_template, CHATS[0])
    assert s.startswith("<|im_start|>system\n") and s.endswith("<|im_start|>assistant\n")
    assert "<|im_start|>system" not in render_chat(tok.chat_template, CHATS[1])[1:]


def test_render_chat_bad_input():
    with pytest.raises(ValueError, match="template"):
        render_chat("", CHATS[0])
    with pytest.raises(ValueError, match="messages"):
        render_chat("{{ messages }}", [{"role": "user"}])
    with pytest.raises(ValueError, match="messages"):
        render_chat("{{ messages }}", "hello")
