"""`make lab` serves the book on 127.0.0.1 only, and with JupyterLab's token required."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def _non_loopback_ip() -> str | None:
    """An address of this machine that is not loopback, if it has one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: nothing is sent by a UDP connect
            ip = s.getsockname()[0]
    except OSError:
        return None
    return None if ip.startswith("127.") else ip


@pytest.fixture
def lab_server(tmp_path):
    port = _free_port()
    env = dict(os.environ)
    env.pop("JUPYTER_TOKEN", None)
    env["JUPYTER_CONFIG_DIR"] = str(tmp_path / "config")
    env["JUPYTER_RUNTIME_DIR"] = str(tmp_path / "runtime")
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            # -o: take the set-up as done (make test has just made it), so only the
            # lab recipe itself runs here.
            ["make", "--no-print-directory", "-o", ".venv/.llmbook-installed", "lab", f"LAB_ARGS=--no-browser --ServerApp.port={port} --ServerApp.port_retries=0"],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
    try:
        token = None
        deadline = time.time() + 180
        while time.time() < deadline and token is None:
            if proc.poll() is not None:
                pytest.fail(f"make lab exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            match = re.search(rf"http://127\.0\.0\.1:{port}/lab\S*\?token=([0-9a-f]+)", log.read_text())
            token = match.group(1) if match else None
            time.sleep(0.5)
        assert token, f"no token URL in the log of make lab:\n{log.read_text()[-3000:]}"
        yield port, token, log
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except ProcessLookupError:
            pass  # already gone
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def test_make_lab_requires_token_and_binds_loopback(lab_server):
    port, token, log = lab_server
    base = f"http://127.0.0.1:{port}"
    assert len(token) >= 32, "JupyterLab's generated token should be long and random"
    assert _status(f"{base}/api/status") == 403
    assert _status(f"{base}/api/status?token=wrong{token}") == 403
    assert _status(f"{base}/api/status?token={token}") == 200
    # The book's first chapter is what it opens, from the link it prints too (review 2026-11-26,
    # UX #12: a reader on a remote machine, WSL or a container follows that link, and a plain
    # /lab link lands on the Launcher).
    printed = re.findall(rf"http://127\.0\.0\.1:{port}(/\S*)\?token=", log.read_text())
    assert printed and all(p == "/lab/tree/notebooks/00_introduction.ipynb" for p in printed), printed
    assert _status(f"{base}/api/contents/notebooks/00_introduction.ipynb?token={token}&content=0") == 200
    assert _status(f"{base}/lab/tree/notebooks/00_introduction.ipynb?token={token}") == 200
    ip = _non_loopback_ip()
    if ip is not None:
        with socket.socket() as s:
            s.settimeout(3)
            assert s.connect_ex((ip, port)) != 0, f"the server also answers on {ip}; it must bind 127.0.0.1 only"
