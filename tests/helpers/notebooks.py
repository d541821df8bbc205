"""The committed notebooks, executed afresh and compared with what they were committed with.

``execute`` runs a notebook top to bottom in a new kernel on this checkout's
code (the repository first on the kernel's ``PYTHONPATH``, the notebook's
folder as its working directory), as ``jupyter execute`` would, without
touching the file. ``stale_outputs`` compares the printed outputs cell by
cell after normalising what changes from run to run by design: ids (uuids,
hex ids, tool call ids), times and durations, memory addresses and machine
paths. Within a cell each distinct id becomes ``<id1>``, ``<id2>``... in
order of appearance, so a cell that printed one id twice must still print
one id twice. ``refresh`` writes the fresh outputs into the committed file
(``pytest tests/integration/notebooks --refresh-notebooks``).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from nbformat import NotebookNode

from helpers import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
CELL_TIMEOUT_S = 300
"""Generous: a cell of these notebooks takes well under a second on the scripted model."""

# One alternation, scanned left to right, so ids are numbered in the order they appear.
# At one position the first alternative wins: a uuid before its first 8 hex digits, an address
# before the hex in it, a timestamp before its seconds read as a duration.
_VOLATILE = re.compile(
    r"(?P<id>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"
    r"|\bcall_[0-9A-Za-z]+(?:_\d+)*\b"
    r"|(?<![0-9A-Za-z])[0-9a-f]{8,}(?![0-9A-Za-z]))"
    r"|(?P<address>\b0x[0-9a-fA-F]+\b)"
    r"|(?P<time>\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?)"
    r"|(?P<duration>\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|seconds?|min|minutes?)\b)"
    r"|(?P<path>(?:/tmp|/var|/private|/home|/root|/work|/Users)/[^\s'\"),\]]*)"
)


def execute(path: Path) -> NotebookNode:
    """A copy of the notebook at ``path``, executed afresh; a cell that raises fails, naming the notebook and cell."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    # The kernel imports this checkout, not whichever copy of the packages the environment installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute(env=env)
    except CellExecutionError as exc:
        failed = next((i for i, cell in enumerate(nb.cells)
                       if any(o.output_type == "error" for o in cell.get("outputs", []))), "?")
        raise AssertionError(f"{path.name}, cell {failed} raised:\n{exc}") from None
    return nb


def shown(cell: NotebookNode) -> str:
    """What a code cell printed, as a reader sees it; anything but stdout is labelled."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text if output.name == "stdout" else f"[{output.name}] {output.text}")
        elif output.output_type == "error":
            parts.append(f"[error] {output.ename}: {output.evalue}\n")
        else:  # execute_result, display_data
            data = output.get("data", {})
            parts.append(data.get("text/plain", f"[{output.output_type}: {', '.join(sorted(data))}]") + "\n")
    return "".join(parts)


def normalised(text: str) -> str:
    """``text`` with its run-to-run values replaced: ``<id1>``, ``<id2>``..., ``<time>``, ``<duration>``..."""
    ids: dict[str, int] = {}

    def placeholder(match: re.Match[str]) -> str:
        kind = match.lastgroup or "volatile"
        if kind != "id":
            return f"<{kind}>"
        return f"<id{ids.setdefault(match.group(), len(ids) + 1)}>"

    return _VOLATILE.sub(placeholder, text)


def stale_outputs(name: str, committed: NotebookNode, fresh: NotebookNode) -> list[str]:
    """One message per code cell whose committed output differs from the fresh run's: the notebook, the cell, the diff."""
    stale = []
    for index, (old, new) in enumerate(zip(committed.cells, fresh.cells, strict=True)):
        if old.cell_type != "code":
            continue
        before, after = normalised(shown(old)), normalised(shown(new))
        if before != after:
            diff = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        "committed", "fresh run")
            stale.append(f"{name}, cell {index} (In [{old.execution_count}]): the committed output is stale\n"
                         + "".join(line if line.endswith("\n") else line + "\n" for line in diff))
    return stale


def refresh(path: Path, committed: NotebookNode, fresh: NotebookNode) -> None:
    """Write the fresh run's outputs and execution counts into the notebook at ``path``; nothing else changes."""
    for old, new in zip(committed.cells, fresh.cells, strict=True):
        if old.cell_type == "code":
            old.outputs, old.execution_count = new.outputs, new.execution_count
    nbformat.write(committed, path)
