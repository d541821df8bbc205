"""``python -m bench.trace``: the project modules one delegation crosses, in the order it crosses them.

A reader should find one delegation in about a dozen files. This traces two
runs with :func:`sys.setprofile` and keeps only the frames of the library's
own modules (``deep_agent``, ``middleware``, ``subagents``; the scripted
chat model of :mod:`deep_agent._testing` stands in for a provider and is left
out):

* ``sync``: the first synchronous delegation of a fresh agent
  (``create_agent`` with :class:`middleware.SubAgentMiddleware`, one spec),
  its child graph built on first use, as ``agent.invoke`` runs it;
* ``background``: a background task from start to the parent's notice
  (:class:`middleware.BackgroundSubagentMiddleware`, ``invoke``, the task
  awaited, then the turn that reads its result).

For each it prints one JSON line: the modules in the order first entered;
per module, how many calls came into it from a function of another library
module (``entries``: the jumps a reader makes following our code) and how
many came from LangChain or LangGraph (``framework_calls``: channels,
reducers, callbacks, middleware hooks). The docs' Layout page (docs/layout.md) lists the
same modules; a test checks that it does.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("deep_agent", "middleware", "subagents")
LEFT_OUT = frozenset({"deep_agent._testing"})
"""The scripted chat model: a stand-in for the provider, not part of the delegation."""


def _module_of(filename: str) -> str | None:
    try:
        relative = Path(filename).resolve().relative_to(ROOT)
    except ValueError:
        return None
    if not relative.parts or relative.parts[0] not in PACKAGES or relative.suffix != ".py":
        return None
    parts = list(relative.with_suffix("").parts)
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None if name in LEFT_OUT else name


class ModuleTrace:
    """The library modules entered while it is on, and how control moved between them.

    ``entries`` counts, per module, the calls into it made by a function of
    another library module (the jumps a reader makes following the code);
    ``framework_calls`` counts the calls into it made by LangChain or
    LangGraph (a channel, a reducer, a callback, a middleware hook), which a
    reader does not follow from our code.
    """

    def __init__(self) -> None:
        self.order: list[str] = []
        self.entries: Counter[str] = Counter()
        self.framework_calls: Counter[str] = Counter()
        self._names: dict[str, str | None] = {}

    def _module(self, frame: FrameType | None) -> str | None:
        if frame is None:
            return None
        filename = frame.f_code.co_filename
        if filename not in self._names:
            self._names[filename] = _module_of(filename)
        return self._names[filename]

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = self._module(frame)
        if module is None:
            return
        if module not in self.order:
            self.order.append(module)
        caller = frame.f_back
        while caller is not None and caller.f_code.co_name in _COMPREHENSIONS:
            caller = caller.f_back
        from_module = self._module(caller)
        if from_module is None:
            self.framework_calls[module] += 1
        elif from_module != module:
            self.entries[module] += 1

    @contextmanager
    def on(self) -> Iterator[ModuleTrace]:
        sys.setprofile(self)
        threading.setprofile(self)
        try:
            yield self
        finally:
            sys.setprofile(None)
            threading.setprofile(None)

    def report(self, name: str) -> dict[str, Any]:
        return {
            "trace": name,
            "modules": len(self.order),
            "most_entries": max(self.entries.values(), default=0),
            "order": self.order,
            "entries": {m: self.entries[m] for m in self.order},
            "framework_calls": {m: self.framework_calls[m] for m in self.order},
        }


_COMPREHENSIONS = frozenset({"<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>"})


def first_sync_delegation() -> Callable[[], Any]:
    """A fresh agent and its first ``invoke``: one ``task`` call, the child built on first use."""
    from langchain.agents import create_agent

    from deep_agent._testing import ScriptedChatModel, tool_call
    from middleware import SubAgentMiddleware
    from subagents._settings import DelegationSettings

    parent = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description="Find the answer.", subagent_type="worker")]},
        "The worker answered.",
    ])
    child = ScriptedChatModel(default="The answer, in full: forty-two.")
    spec = {"name": "worker", "description": "Finds answers.", "system_prompt": "Answer.", "model": child}
    settings = DelegationSettings.of(general_purpose=False)
    agent = create_agent(parent, [], middleware=[SubAgentMiddleware([spec], settings=settings)])
    return lambda: agent.invoke({"messages": [{"role": "user", "content": "go"}]})


def background_start_to_notice() -> Callable[[], Any]:
    """Start a background task, wait for it, and run the turn whose notice reports it."""
    from langchain.agents import create_agent
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.memory import InMemorySaver

    from deep_agent._testing import ScriptedChatModel, tool_call
    from middleware import BackgroundSubagentMiddleware
    from subagents._settings import DelegationSettings
    from subagents.background import wait_for_background

    parent = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("start_async_task", description="Find the answer.", subagent_type="worker")]},
        "Started.",
        "The worker answered.",
    ])
    child = ScriptedChatModel(default="The answer, in full: forty-two.")
    spec = {"name": "worker", "description": "Finds answers.", "system_prompt": "Answer.", "model": child}
    middleware = BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False))
    agent = create_agent(parent, [], middleware=[middleware], checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "trace"}}

    def run() -> Any:
        out = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config)
        wait_for_background(out["async_tasks"], timeout_s=30)
        return agent.invoke({"messages": [{"role": "user", "content": "and?"}]}, config)

    return run


def trace(name: str, make: Callable[[], Callable[[], Any]]) -> dict[str, Any]:
    run = make()
    with ModuleTrace().on() as seen:
        run()
    return seen.report(name)


def main() -> int:
    for name, make in (("sync", first_sync_delegation), ("background", background_start_to_notice)):
        print(json.dumps(trace(name, make)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
