"""llmbook.progress: a notebook bar's saved text is its final line, not the "0%" it started with."""

import nbformat
from nbclient import NotebookClient

from llmbook.progress import in_notebook, tqdm


def _run_cell(source: str) -> list[dict]:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    return nb.cells[0].outputs


def _texts(outputs) -> list[str]:
    return [o["data"]["text/plain"] for o in outputs if o["output_type"] == "display_data"]


def test_outside_a_notebook_it_is_tqdm_auto():
    assert not in_notebook()
    assert list(tqdm(range(4), disable=True)) == [0, 1, 2, 3]


def test_saved_notebook_bar_shows_the_final_line():
    outputs = _run_cell(
        "from llmbook.progress import tqdm, in_notebook\n"
        "assert in_notebook()\n"
        "for _ in tqdm(range(7), desc='steps'):\n    pass\n"
        "bar = tqdm(total=5, desc='gone', leave=False)\nbar.update(5)\nbar.close()\n"
        "with tqdm(total=4, desc='manual') as b:\n    b.update(4)\n"
    )
    texts = _texts(outputs)
    assert len(texts) == 3, outputs
    assert texts[0].startswith("steps: 100%") and "7/7" in texts[0], texts[0]
    assert "0%|" not in texts[0].replace("100%|", "")
    assert texts[1] == ""  # leave=False: no stale line left behind
    assert texts[2].startswith("manual: 100%") and "4/4" in texts[2], texts[2]
    # the widget is still there for a live notebook
    assert all("application/vnd.jupyter.widget-view+json" in o["data"] for o in outputs if o["output_type"] == "display_data" and o["data"]["text/plain"])


def test_stopped_bar_shows_where_it_stopped():
    outputs = _run_cell(
        "from llmbook.progress import tqdm\n"
        "bar = tqdm(total=10, desc='cut')\nbar.update(3)\nbar.close()\n"
    )
    (text,) = _texts(outputs)
    assert text.startswith("cut:  30%") and "3/10" in text, text


def test_disabled_bar_displays_nothing():
    outputs = _run_cell("from llmbook.progress import tqdm\nfor _ in tqdm(range(3), disable=True):\n    pass\n")
    assert _texts(outputs) == []
