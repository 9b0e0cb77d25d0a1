"""scripts/train_gpt.py under torchrun with 2 CPU processes (gloo) matches one process."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from llmbook.gpt import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--preset", "tiny", "--steps", "4", "--batch-size", "8", "--data-chars", "200000",
        "--eval-interval", "4", "--eval-batches", "2", "--no-progress", "--print-losses"]


def _losses(cmd):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "lib")}
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("LOSSES ")][-1]
    return json.loads(line[len("LOSSES "):])


def test_ddp_two_cpu_processes_match_one():
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun not found")
    single = _losses([sys.executable, "scripts/train_gpt.py", *ARGS])
    ddp = _losses([torchrun, "--standalone", "--nproc_per_node=2", "scripts/train_gpt.py", *ARGS])
    assert len(single) == len(ddp) == 4
    for a, b in zip(single, ddp):
        assert abs(a - b) < 1e-4, (single, ddp)


def _torchrun():
    return shutil.which("torchrun", path=str(Path(sys.executable).parent)) or shutil.which("torchrun")


def test_ddp_grad_accum_two_processes_equal_one(tmp_path):
    """grad_accum=2 under DDP (no_sync on the first micro-batch) gives the weights of one process.

    Each of the 2 gloo processes trains on its half of every global batch; DDP averages
    the gradients, which is the gradient of the full batch that the single process sees.
    Before the fix ``net.no_sync()`` was entered twice per micro-batch and this crashed.
    """
    from safetensors.torch import load_file

    torchrun = _torchrun()
    if torchrun is None:
        pytest.skip("torchrun not found")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT / "lib")}
    single, ddp = tmp_path / "single.safetensors", tmp_path / "ddp.safetensors"
    for cmd in ([sys.executable, "tests/ddp_accum_worker.py", str(single)],
                [torchrun, "--standalone", "--nproc_per_node=2", "tests/ddp_accum_worker.py", str(ddp)]):
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, out.stderr[-3000:]
    a, b = load_file(str(single)), load_file(str(ddp))
    assert a.keys() == b.keys() and len(a) > 5
    for name in a:
        # Same arithmetic in a different order (two half-batch means averaged vs one mean):
        # float32 rounding only.
        torch.testing.assert_close(a[name], b[name], rtol=1e-5, atol=1e-6, msg=name)
    torch.manual_seed(0)  # the initial weights, to check that training moved them
    init = GPT(GPTConfig(vocab_size=17, block_size=8, n_layer=1, n_head=2, d_model=16, d_ff=32, bias=False)).state_dict()
    moved = sum(not torch.equal(init[k], a[k]) for k in a)
    assert moved > 5
