"""Each notebook, executed afresh on the scripted model, prints what it was committed with.

This is where the test command executes the notebooks, once each: a cell
that raises fails its notebook, and so does a committed output the code no
longer prints (ids, times, addresses and paths normalised), naming the
notebook and the cell and showing the diff. After changing a notebook or
what it prints, refresh the committed outputs with
``.venv/bin/python -m pytest -q -n 0 tests/integration/notebooks --refresh-notebooks``.
"""

from __future__ import annotations

import nbformat
import pytest

from helpers.notebooks import NOTEBOOKS, execute, normalised, refresh, stale_outputs

pytestmark = pytest.mark.notebooks

REFRESH_HINT = "refresh with: .venv/bin/python -m pytest -q -n 0 tests/integration/notebooks --refresh-notebooks"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_executed_afresh_prints_what_it_was_committed_with(path, request):
    committed = nbformat.read(path, as_version=4)
    fresh = execute(path)
    stale = stale_outputs(path.name, committed, fresh)
    counts = [c.execution_count for c in committed.cells if c.cell_type == "code"]
    if request.config.getoption("refresh_notebooks"):
        if stale or counts != [c.execution_count for c in fresh.cells if c.cell_type == "code"]:
            refresh(path, committed, fresh)
        return
    if stale:
        pytest.fail("\n".join([*stale, REFRESH_HINT]), pytrace=False)


def notebook(*printed: str) -> nbformat.NotebookNode:
    """A notebook of one markdown cell and one code cell per text, each having printed that text."""
    cells = [nbformat.v4.new_markdown_cell("# A story")]
    for count, text in enumerate(printed, 1):
        cell = nbformat.v4.new_code_cell("print(...)", execution_count=count)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        cells.append(cell)
    return nbformat.v4.new_notebook(cells=cells)


def test_outputs_differing_only_in_ids_times_addresses_and_paths_are_not_stale():
    committed = notebook(
        "[  running] researcher task dcc1153d\n[completed] researcher task dcc1153d\n",
        "transcript: memory:3ad3275ef7495efabf8cd2ab9562234c, run 1b4e28ba-2fa1-11d2-883f-0016d3cca427\n",
        "paused by: {'tool_call_id': 'call_65b083_0_0'} at 2026-12-03T20:32:09.268194Z after 0.2s (12 ms)\n",
        "<Event object at 0x7f3a2c1d9e50> wrote /tmp/tmpab12cd/threads.sqlite\n",
    )
    fresh = notebook(
        "[  running] researcher task 3005eebe\n[completed] researcher task 3005eebe\n",
        "transcript: memory:b85e895a7bed5d17a1bae6ccec343175, run 9f0c1d2e-3a4b-4c5d-8e6f-7a8b9c0d1e2f\n",
        "paused by: {'tool_call_id': 'call_c766a8_0_0'} at 2026-12-04T08:01:00Z after 1.75s (3 ms)\n",
        "<Event object at 0x55d0c0ffee00> wrote /home/someone/tmpzz99/threads.sqlite\n",
    )
    assert stale_outputs("01_quickstart.ipynb", committed, fresh) == []


def test_a_changed_output_is_stale_naming_the_notebook_and_cell_with_the_diff():
    committed = notebook("['lookup']\n", "listed before creating: False\nlisted after creating:  True\n")
    fresh = notebook("['lookup']\n", "listed before creating: False\nlisted after creating:  False\n")
    (message,) = stale_outputs("05_delegation_modes.ipynb", committed, fresh)
    assert message.startswith("05_delegation_modes.ipynb, cell 2 (In [2]): the committed output is stale\n")
    assert "-listed after creating:  True\n+listed after creating:  False\n" in message


def test_one_id_printed_twice_is_not_two_ids():
    assert normalised("task 42250f5b started; task 42250f5b done") != normalised("task 42250f5b started; task dcc1153d done")
    assert normalised("task 42250f5b started; task 42250f5b done") == normalised("task dcc1153d started; task dcc1153d done")


def test_a_new_stderr_output_is_stale():
    committed = notebook("done\n")
    fresh = notebook("done\n")
    fresh.cells[1].outputs.append(nbformat.v4.new_output("stream", name="stderr", text="DeprecationWarning: x\n"))
    (message,) = stale_outputs("03_background_tasks.ipynb", committed, fresh)
    assert "+[stderr] DeprecationWarning: x" in message
