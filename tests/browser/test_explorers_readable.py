"""Every chapter's explorer is readable for every reader (review 2026-11-26, UX #1, #5, #7).

For each explorer, opened in JupyterLab's dark theme with the file browser open:

- at 1400 px wide, every piece of text in the explorer (SVG text drawn by the browser, HTML
  text, the ipywidgets' labels) has a contrast of at least 4.5:1 (WCAG AA) against the
  background it is drawn on, both computed from the colours the browser rendered (text
  drawn on a heatmap cell is chosen for that cell and left out);
- at 900 px wide (the window of a small laptop with the file browser open), the picture
  reflows instead of shrinking: no text of the explorer is drawn smaller than 9 px.
"""

import pytest

pytestmark = pytest.mark.browser

MIN_CONTRAST = 4.5
MIN_FONT_PX = 9.0

# Every text of the explorers (index-th .llmbook-explorer), with its contrast against what it is drawn on.
_CONTRASTS = r"""
(index) => {
  const root = document.querySelectorAll('.llmbook-explorer')[index];
  const parse = (c) => {
    const m = String(c).match(/rgba?\(([^)]+)\)/);
    if (!m) return null;
    const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (fg, bg) => [0, 1, 2].map((i) => fg[i] * fg[3] + bg[i] * (1 - fg[3]));
  const lum = (c) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]);
  };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      if (e instanceof SVGElement && !(e instanceof SVGSVGElement)) continue;
      const b = parse(getComputedStyle(e).backgroundColor);
      if (b && b[3] > 0) { layers.push(b); if (b[3] >= 1) break; }
    }
    let c = [255, 255, 255];
    for (const l of layers.reverse()) c = over(l, c);
    return c;
  };
  const opacity = (el) => { let o = 1; for (let e = el; e; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity); return o; };
  const shown = (el) => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const out = [];
  const add = (el, colour) => {
    const bg = background(el), fg = parse(colour);
    if (!fg) return;
    const a = fg[3] * opacity(el);
    out.push({ text: el.textContent.trim().slice(0, 40), ratio: ratio(over([fg[0], fg[1], fg[2], a], bg), bg) });
  };
  for (const t of root.querySelectorAll('svg text')) {
    if (!shown(t) || !t.textContent.trim() || t.classList.contains('llmbook-on-cell')) continue;
    add(t, getComputedStyle(t).fill);
  }
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('svg') || ['OPTION', 'SCRIPT', 'STYLE'].includes(el.tagName) || !shown(el)) continue;
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    add(el, getComputedStyle(el).color);
  }
  return out;
}
"""

# The size every text of the explorer is drawn at on screen (px), SVG scaling included.
_SIZES = r"""
(index) => {
  const root = document.querySelectorAll('.llmbook-explorer')[index];
  const out = [];
  for (const t of root.querySelectorAll('svg text')) {
    if (!t.getClientRects().length || !t.textContent.trim()) continue;
    const m = t.getScreenCTM();
    out.push({ text: t.textContent.trim().slice(0, 40), px: parseFloat(getComputedStyle(t).fontSize) * Math.hypot(m.a, m.b) });
  }
  for (const el of root.querySelectorAll('*')) {
    if (el.closest('svg') || !el.getClientRects().length) continue;
    if (![...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim())) continue;
    out.push({ text: el.textContent.trim().slice(0, 40), px: parseFloat(getComputedStyle(el).fontSize) });
  }
  return out;
}
"""

FIXTURES = {
    "ch00": "tests/browser/fixtures/ch00_next_char.ipynb",
    "ch01a_bpe": "tests/browser/fixtures/ch01_bpe_explorer.ipynb",
    "ch01a_compare": "tests/browser/fixtures/ch01_tokenizer_compare.ipynb",
    "ch03": "tests/browser/fixtures/ch03_attention_explorer.ipynb",
    "ch04": "tests/browser/fixtures/ch04_norm.ipynb",
    "ch05": "tests/browser/fixtures/ch05_positional.ipynb",
    "ch06b": "tests/browser/fixtures/ch06_sampling.ipynb",
    "ch07": "tests/browser/fixtures/ch07_masked_word.ipynb",
    "ch07_model_view": "tests/browser/fixtures/ch_model_view.ipynb",
    "ch08e": "tests/browser/fixtures/ch08e_lens.ipynb",  # the logit-lens grid (HTML) and the patching view
    "ch09": "tests/browser/fixtures/ch09_checkpoints.ipynb",
}


# Explorers known to fail, strict (the entry goes when the explorer is fixed). Empty since the logit-lens
# grid writes white only on a shade <= 95 (probability >= 0.627) and black on lighter cells (both >= 4.6:1);
# it used to write white above probability 0.6 (4.28:1 at 0.6001).
KNOWN_LOW: dict[str, str] = {}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=KNOWN_LOW[n]))
                                  if n in KNOWN_LOW else n for n in FIXTURES])
def test_explorer_is_readable_in_the_dark_theme_and_at_900px(dark_lab, name):
    lab = dark_lab
    lab.open(FIXTURES[name])
    page = lab.page
    assert page.evaluate("() => document.body.dataset.jpThemeLight") == "false", "the dark theme is not on"
    n = page.locator(".llmbook-explorer").count()
    assert n >= 1
    for i in range(n):
        page.locator(".llmbook-explorer").nth(i).scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        texts = page.evaluate(_CONTRASTS, i)
        # the explorer drew its picture: text of its own, or an image (a matplotlib picture carries its own
        # light background, so its text is not measured)
        images = page.locator(".llmbook-explorer").nth(i).locator(".llmbook-view img").count()
        assert len(texts) >= 5 or (texts and images), (texts, images)
        low = sorted((t for t in texts if t["ratio"] < MIN_CONTRAST), key=lambda t: t["ratio"])
        assert not low, f"{name}: text below {MIN_CONTRAST}:1 in the dark theme: {low[:8]}"
    lab.save_screenshot(f"{name}_dark")

    page.set_viewport_size({"width": 900, "height": 768})
    page.wait_for_timeout(1500)  # JupyterLab lays out again, then the pictures redraw for their width
    for i in range(n):
        page.locator(".llmbook-explorer").nth(i).scroll_into_view_if_needed()
        page.wait_for_timeout(300)
        sizes = page.evaluate(_SIZES, i)
        small = sorted((s for s in sizes if s["px"] < MIN_FONT_PX - 0.05), key=lambda s: s["px"])
        assert not small, f"{name}: text under {MIN_FONT_PX} px at 900 px wide: {small[:8]}"
    lab.save_screenshot(f"{name}_900px")
