"""Browser tests of the book's widgets: JupyterLab driven by Playwright in headless Chromium.

Each test gets a fresh JupyterLab server on a free loopback port (token auth off, which
is allowed only here, inside the tests), opens a small fixture notebook, runs all
cells, moves a named control and compares screenshots of the widget's view.

The fixture ``lab`` offers:

- ``lab.open(path)``: open a notebook (path relative to the repo root), Run All, wait
  until the kernel is idle and a ``.llmbook-view`` is attached;
- ``lab.open_unrun(path)``: open a notebook without running any cell;
- ``lab.view_png(index=0)``: PNG bytes of the index-th ``.llmbook-view``;
- ``lab.move_slider(name, steps)``, ``lab.set_slider(name, value)``,
  ``lab.set_text(name, text)``, ``lab.select(name, label)``, ``lab.toggle(name)``,
  ``lab.click_option(name, label)``: act on the control with CSS class ``llmbook-ctl-<name>``
  and wait until the kernel has re-rendered;
- ``lab.error_text(index=0)``: the text shown in the inline error area; ``lab.view_is_stale()``:
  whether the view is greyed out after an error; ``lab.view_html()``: the view's markup;
- for explorers drawn in the browser (``llmbook.viz.frontend``): ``lab.view_svg(index=0)``,
  the markup of the index-th view's picture (SVG with its heatmap images, exact), and
  ``lab.front_slider(name, value)``, ``lab.front_select(name, label)``,
  ``lab.front_text(name, text)``, ``lab.front_toggle(name)``, ``lab.front_error(index)``:
  act on a control the browser draws (no kernel round trip; they wait for the redraw);
  ``lab.wait_view_change(before)``: wait for the picture to change after a Python control;
- ``lab.save_screenshot(label)``: a full-page PNG in ``tests/browser/screenshots/``.

Chromium is Debian's ``/usr/bin/chromium`` (``apt-get install chromium``); Playwright's
own browser download is never used.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHOTS = Path(__file__).resolve().parent / "screenshots"
CHROMIUM = os.environ.get("LLMBOOK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
# How long one re-render may take after a control moves (the kernel is single-threaded
# and the CI machine has two cores).
RENDER_TIMEOUT_S = 60


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/browser" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterServer:
    """A JupyterLab server in a private set of config/runtime/workspace folders."""

    def __init__(self, theme: str | None = None) -> None:
        self.port = _free_port()
        self.tmp = tempfile.mkdtemp(prefix="llmbook-lab-")
        env = dict(os.environ)
        for var, sub in (
            ("JUPYTER_CONFIG_DIR", "config"),
            ("JUPYTER_RUNTIME_DIR", "runtime"),
            ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
            ("IPYTHONDIR", "ipython"),
        ):
            env[var] = os.path.join(self.tmp, sub)
        env.pop("JUPYTER_TOKEN", None)
        # Private JupyterLab settings: no autosave (the fixture notebooks in the repo must
        # not be rewritten with outputs by a test run) and no news toast.
        settings = Path(self.tmp, "user-settings")
        for plugin, body in (
            ("@jupyterlab/docmanager-extension/plugin.jupyterlab-settings", '{"autosave": false}'),
            ("@jupyterlab/apputils-extension/notification.jupyterlab-settings", '{"fetchNews": "false"}'),
            *([("@jupyterlab/apputils-extension/themes.jupyterlab-settings", '{"theme": "%s"}' % theme)] if theme else []),
        ):
            target = settings / plugin
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
        # Keep figures and torch single-threaded and predictable inside the kernel.
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        self.log_path = os.path.join(self.tmp, "server.log")
        self._log = open(self.log_path, "w")
        cmd = [
            sys.executable, "-m", "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            # Token auth is switched off here only: this server lives for one test,
            # on loopback, in a throw-away config folder.
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--ServerApp.disable_check_xsrf=True",
            f"--ServerApp.root_dir={REPO}",
            "--LabApp.news_url=",
            f"--LabApp.user_settings_dir={settings}",
            *(["--allow-root"] if os.geteuid() == 0 else []),
        ]
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited early; log:\n{self.log()}")
            try:
                with urllib.request.urlopen(self.url + "/api/status", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within 90 s; log:\n{self.log()}")

    def log(self) -> str:
        try:
            return Path(self.log_path).read_text()[-5000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self._log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class Lab:
    """A JupyterLab page in Chromium, with helpers to drive llmbook widgets."""

    def __init__(self, page, server: JupyterServer, test_name: str) -> None:
        self.page = page
        self.server = server
        self.test_name = re.sub(r"[^A-Za-z0-9_.-]+", "_", test_name)

    # ------------------------------------------------------------ notebook level
    def open(self, path: str, timeout_s: float = 240) -> None:
        if not (REPO / path).exists():
            raise FileNotFoundError(f"fixture notebook {path} does not exist")
        page = self.page
        page.goto(f"{self.server.url}/lab/tree/{path}", wait_until="domcontentloaded")
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="attached", timeout=90_000)
        self._dismiss_toasts()
        self.wait_idle(timeout_s=90)
        # Under load, a Run All issued while the page is still settling can be lost;
        # check that execution started and retry if it did not.
        for attempt in range(3):
            self._run_all()
            if self._execution_started(timeout_s=30):
                break
        else:
            raise TimeoutError("Run All did not start executing the notebook after 3 attempts")
        page.wait_for_selector(".llmbook-view", state="attached", timeout=timeout_s * 1000)
        self.wait_idle(timeout_s=timeout_s)
        self._dismiss_toasts()
        self._raise_if_cell_error()

    def open_unrun(self, path: str) -> None:
        """Open a notebook without running it (the reader's view before any cell has run)."""
        if not (REPO / path).exists():
            raise FileNotFoundError(f"notebook {path} does not exist")
        self.page.goto(f"{self.server.url}/lab/tree/{path}", wait_until="domcontentloaded")
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Cell", state="attached", timeout=90_000)
        self._dismiss_toasts()
        self.wait_idle(timeout_s=90)

    def _run_all(self) -> None:
        page = self.page
        page.locator(".jp-NotebookPanel").first.click(position={"x": 5, "y": 5}, force=True)
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        # Give the kernel a moment to turn busy before waiting for idle.
        page.wait_for_timeout(1000)

    def _execution_started(self, timeout_s: float) -> bool:
        """True once some code cell shows an execution count or is running ([*])."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            prompts = self.page.locator(".jp-CodeCell .jp-InputArea-prompt").all_inner_texts()
            if any(re.search(r"\[(\d+|\*)\]", p) for p in prompts):
                return True
            self.page.wait_for_timeout(250)
        return False

    def _dismiss_toasts(self) -> None:
        # JupyterLab asks once whether to fetch "official Jupyter news"; answer no.
        for label in ("No", "Dismiss"):
            buttons = self.page.locator(".Toastify__toast button", has_text=re.compile(rf"^{label}$"))
            for i in range(buttons.count()):
                try:
                    buttons.nth(i).click(timeout=2000)
                except Exception:
                    pass

    def kernel_status(self) -> str:
        """'idle', 'busy', ... as shown by the notebook's kernel status indicator."""
        return self.page.evaluate(
            """() => {
                const el = document.querySelector('.jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator')
                    || document.querySelector('.jp-Notebook-ExecutionIndicator');
                if (el) { return (el.getAttribute('data-status') || el.title || el.textContent || '').toLowerCase(); }
                const bar = document.querySelector('#jp-main-statusbar');
                return bar ? bar.innerText.toLowerCase() : '';
            }"""
        )

    def wait_idle(self, timeout_s: float = 120, settle_ms: int = 800) -> None:
        """Wait until the kernel has been idle for ``settle_ms`` (no cell queued or running)."""
        deadline = time.time() + timeout_s
        idle_since = None
        while time.time() < deadline:
            status = self.kernel_status()
            queued = self.page.locator(".jp-InputArea-prompt", has_text="[*]").count()
            if "idle" in status and queued == 0:
                idle_since = idle_since or time.time()
                if (time.time() - idle_since) * 1000 >= settle_ms:
                    return
            else:
                idle_since = None
            self.page.wait_for_timeout(200)
        raise TimeoutError(f"kernel not idle after {timeout_s} s (status {self.kernel_status()!r})")

    def _raise_if_cell_error(self) -> None:
        errors = self.page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']", has_text="Traceback")
        if errors.count():
            raise AssertionError("a cell of the fixture notebook raised:\n" + errors.first.inner_text()[:3000])

    # ------------------------------------------------------------ widget level
    def _control(self, name: str):
        loc = self.page.locator(f".llmbook-ctl-{name}").first
        loc.wait_for(state="attached", timeout=30_000)
        loc.scroll_into_view_if_needed()
        return loc

    def _after_action(self) -> None:
        self.page.wait_for_timeout(300)
        self.wait_idle(timeout_s=RENDER_TIMEOUT_S)

    def move_slider(self, name: str, steps: int) -> None:
        handle = self._control(name).locator(".noUi-handle").first
        handle.focus()
        key = "ArrowRight" if steps > 0 else "ArrowLeft"
        for _ in range(abs(steps)):
            handle.press(key)
        # continuous_update=False sliders send their value on change; blur to be sure.
        handle.evaluate("e => e.blur()")
        self._after_action()

    def set_slider(self, name: str, value) -> None:
        readout = self._control(name).locator(".widget-readout").first
        readout.click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.type(str(value))
        self.page.keyboard.press("Enter")
        self._after_action()

    def set_text(self, name: str, text: str) -> None:
        box = self._control(name).locator("input, textarea").first
        box.fill(text)
        tag = box.evaluate("e => e.tagName")
        if tag == "INPUT":
            box.press("Enter")
        box.evaluate("e => e.blur()")
        self._after_action()

    def select(self, name: str, label: str) -> None:
        self._control(name).locator("select").first.select_option(label=label)
        self._after_action()

    def toggle(self, name: str) -> None:
        ctl = self._control(name)
        checkbox = ctl.locator("input[type=checkbox]")
        (checkbox.first if checkbox.count() else ctl).click()
        self._after_action()

    def click_option(self, name: str, label: str) -> None:
        self._control(name).locator("button", has_text=label).first.click()
        self._after_action()

    # ------------------------------------------------------------ reading the view
    def view_png(self, index: int = 0) -> bytes:
        view = self.page.locator(".llmbook-view").nth(index)
        view.wait_for(state="attached", timeout=30_000)
        view.scroll_into_view_if_needed()
        # Images inside the view decode asynchronously: wait until all have loaded.
        self.page.wait_for_function(
            """(i) => { const v = document.querySelectorAll('.llmbook-view')[i];
                        return v && [...v.querySelectorAll('img')].every(img => img.complete && img.naturalWidth > 0); }""",
            arg=index,
            timeout=30_000,
        )
        return view.screenshot()

    def view_src(self, index: int = 0) -> list[str]:
        """The image data the kernel sent to the view (exact, unlike a screenshot, which
        can differ by anti-aliasing when the layout above the view moves)."""
        self.view_png(index)  # waits for the images to load
        imgs = self.page.locator(".llmbook-view").nth(index).locator("img")
        return [imgs.nth(i).get_attribute("src") or "" for i in range(imgs.count())]

    # ------------------------------------------------------------ browser-drawn views
    def view_svg(self, index: int = 0) -> str:
        """Markup of the index-th view's browser-drawn picture (empty string if it has none yet)."""
        view = self.page.locator(".llmbook-view").nth(index)
        view.wait_for(state="attached", timeout=30_000)
        self.page.wait_for_function(
            """(i) => { const v = document.querySelectorAll('.llmbook-view')[i];
                        const p = v && v.querySelector('.llmbook-front-picture');
                        return p && p.innerHTML.length > 0; }""",
            arg=index,
            timeout=30_000,
        )
        return view.locator(".llmbook-front-picture").first.inner_html()

    def wait_view_change(self, before: str, index: int = 0, timeout_s: float = RENDER_TIMEOUT_S) -> str:
        """Wait until the index-th browser-drawn picture differs from ``before`` (a new spec from
        Python arrived and was drawn); return it. Times out with the picture unchanged."""
        self.page.wait_for_function(
            """([i, before]) => { const v = document.querySelectorAll('.llmbook-view')[i];
                                 const p = v && v.querySelector('.llmbook-front-picture');
                                 return p && p.innerHTML.length > 0 && p.innerHTML !== before; }""",
            arg=[index, before],
            timeout=timeout_s * 1000,
        )
        return self.view_svg(index)

    def _settle(self) -> None:
        # The browser redraws synchronously on a control event; give it a frame to settle.
        self.page.wait_for_timeout(150)

    def front_select(self, name: str, label: str) -> None:
        self._control(name).locator("select").first.select_option(label=label)
        self._settle()

    def front_slider(self, name: str, value) -> None:
        slider = self._control(name).locator("input[type=range]").first
        slider.evaluate("(e, v) => { e.value = String(v); e.dispatchEvent(new Event('input', {bubbles: true})); }", value)
        self._settle()

    def front_text(self, name: str, text: str) -> None:
        box = self._control(name).locator("input").first
        box.fill(text)
        box.press("Enter")
        self._settle()

    def front_toggle(self, name: str) -> None:
        self._control(name).locator("input[type=checkbox]").first.click()
        self._settle()

    def front_error(self, index: int = 0) -> str:
        return self.page.locator(".llmbook-front-error").nth(index).inner_text()

    def view_html(self, index: int = 0) -> str:
        """Inner HTML of the index-th view (exact: same images and text means the same picture)."""
        self.view_png(index)  # waits for the images to load
        return self.page.locator(".llmbook-view").nth(index).inner_html()

    def view_is_stale(self, index: int = 0) -> bool:
        """True while the view is greyed out after an error (its picture no longer matches the controls):
        a browser-drawn picture greys itself and shows its out-of-date note; a Python-drawn one is
        greyed by the view."""
        return self.page.locator(".llmbook-view").nth(index).evaluate(
            """v => { const pic = v.querySelector('.llmbook-front-picture');
                      if (pic) { const note = v.querySelector('.llmbook-front-stale');
                                 return parseFloat(getComputedStyle(pic).opacity) < 1 && getComputedStyle(note).display !== 'none'; }
                      const kid = v.firstElementChild;
                      return v.classList.contains('llmbook-stale') && !!kid && parseFloat(getComputedStyle(kid).opacity) < 1; }""")

    def error_text(self, index: int = 0) -> str:
        return self.page.locator(".llmbook-error").nth(index).inner_text()

    def save_screenshot(self, label: str) -> Path:
        SHOTS.mkdir(parents=True, exist_ok=True)
        path = SHOTS / f"{self.test_name}__{label}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(
            f"Chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install chromium) "
            "or set LLMBOOK_CHROMIUM to a Chromium binary"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw, tempfile.TemporaryDirectory(prefix="llmbook-fonts-") as fonts:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True, env=_font_env(Path(fonts)))
        yield b
        b.close()


def _font_env(folder: Path) -> dict:
    """Chromium's environment with the book's CJK font (from mplfonts) added to fontconfig, so
    Chinese in the widgets draws as characters, not boxes, on a machine without CJK fonts."""
    env = dict(os.environ)
    try:
        from llmbook.viz.style import cjk_font_path

        font = cjk_font_path()
    except Exception:  # the tests still run; Chinese shows as boxes in the screenshots
        font = None
    if font is None:
        return env
    (folder / "fonts").mkdir()
    (folder / "fonts" / Path(font).name).symlink_to(font)
    conf = folder / "fonts.conf"
    conf.write_text(
        '<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>'
        '<include ignore_missing="yes">/etc/fonts/fonts.conf</include>'
        f'<dir>{folder / "fonts"}</dir><cachedir>{folder / "cache"}</cachedir></fontconfig>'
    )
    env["FONTCONFIG_FILE"] = str(conf)
    return env


def _lab(browser, request, theme=None):
    server = JupyterServer(theme=theme)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    driver = Lab(page, server, request.node.name)
    try:
        yield driver
    except Exception:
        raise
    finally:
        if getattr(request.node, "rep_call_failed", False):
            try:
                driver.save_screenshot("FAILED")
            except Exception:
                pass
        context.close()
        server.stop()


@pytest.fixture
def lab(browser, request):
    yield from _lab(browser, request)


@pytest.fixture
def dark_lab(browser, request):
    """``lab`` with JupyterLab's dark theme ("JupyterLab Dark") set in the private settings."""
    yield from _lab(browser, request, theme="JupyterLab Dark")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed:
        item.rep_call_failed = True
