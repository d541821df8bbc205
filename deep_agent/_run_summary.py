"""The table printed after a run's answer: per agent type, what it did and what it cost.

Rows: the root's own model calls, then each agent type (tasks, model
calls, tokens, time, cost), then the total of the turn. Cost shows ``–``
when no prices were given, never a made-up ``0.0``.

Example::

    console.print(summary_table(tree.rows(), tree.root_usage, root_model="gpt-4.1-mini", prices=None))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from deep_agent._thread_tasks import TaskRow

UNKNOWN = "–"


def summary_table(rows: Sequence[TaskRow], root_usage: Mapping[str, int], *, root_model: str | None,
                  prices: Mapping[str, Any] | None, root_seconds: float) -> Table:
    """The per-agent-type table of one turn."""
    from subagents import cost_of

    table = Table(title="summary", title_justify="left")
    for column in ("agent", "tasks", "model calls", "tokens", "time", "cost"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    root_cost = cost_of(prices, root_model, root_usage.get("input_tokens", 0), root_usage.get("output_tokens", 0))
    lines = [("(root)", 0, root_usage.get("model_calls", 0),
              root_usage.get("input_tokens", 0) + root_usage.get("output_tokens", 0), root_seconds, root_cost)]
    by_type: dict[str, list[TaskRow]] = {}
    for row in rows:
        by_type.setdefault(row.agent_type, []).append(row)
    for agent, group in sorted(by_type.items()):
        lines.append((agent, len(group), sum(r.model_calls for r in group), sum(r.tokens for r in group),
                      sum(r.seconds() for r in group), sum(r.cost_usd for r in group)))
    for agent, tasks, calls, tokens, seconds, cost in lines:
        table.add_row(agent, str(tasks), str(calls), str(tokens), f"{seconds:.1f}s", _cost(cost, prices))
    total_cost = sum(line[5] for line in lines)
    table.add_row("total", str(sum(line[1] for line in lines)), str(sum(line[2] for line in lines)),
                  str(sum(line[3] for line in lines)), f"{root_seconds:.1f}s", _cost(total_cost, prices),
                  style="bold")
    return table


def _cost(value: float, prices: Mapping[str, Any] | None) -> str:
    return f"${value:.4f}" if prices else UNKNOWN
