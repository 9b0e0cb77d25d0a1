"""Security (issue 17, item 2 and neighbours): chat templates from model files run sandboxed,
and nothing in the library deserialises code (no pickle, torch.load, eval or exec)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

jinja2 = pytest.importorskip("jinja2")
from jinja2.exceptions import SecurityError  # noqa: E402

from llmbook.llama import render_chat  # noqa: E402

CHAT = [{"role": "user", "content": "hi"}]
LIB = Path(__file__).resolve().parents[1] / "lib" / "llmbook"


@pytest.mark.parametrize("template", [
    "{{ cycler.__init__.__globals__.os.system('touch MARKER') }}",
    "{{ joiner.__init__.__globals__['os'].getcwd() }}",
    "{{ lipsum.__globals__['os'].listdir('.') }}",
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__.__base__.__subclasses__() }}",
    "{{ (messages|first).__class__.__init__.__globals__ }}",
    "{% for m in messages %}{{ m.__class__.__dict__ }}{% endfor %}",
])
def test_template_reaching_python_internals_is_refused(template, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SecurityError):
        render_chat(template, CHAT)
    assert not (tmp_path / "MARKER").exists()


@pytest.mark.parametrize("template", [
    "{% set _ = messages.append({'role': 'x', 'content': 'y'}) %}{{ messages|length }}",
    "{% set _ = messages[0].update({'role': 'system'}) %}ok",
    "{% set _ = messages.pop() %}ok",
])
def test_template_cannot_mutate_the_messages(template):
    messages = [dict(m) for m in CHAT]
    with pytest.raises(SecurityError):
        render_chat(template, messages)
    assert messages == CHAT


def test_huge_range_is_refused():
    """Neighbour: the sandbox caps range() so a template cannot exhaust memory."""
    with pytest.raises(OverflowError):
        render_chat("{% for i in range(10**9) %}x{% endfor %}", CHAT)


def test_ordinary_templates_still_render():
    t = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] | trim }}\n{% endfor %}"
         "{% if add_generation_prompt %}<|assistant|>{% endif %}")
    assert render_chat(t, [{"role": "user", "content": " hi "}]) == "<|user|>hi\n<|assistant|>"
    assert render_chat("{{ messages | map(attribute='role') | join(',') }}", CHAT * 2) == "user,user"


def test_library_never_deserialises_code():
    """No pickle, torch.load, eval/exec or yaml.load anywhere in lib/ (checkpoints are safetensors,
    tokenizers JSON)."""
    banned_calls = {"eval", "exec", "compile", "__import__"}
    banned_attrs = {("torch", "load"), ("pickle", "load"), ("pickle", "loads"), ("yaml", "load"), ("marshal", "loads")}
    found = []
    for path in sorted(LIB.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
                if any(n and n.split(".")[0] in {"pickle", "dill", "marshal", "shelve"} for n in names):
                    found.append(f"{path.name}:{node.lineno} imports {names}")
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name) and f.id in banned_calls:
                    found.append(f"{path.name}:{node.lineno} calls {f.id}()")
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in banned_attrs:
                    found.append(f"{path.name}:{node.lineno} calls {f.value.id}.{f.attr}()")
    assert not found, found
