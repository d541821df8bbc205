"""Shared pieces of the bench: agents built the same way on both sides, timing, records.

Both sides are a plain :func:`langchain.agents.create_agent` parent with one
delegation middleware: ours (:class:`middleware.SubAgentMiddleware`, without
the implicit ``general-purpose`` agent) or deepagents'
(``deepagents.middleware.subagents.SubAgentMiddleware`` over a
``StateBackend`` and without a ``system_prompt``, as ``create_deep_agent``
sets it up). Every model is a :class:`deep_agent.ScriptedChatModel`,
so the two sides see exactly the same replies, latencies and token counts.

deepagents is optional (the ``bench`` extra); without it every ``theirs``
figure is ``null`` and our side still runs.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import statistics
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, cast

from langchain.agents import create_agent
from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel
from middleware import SubAgentMiddleware
from subagents._settings import DelegationSettings

OURS = "ours"
THEIRS = "theirs"

NO_DEEPAGENTS = "no peer (deepagents not installed, or --no-peer): theirs is null"

# Keys of our spec that deepagents' spec has no field for.
_OURS_ONLY_KEYS = ("max_turns", "timeout_s", "recursion_limit", "disallowed_tools", "metadata")

_peer_enabled = True


def use_peer(enabled: bool) -> None:
    """Measure deepagents' side too (the default, when it is installed) or ours alone."""
    global _peer_enabled
    _peer_enabled = enabled


def have_deepagents() -> bool:
    """True when deepagents is installed (the ``bench`` extra) and the peer is not switched off."""
    if not _peer_enabled:
        return False
    try:
        return importlib.util.find_spec("deepagents") is not None
    except (ImportError, ValueError):
        return False


def sides() -> tuple[str, ...]:
    """The sides this process can measure: ours always, theirs when deepagents is installed."""
    return (OURS, THEIRS) if have_deepagents() else (OURS,)


def deepagents_version() -> str | None:
    if not have_deepagents():
        return None
    from importlib.metadata import version

    return version("deepagents")


# -- agents -------------------------------------------------------------------


def spec(
    name: str,
    *,
    model: Any,
    tools: Sequence[Any] = (),
    description: str | None = None,
    system_prompt: str = "Do the task and report the result.",
    **ours_only: Any,
) -> dict[str, Any]:
    """One subagent as a plain dict both libraries accept (ours-only keys are dropped for theirs)."""
    return {
        "name": name,
        "description": description or f"Worker {name}: does one task and reports back.",
        "system_prompt": system_prompt,
        "tools": list(tools),
        "model": model,
        **ours_only,
    }


def delegation_middleware(
    side: str, specs: Iterable[Mapping[str, Any]], *, max_concurrent: int | None = None,
    uncapped_run: bool = False,
) -> Any:
    """The side's delegation middleware over ``specs``.

    ``uncapped_run`` lifts our per-run cap on delegations (50 by default),
    which would refuse most calls of a run that makes more; deepagents has none.
    """
    specs = [dict(s) for s in specs]
    if side == OURS:
        settings = DelegationSettings.of(general_purpose=False, max_concurrent_tasks=max_concurrent)
        return SubAgentMiddleware(specs, settings=settings.updated(max_delegations=None) if uncapped_run else settings)
    if max_concurrent is not None:
        raise ValueError("deepagents' SubAgentMiddleware has no concurrency cap")
    from deepagents.backends import StateBackend
    from deepagents.middleware.subagents import SubAgent
    from deepagents.middleware.subagents import SubAgentMiddleware as TheirSubAgentMiddleware

    theirs = [cast(SubAgent, {k: v for k, v in s.items() if k not in _OURS_ONLY_KEYS}) for s in specs]
    return TheirSubAgentMiddleware(backend=StateBackend(), subagents=theirs)


def delegating_agent(
    side: str,
    model: Any,
    specs: Iterable[Mapping[str, Any]],
    tools: Sequence[Any] = (),
    *,
    max_concurrent: int | None = None,
    system_prompt: str | None = "You plan and delegate.",
    uncapped_run: bool = False,
) -> Any:
    """A plain ``create_agent`` parent holding the side's delegation middleware."""
    return create_agent(
        model,
        list(tools),
        system_prompt=system_prompt,
        middleware=[delegation_middleware(side, specs, max_concurrent=max_concurrent, uncapped_run=uncapped_run)],
    )


@tool
def noop() -> str:
    """Do nothing and say so."""
    return "ok"


def answer(label: str) -> str:
    """A child's complete final answer: starts with ``label``, long enough to count as a report.

    Our runner asks a child whose answer is very short for a fuller one (a
    second model call); a scripted "done" would measure that instead of the
    delegation itself, so every scripted child answers at report length.
    """
    filler = " The work is complete; every requested detail is included in this report."
    return f"{label}." + filler * 4


def answered(message: Any, label: str) -> bool:
    """True when a ToolMessage is a successful child answer that starts with ``label``."""
    return getattr(message, "status", "success") != "error" and message.text.startswith(label)


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def call_counter(reply: Any, *, cap_calls: int | None = None, cap_s: float | None = None) -> Any:
    """A scripted reply that counts the calls it answers and, past a cap, raises instead.

    ``counter.calls`` is the number of model calls answered; ``counter.capped``
    says whether the bench cap stopped the run.
    """

    class Counter:
        calls = 0
        capped = False
        started: float | None = None

        def __call__(self, messages: Any) -> Any:
            now = time.monotonic()
            if self.started is None:
                self.started = now
            over_calls = cap_calls is not None and self.calls >= cap_calls
            over_time = cap_s is not None and now - self.started >= cap_s
            if over_calls or over_time:
                self.capped = True
                return BenchCapReached(f"bench cap reached after {self.calls} model calls")
            self.calls += 1
            return reply

    return Counter()


class BenchCapReached(RuntimeError):
    """Raised by a scripted model to stop a run the bench must keep bounded."""


def scripted(**kwargs: Any) -> ScriptedChatModel:
    return ScriptedChatModel(**kwargs)


# -- timing ---------------------------------------------------------------------


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds ``fn()`` took, and what it returned."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


async def atimed(coro: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await coro
    return time.perf_counter() - start, result


def cpu_and_wall(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """CPU seconds (``time.process_time``: every thread) and wall seconds ``fn()`` took, and its result."""
    cpu, wall = time.process_time(), time.perf_counter()
    out = fn()
    return time.process_time() - cpu, time.perf_counter() - wall, out


async def acpu_and_wall(make: Callable[[], Awaitable[Any]]) -> tuple[float, float, Any]:
    cpu, wall = time.process_time(), time.perf_counter()
    out = await make()
    return time.process_time() - cpu, time.perf_counter() - wall, out


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def quiet_gc() -> None:
    """Collect now, so a collection does not land inside the next timed run."""
    gc.collect()


# -- records ------------------------------------------------------------------


def ratio(ours: float | None, theirs: float | None) -> float | None:
    if ours is None or theirs is None or theirs <= 0:
        return None
    return ours / theirs


def record(
    measure: str,
    *,
    unit: str,
    ours: float | None,
    theirs: float | None,
    goal: str,
    met: bool | None,
    sizes: Mapping[str, Any],
    notes: str = "",
    detail: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One JSON-ready result: the two figures, their ratio (ours / theirs) and the goal."""
    r = ratio(ours, theirs)
    out: dict[str, Any] = {
        "measure": measure,
        "unit": unit,
        "ours": _round(ours),
        "theirs": _round(theirs),
        "ratio": _round(r),
        "goal": goal,
        "met": met,
        "sizes": dict(sizes),
        "notes": notes,
    }
    if detail:
        out["detail"] = {k: _round(v) if isinstance(v, float) else v for k, v in detail.items()}
    return out


def _round(value: float | None) -> float | None:
    if value is None:
        return None
    return float(f"{value:.4g}")


def theirs_note(extra: str = "") -> str:
    """The note every record carries about the peer: its version, or its absence."""
    version = deepagents_version()
    base = f"deepagents {version}" if version else NO_DEEPAGENTS
    return f"{base}. {extra}".strip() if extra else base


def dumps(rec: Mapping[str, Any]) -> str:
    return json.dumps(rec, sort_keys=False)
