"""render.js's pure functions agree with their Python counterparts (run in Node.js when it is installed).

The browser view redraws from the data Python sent: the softmax rescaling, the BPE tokens
after k merges and the byte-level labels are computed again in JavaScript. Here the module
is run in Node with a few lines appended that call those functions on inputs computed in
Python, and the answers must match ``rescale_attention``, ``tokens_at`` and
``byte_token_labels``. (The drawing itself is tested in a browser, tests/browser.)
"""

import json
import shutil
import subprocess

import pytest
import torch

from llmbook.viz.attention import byte_token_labels, rescale_attention
from llmbook.viz.bpe import bpe_trace, merge_history, tokens_at
from llmbook.viz.frontend import RENDER_JS

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="Node.js is not installed (the browser tests cover render.js)")


def _run(calls: str, data: dict):
    script = RENDER_JS + f"\nconst DATA = {json.dumps(data)};\nconsole.log(JSON.stringify({calls}));\n"
    out = subprocess.run([NODE, "--input-type=module", "-"], input=script, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_rescale_matches_python():
    w = torch.randn(5, 5, generator=torch.Generator().manual_seed(0)).softmax(-1).double()
    cases = [(1.0, False), (2.5, False), (0.3, True), (1.0, True)]
    got = _run("DATA.cases.map(([s, c]) => rescale(DATA.w, s, c))", {"w": w.tolist(), "cases": cases})
    for (scale, causal), js in zip(cases, got):
        torch.testing.assert_close(torch.tensor(js, dtype=torch.float64), rescale_attention(w, scale, causal), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("level", ["characters", "bytes"])
def test_bpe_tokens_after_k_merges_match_python(level):
    text = "the car\nthe cat\nthe rat\n今天天气很好。今天我去了商店。"
    trace = bpe_trace(text, level, 300)
    units, steps = merge_history(trace, text)
    ks = list(range(0, len(trace.pairs) + 1, 3))
    got = _run("DATA.ks.map((k) => tokensAt({units: DATA.units, steps: DATA.steps, level: DATA.level}, k))",
               {"units": units, "steps": steps, "level": level, "ks": ks})
    assert got == [tokens_at(units, steps, k, level) for k in ks]


def test_byte_labels_match_python():
    pieces = [b" cat", "今".encode()[:2], "今".encode()[2:] + "天".encode(), b"\xff", "🙂".encode()[:1], "🙂".encode()[1:]]
    got = _run("byteTokenLabels(DATA.runs)", {"runs": [list(p) for p in pieces]})
    assert got == byte_token_labels(pieces) == [" cat", "今[:2]", "今[2:]天", "<FF>", "🙂[:1]", "🙂[1:]"]


def test_dims_parsing_matches_python_and_clips_long_input():
    from llmbook.viz.positional import parse_dims

    got = _run("[parseDims('0, 4;16', 32), (() => { try { parseDims('x'.repeat(5000), 32); } catch (e) { return e.message; } })()]", {})
    assert got[0] == parse_dims("0, 4;16", 32)
    assert got[1].startswith("dims must be comma-separated integers") and len(got[1]) < 120
