"""The three descriptions of the environment (Makefile, pyproject.toml, environment.yml) agree."""

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _makefile_var(name: str) -> str:
    match = re.search(rf"^{name}\s*\??:?=\s*(.+)$", (REPO / "Makefile").read_text(), re.M)
    assert match, f"{name} not set in the Makefile"
    return match.group(1).strip()


def test_conda_env_matches_makefile():
    env = (REPO / "environment.yml").read_text()
    assert _makefile_var("TORCH") in env, "environment.yml must pin the same torch as the Makefile"
    assert "-e .[test]" in env
    for pkg in _makefile_var("NODEPS").split():
        assert pkg in env, f"environment.yml must say how to install {pkg} (--no-deps)"


def test_pyproject_torch_range_admits_the_pinned_cpu_build():
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    torch_req = next(d for d in deps if d.startswith("torch"))
    pinned = _makefile_var("TORCH").split("==")[1]
    low = torch_req.split(">=")[1]
    as_tuple = lambda v: tuple(int(x) for x in v.split(".")[:2])
    assert as_tuple(pinned) >= as_tuple(low), (torch_req, pinned)
    assert "==" not in torch_req and "<" not in torch_req, "a pinned torch here would make pip replace a user's CUDA build"


def test_readme_names_the_two_commands():
    readme = (REPO / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    for nb in re.findall(r"\(notebooks/([^)]+\.ipynb)\)", readme):
        assert (REPO / "notebooks" / nb).exists(), f"README links notebooks/{nb}, which does not exist"


def test_every_notebook_is_in_the_readme_and_notebook_links_resolve():
    """Each chapter notebook is linked from the README, and every relative .ipynb link in a
    notebook's markdown (the roadmap in chapter 0, cross references) points to a notebook that exists."""
    import json

    readme = (REPO / "README.md").read_text()
    notebooks = sorted((REPO / "notebooks").glob("*.ipynb"))
    assert notebooks
    for nb in notebooks:
        assert f"(notebooks/{nb.name})" in readme, f"README does not link notebooks/{nb.name}"
        for cell in json.loads(nb.read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for target in re.findall(r"\]\(([^)#\s]+\.ipynb)", "".join(cell["source"])):
                if "://" in target:
                    continue
                assert (nb.parent / target).exists(), f"{nb.name} links {target}, which does not exist"
