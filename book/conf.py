"""Sphinx configuration of the web book (``make html``, built by ``scripts/build_book.py``).

The book's pages are the notebooks with their committed outputs, read by MyST-NB (Jupyter
Book's own notebook reader) and laid out by the Sphinx Book Theme. Nothing is executed,
nothing is fetched at build time, and no page loads anything from the network when read:
MathJax 2.7 is the copy shipped in ``jupyter-server-mathjax`` (copied next to the pages by
the build script), the widget manager's CDN scripts are switched off, and the explorers are
drawn by the book's own renderer from the state each notebook saved.

This file is copied, with ``intro.md`` and ``_llmbook_static/``, into the folder the build
script stages the notebooks in; ``_toc.yml`` is written there in chapter order.
"""

project = "How large language models work"
author = "the llmbook authors"
copyright = "the llmbook authors"

extensions = [
    "myst_nb",  # notebooks and Markdown (MyST)
    "sphinx_external_toc",  # the table of contents from _toc.yml (Jupyter Book's format)
    "sphinx_design",  # dropdowns: the folded discussions of exercises
    "sphinx_copybutton",  # a copy button on every code cell
    "sphinx_togglebutton",  # the styling of folded cells
]
external_toc_path = "_toc.yml"
external_toc_exclude_missing = True
exclude_patterns = ["_build", "**.ipynb_checkpoints", "_llmbook_static"]

# The notebooks are shown as committed: never executed here.
nb_execution_mode = "off"
# No widget manager from a CDN (require.js, @jupyter-widgets/html-manager): the build script
# replaces every widget output by static HTML and the book's renderer.
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header", "mystnb.unknown_mime_type", "misc.highlighting_failure"]

# MathJax 2.7 from the local copy (relative to _static/): its TeX configuration with Safe (no
# javascript: links in TeX). myst-parser's own MathJax set-up writes MathJax 3's options, so it
# is off, and tex2jax is told here where the equations are: the elements MyST marks `math`.
myst_update_mathjax = False
mathjax_path = "mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full,Safe"
mathjax2_config = {
    "tex2jax": {
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "processEscapes": False,
        "processEnvironments": False,
        "ignoreClass": "bd-main",
        "processClass": "math",
    },
    # The package ships only the STIX web fonts: never look for local, TeX or image fonts.
    "HTML-CSS": {"availableFonts": [], "preferredFont": None, "webFont": "STIX-Web", "imageFont": None},
}

html_theme = "sphinx_book_theme"
html_title = "How large language models work"
html_static_path = ["_llmbook_static"]
html_css_files = ["llmbook.css"]
# The explorers' renderer (lib/llmbook/viz/frontend/render.js + static.js) as a classic script:
# a module script is refused from file:// by Chromium.
html_js_files = [("llmbook-render.js", {"defer": "defer"})]
# Search works from disk; its result summaries would fetch each page, which file:// refuses.
html_show_search_summary = False
html_copy_source = False
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": True,
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "use_repository_button": False,
    "navigation_with_keys": True,
    "show_prev_next": True,
}


def setup(app):
    # MathJax on every page, not only on pages with equations: chapter titles in the sidebar,
    # the previous/next links and the search page hold TeX too (chapter 3b's T x T).
    app.set_html_assets_policy("always")
