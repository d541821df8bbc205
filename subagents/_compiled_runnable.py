"""A caller's compiled subagent, made ready for the runner.

A :class:`~subagents.CompiledSubagent` may hold any runnable: a LangGraph
graph, any LangChain ``Runnable``, a LangGraph ``RemoteGraph``, or a plain
object with only ``invoke``. Before its first run it is

* stamped with its registered name, as deepagents does: ``lc_agent_name``
  in the run metadata and the run name, so traces and streams show which
  subagent ran;
* given an ``ainvoke`` when it has none: async callers run its ``invoke``
  in a worker thread (with the caller's context variables), never blocking
  the event loop.

Its own ``recursion_limit`` (set with ``with_config``) is read by
:func:`own_recursion_limit` when the spec is validated, so the parent's
limit never overrides it.

Example::

    runnable = ready_runnable(spec)      # what the registry hands the runner
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Mapping
from typing import Any


def own_recursion_limit(runnable: Any) -> int | None:
    """The ``recursion_limit`` bound to ``runnable`` with ``with_config``, if any."""
    config = getattr(runnable, "config", None)
    if not isinstance(config, Mapping):
        return None
    limit = config.get("recursion_limit")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


def ready_runnable(name: str, runnable: Any) -> Any:
    """``runnable`` stamped with ``name`` and, if it lacks one, given a threaded ``ainvoke``."""
    stamped = runnable
    with_config = getattr(runnable, "with_config", None)
    if callable(with_config):  # a copy: the caller's runnable is never changed
        try:
            stamped = with_config({"metadata": {"lc_agent_name": name}, "run_name": name})
        except Exception:  # noqa: BLE001 - a runnable that refuses config still runs, unstamped
            stamped = runnable
        if not callable(getattr(stamped, "invoke", None)):
            stamped = runnable
    if callable(getattr(stamped, "ainvoke", None)):
        return stamped
    return ThreadedRunnable(stamped, name)


class ThreadedRunnable:
    """An object with only ``invoke``, driven on a worker thread by ``ainvoke``.

    Args:
        runnable: anything with ``invoke(input, config)``.
        name: stamped on every run, as ``lc_agent_name`` and the run name.
    """

    def __init__(self, runnable: Any, name: str) -> None:
        self.runnable = runnable
        self.name = name

    def _config(self, config: Mapping[str, Any] | None) -> dict[str, Any]:
        config = dict(config or {})
        config["metadata"] = {**(config.get("metadata") or {}), "lc_agent_name": self.name}
        config.setdefault("run_name", self.name)
        return config

    def invoke(self, inputs: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        return self.runnable.invoke(inputs, self._config(config), **kwargs)

    async def ainvoke(self, inputs: Any, config: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        context = contextvars.copy_context()
        return await asyncio.to_thread(context.run, functools.partial(self.invoke, inputs, config, **kwargs))
