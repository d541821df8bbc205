"""Code footprint: how much distinct Python code one delegation runs, beyond a no-op tool call.

Two sides can run the same number of instructions and still take different
time: an interpreter reads each function's bytecode, constants and inline
caches as data, so a delegation that runs more *distinct* functions, each
once, touches more memory that is cold by the time it runs again, and waits
on it. This measure names that footprint: on the overhead measure's agent
(:mod:`bench.overhead`), warmed up, it records every Python code object
entered (all threads, with ``sys.setprofile`` and ``threading.setprofile``)
during one delegating run and one no-op run, and reports the functions only
the delegating run entered and their bytecode bytes. It is a count, not a
clock: a profile hook changes how long things take, not which code runs.

Example::

    python -m bench --only footprint
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from types import CodeType, FrameType
from typing import Any

from bench import overhead
from bench.common import OURS, THEIRS, record, sides, theirs_note

NAME = "footprint"


def _entered(agent: Any, message: Any) -> set[CodeType]:
    """The code objects entered while ``agent`` runs ``message``, on every thread."""
    seen: set[CodeType] = set()

    def hook(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call":
            seen.add(frame.f_code)

    sys.setprofile(hook)
    threading.setprofile(hook)
    try:
        agent.invoke(message)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return seen


def _where(code: CodeType) -> str:
    """A code object's top-level package (``subagents``, ``langchain_core``, ``<stdlib>``...)."""
    path = code.co_filename.replace("\\", "/")
    for marker in ("/site-packages/", "/dist-packages/"):
        if marker in path:
            return path.split(marker, 1)[1].split("/", 1)[0].removesuffix(".py")
    for package in ("subagents", "middleware", "deep_agent", "bench"):
        if f"/{package}/" in path:
            return package
    return "<generated>" if path.startswith("<") else "<stdlib>"


def run(quick: bool = False) -> list[dict[str, Any]]:
    warmup = 2 if quick else 5
    agents = overhead._agents()
    for side, delegated in overhead._schedule(warmup):
        agents[side].invoke(overhead.DELEGATE if delegated else overhead.BASELINE)
    only: dict[str, set[CodeType]] = {}
    for side in sides():
        only[side] = _entered(agents[side], overhead.DELEGATE) - _entered(agents[side], overhead.BASELINE)
    functions = {side: len(codes) for side, codes in only.items()}
    code_bytes = {side: sum(len(code.co_code) for code in codes) for side, codes in only.items()}
    detail: dict[str, Any] = {f"{side}_functions": functions[side] for side in sides()}
    for side in sides():
        by_package: Counter[str] = Counter()
        for code in only[side]:
            by_package[_where(code)] += len(code.co_code)
        detail[f"{side}_bytes_by_package"] = dict(by_package.most_common(8))
    return [record(
        f"{NAME}.invoke", unit="bytecode bytes", ours=code_bytes[OURS], theirs=code_bytes.get(THEIRS),
        goal="report", met=None, sizes={"warmup": warmup},
        notes=theirs_note("Distinct Python functions a delegating run enters that a no-op run does not, "
                          "and their bytecode bytes (detail: how many, and by package)."),
        detail=detail,
    )]
