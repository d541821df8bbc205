"""The parent's data policy, applied to every child.

A parent's ``PIIMiddleware`` is a rule about what data reaches a model, so
it holds for the children too: each child, whether it inherits the parent's
model or has its own, gets the parent's PII middleware (its model input,
output and tool results, as configured), unless the child's own middleware
already has one of the same name (the child's own wins). deepagents'
children do not get it.

Example::

    agent = create_deep_agent(model, subagents=[...],
                              middleware=[PIIMiddleware("email", apply_to_tool_results=True)])
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import PIIMiddleware

POLICY_MIDDLEWARE: tuple[type, ...] = (PIIMiddleware,)
"""LangChain middleware that is the parent's data policy: every child gets it."""


def is_policy(middleware: Any) -> bool:
    """Whether a parent's middleware applies to every child, whatever its model."""
    return isinstance(middleware, POLICY_MIDDLEWARE)
