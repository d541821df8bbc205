"""The notebooks read well on GitHub: prose between the cells, committed with a scripted run's outputs.

``test_notebooks_fresh.py`` re-executes each notebook and compares its outputs;
these checks are about the committed file a reader sees without running anything.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text_outputs(cell: dict) -> str:
    return "".join("".join(o.get("text", "")) for o in cell.get("outputs", []))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_tells_its_story_in_prose(path):
    kinds = [c["cell_type"] for c in cells(path)]
    assert kinds[0] == "markdown" and kinds[-1] == "markdown", "start with what it shows; end with where to go next"
    longest_code_run = max(len(run) for run in re.findall("c+", "".join(k[0] for k in kinds)))
    assert longest_code_run <= 2, f"{path.name}: {longest_code_run} code cells in a row without a word between"
    assert kinds.count("markdown") >= kinds.count("code") * 0.75


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_is_committed_with_the_outputs_of_one_clean_scripted_run(path):
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in code] == list(range(1, len(code) + 1)), "run top to bottom once"
    outputs = [o for c in code for o in c["outputs"]]
    assert outputs, f"{path.name} has no outputs"
    assert not [o for o in outputs if o["output_type"] == "error" or o.get("name") == "stderr"]
    shown = "".join(text_outputs(c) for c in code)
    if any("OPENAI_API_KEY" in "".join(c["source"]) for c in code):
        # A notebook that can switch to a real model prints which one it ran on.
        assert "model: scripted (offline)" in shown, "outputs must come from the scripted model"
    assert not re.search(r"(/tmp/|/home/|/root/|/work/)", shown), "no machine paths in the outputs"
