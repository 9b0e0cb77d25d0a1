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


ROOT = LIB.parents[1]
BANNED_CALLS = {"eval", "exec", "compile", "__import__"}
BANNED_ATTRS = {("torch", "load"), ("pickle", "load"), ("pickle", "loads"), ("yaml", "load"), ("marshal", "loads")}


def code_deserialisers(tree: ast.AST, where: str) -> list[str]:
    """Calls that can run code read from data: eval/exec/compile/__import__, pickle, marshal,
    yaml.load and torch.load (unless torch.load is told ``weights_only=True``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) else [])
            if any(n and n.split(".")[0] in {"pickle", "dill", "marshal", "shelve"} for n in names):
                found.append(f"{where}:{node.lineno} imports {names}")
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in BANNED_CALLS:
                found.append(f"{where}:{node.lineno} calls {f.id}()")
            if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (f.value.id, f.attr) in BANNED_ATTRS:
                safe = (f.value.id, f.attr) == ("torch", "load") and any(
                    k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True
                    for k in node.keywords)
                if not safe:
                    found.append(f"{where}:{node.lineno} calls {f.value.id}.{f.attr}()")
    return found


def _notebook_cells(path: Path):
    import json
    for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
        if cell["cell_type"] == "code":
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            # IPython magics and shell escapes are not Python
            src = "\n".join("" if l.lstrip().startswith(("%", "!")) else l for l in src.splitlines())
            yield i, src


def test_scanner_catches_planted_calls():
    tree = ast.parse("cfg = eval(meta['cfg'], {})\nimport pickle\nw = torch.load(p)\nok = torch.load(p, weights_only=True)")
    found = code_deserialisers(tree, "x")
    assert sorted(f.split(" ", 1)[1] for f in found) == ["calls eval()", "calls torch.load()", "imports ['pickle']"]


def test_notebooks_scripts_and_benchmarks_never_deserialise_code():
    """Issue 32: no eval/exec on anything read from a file anywhere; notebooks, scripts and
    benchmarks are scanned like the library (a crafted checkpoint must not run code)."""
    found = []
    for folder in ("scripts", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += code_deserialisers(ast.parse(path.read_text(encoding="utf-8")), f"{folder}/{path.name}")
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, src in _notebook_cells(path):
            try:
                tree = ast.parse(src)
            except SyntaxError:
                continue
            found += code_deserialisers(tree, f"{path.name} cell {i}")
    assert not found, found


def test_library_never_deserialises_code():
    """No pickle, torch.load, eval/exec or yaml.load anywhere in lib/ (checkpoints are safetensors,
    tokenizers JSON). Stricter than the scan of notebooks and scripts: not even torch.load with
    weights_only=True."""
    found = []
    for path in sorted(LIB.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += code_deserialisers(tree, path.name)
        found += [f"{path.name}:{n.lineno} calls torch.load()" for n in ast.walk(tree)
                  if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                  and isinstance(n.func.value, ast.Name) and (n.func.value.id, n.func.attr) == ("torch", "load")]
    assert not found, found
