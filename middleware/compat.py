"""deepagents' middleware names and arguments, on this library's middleware.

A deepagents user changes only the import: ``AsyncSubAgentMiddleware(async_subagents=[...])``
is :class:`~middleware.BackgroundSubagentMiddleware` over those remote
subagents (no ``general-purpose`` child, as in deepagents), and its state
is ``AsyncSubAgentState``.

Example::

    from deep_agent import AsyncSubAgentMiddleware

    middleware = AsyncSubAgentMiddleware(async_subagents=[
        {"name": "researcher", "description": "Researches.", "graph_id": "researcher",
         "url": "https://my-deployment.example"},
    ])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from middleware.background import BACKGROUND_INSTRUCTIONS, AsyncTaskLedgerState, BackgroundSubagentMiddleware

AsyncSubAgentState = AsyncTaskLedgerState
"""deepagents' name for the state of the background-task ledger (``async_tasks``)."""


class AsyncSubAgentMiddleware(BackgroundSubagentMiddleware):
    """deepagents' ``AsyncSubAgentMiddleware``: background tasks on remote servers only.

    Args:
        async_subagents: remote specs (``name``, ``description``,
            ``graph_id``, ``url``, optional ``headers``); at least one.
        system_prompt: the tools' instructions, placed in the system prompt.
        **kwargs: any other argument of :class:`~middleware.BackgroundSubagentMiddleware`.

    Example::

        AsyncSubAgentMiddleware(async_subagents=[{"name": "r", "description": "R.", "graph_id": "r",
                                                  "url": "http://127.0.0.1:2024"}])
    """

    def __init__(
        self,
        *,
        async_subagents: Sequence[Mapping[str, Any]],
        system_prompt: str | None = BACKGROUND_INSTRUCTIONS,
        **kwargs: Any,
    ) -> None:
        if not async_subagents:
            raise ValueError("AsyncSubAgentMiddleware(): argument 'async_subagents': give at least one async subagent")
        kwargs.setdefault("general_purpose", False)  # deepagents' middleware has only the remote agents
        super().__init__(list(async_subagents), system_prompt=system_prompt, **kwargs)
