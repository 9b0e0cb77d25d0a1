"""scripts/train_gpt.py under torchrun with 2 CPU processes (gloo) matches one process."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
