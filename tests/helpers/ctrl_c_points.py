"""Press Ctrl-C at named steps of ``deep-agent run`` (``python -m ctrl_c_points POINT PROJECT ...``): each run a process

Each run is the command line's own (``deep_agent.cli._app.main``) on the scripted
model ``cli_scripts:three_children``, in its PROJECT folder (one of
:func:`helpers.cli.make_project`). A LangChain callback handler, added to every
run through ``register_configure_hook`` (LangChain's public hook), raises a real
``SIGINT`` in that process when the run reaches the point: no sleep decides
when. The process then prints the run's exit status and what ran after the
press as one JSON line after ``RESULT``, then ``deep-agent tasks``: into
``stdout`` and ``stderr`` beside the project. The command line is imported once
and each run is a fork of this process, so the cases do not pay a start each.
"""

from __future__ import annotations

import contextvars
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tracers.context import register_configure_hook

POINTS: dict[str, tuple[str, str, int]] = {
    "the root's first model call": ("model", "root", 1),
    "the tool node starting": ("chain", "tools", 1),
    "the task tool starting": ("tool", "task", 1),
    "the child's graph starting": ("chain", "child", 1),
    "the child's model call": ("model", "child", 1),
    "the child's tool call": ("tool", "child", 1),
    "the first child's end": ("tool_end", "task", 1),
    "the root's call between children": ("model", "root", 2),
    "the second child starting beside the third": ("tool", "task", 2),
    "the third child starting": ("tool", "task", 3),
    "two children running in parallel": ("model", "child", 3),
    "the final answer": ("model", "root", 3),
}
"""Each point: (event, whose, how many such events before it) -> the press comes at that event."""


class CtrlCAt(BaseCallbackHandler):
    """Presses Ctrl-C at one event; afterwards, counts the model calls and tools that still start and end."""

    run_inline = True  # called on the thread of the event, in order

    def __init__(self, point: tuple[str, str, int]) -> None:
        self.point = point
        self.counts: dict[tuple[str, str], int] = {}
        self.pressed = False
        self.pressed_at = 0.0
        self.started_after: set[Any] = set()
        self.ended_after = 0
        self.task_calls: set[Any] = set()
        self.lock = threading.Lock()

    def _event(self, kind: str, who: str, run_id: Any) -> None:
        with self.lock:
            if self.pressed:
                self.started_after.add(run_id)
                return
            count = self.counts[(kind, who)] = self.counts.get((kind, who), 0) + 1
            if (kind, who, count) != self.point:
                return
            self.pressed = True
            self.pressed_at = time.monotonic()
        signal.raise_signal(signal.SIGINT)  # a real Ctrl-C: the handler runs on the main thread

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any, metadata: Any = None,
                            **kwargs: Any) -> None:
        self._event("model", _whose(metadata), run_id)

    def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        if run_id in self.started_after:
            self.ended_after += 1

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any, metadata: Any = None,
                       **kwargs: Any) -> None:
        whose = _whose(metadata)
        if whose == "child":
            self._event("chain", "child", run_id)
        elif kwargs.get("name") == "tools":
            self._event("chain", "tools", run_id)

    def on_tool_start(self, serialized: Any, input_str: str, *, run_id: Any, metadata: Any = None,
                      **kwargs: Any) -> None:
        name = (serialized or {}).get("name") or kwargs.get("name")
        whose = _whose(metadata)
        if name == "task" and whose == "root":
            self.task_calls.add(run_id)
            self._event("tool", "task", run_id)
        elif whose == "child":
            self._event("tool", "child", run_id)

    def on_tool_end(self, output: Any, *, run_id: Any, **kwargs: Any) -> None:
        if run_id in self.task_calls:
            self._event("tool_end", "task", run_id)
        elif run_id in self.started_after:
            self.ended_after += 1


def _whose(metadata: Any) -> str:
    return "child" if isinstance(metadata, dict) and metadata.get("subagent_task_id") else "root"


HANDLER: contextvars.ContextVar[CtrlCAt | None] = contextvars.ContextVar("ctrl_c_at", default=None)
register_configure_hook(HANDLER, True)


def main(point_name: str) -> None:
    from deep_agent.cli._app import main as deep_agent

    handler = CtrlCAt(POINTS[point_name])
    HANDLER.set(handler)
    status = deep_agent(["run", "Survey the notes", "--model", "scripted:cli_scripts:three_children"])
    ended = time.monotonic() - handler.pressed_at  # reported, never asserted: a figure for a person to read
    HANDLER.set(None)
    print("RESULT " + json.dumps({"status": status, "pressed": handler.pressed, "press_to_exit_s": round(ended, 3),
                                  "started_after": len(handler.started_after), "ended_after": handler.ended_after}),
          flush=True)
    deep_agent(["tasks"])


def each_in_a_fork(cases: list[str]) -> None:
    """``cases``: point, project, point, project...; each run in a child of its own, one after the other."""
    # Once, before the forks: what every run imports, and its scan of the installed packages (the same path).
    import langgraph.checkpoint.sqlite.aio  # noqa: F401

    import deep_agent.cli._run  # noqa: F401
    import deep_agent.cli._session  # noqa: F401
    import deep_agent._factory  # noqa: F401
    from deep_agent.tools import _host_code as host_code
    from helpers.cli import terminal_env

    host_code.import_names()
    assert threading.active_count() == 1, "a thread would be lost in every fork"

    for point, project in zip(cases[::2], cases[1::2], strict=True):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.chdir(project)
                os.environ.update({k: v for k, v in terminal_env(Path(project)).items() if k != "PYTHONPATH"})
                for fd, name in ((1, "stdout"), (2, "stderr")):
                    os.dup2(os.open(Path(project).parent / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
                signal.alarm(300)  # a deadlock's bound, not a speed: the case then has no RESULT
                main(point)
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        os.waitpid(pid, 0)


if __name__ == "__main__":
    each_in_a_fork(sys.argv[1:])
