"""The terminal view of a run: the tree of tasks as they start, run and end.

Fed by the ``subagent_task`` lifecycle events of the parent's ``custom``
stream (see :class:`middleware.SubAgentMiddleware`); rendered with rich.
"""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from rich.tree import Tree

_STYLE = {"running": "yellow", "completed": "green", "error": "red", "waiting_for_approval": "magenta",
          "cancelled": "dim", "pending": "dim", "lost": "red"}
_ICON = {"running": "…", "completed": "✓", "error": "✗", "waiting_for_approval": "?", "cancelled": "-",
         "pending": "·", "lost": "!"}


class TaskTree:
    """The state of every task seen in this run, and its rendering."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.tasks: dict[str, dict[str, Any]] = {}

    def update(self, event: dict[str, Any]) -> None:
        row = self.tasks.setdefault(event["task_id"], {"started": time.monotonic()})
        row.update(event)

    def render(self) -> Tree:
        tree = Tree(Text(self.title, style="bold"))
        for task_id, row in self.tasks.items():
            status = row.get("status", "running")
            seconds = (row["duration_ms"] / 1000) if "duration_ms" in row else time.monotonic() - row["started"]
            line = Text()
            line.append(f"{_ICON.get(status, '·')} {row.get('agent_type', '?')} ", style=_STYLE.get(status, ""))
            line.append(f"{task_id[:8]}  {status}  {seconds:.1f}s", style="dim" if status == "running" else "")
            tokens = row.get("input_tokens", 0) + row.get("output_tokens", 0)
            if tokens:
                line.append(f"  {tokens} tokens")
            if row.get("error"):
                line.append(f"  {row['error'][:80]}", style="red")
            tree.add(line)
        if not self.tasks:
            tree.add(Text("no delegations yet", style="dim"))
        return tree
