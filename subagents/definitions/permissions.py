"""The parent's policy over every child: which tool calls wait for approval, which data rules hold.

A child inherits two kinds of rule from its parent, and may tighten them but
not loosen them: the approval policy (the permission modes below) and the
data policy (the parent's ``PIIMiddleware``, see the last section).

Permission modes say which of a child's tool calls wait for human approval.

A mode becomes an ``interrupt_on`` mapping for LangChain's
``HumanInTheLoopMiddleware`` on the child, built from the child's own
(already filtered) tools:

* ``always_confirm``: every tool call pauses for approval;
* ``confirm_risky``: calls to tools the caller marked risky
  (``risky_tools``) pause; the rest run;
* ``never_confirm``: nothing pauses because of the mode;
* omitted (``None``): the parent's policy, i.e. the ``permission_mode``
  given to ``create_deep_agent`` (no approval when that is omitted too).

A spec's explicit ``interrupt_on`` entries are more specific than its mode
and win per tool. The parent's policy is a ceiling on both: a spec may ask
for more approvals than the parent's mode, never fewer, so a cloned
folder's ``permissionMode: bypassPermissions`` cannot switch off the
approvals the user asked for (it is honoured when the user's own mode is
``never_confirm`` or omitted). Claude Code's values are accepted and mapped to the
closest mode that never runs a tool Claude would have stopped:

=====================  ===============  =====================================
Claude Code            here             why
=====================  ===============  =====================================
``default``            confirm_risky    Claude asks before side-effecting tools
``acceptEdits``        confirm_risky    edits auto-run there; risky tools still ask
``plan``               always_confirm   plan mode runs nothing unreviewed
``dontAsk``            always_confirm   nothing unapproved runs (here it asks)
``bypassPermissions``  never_confirm    no prompts at all
=====================  ===============  =====================================

Example::

    rules = approval_rules("confirm_risky", ["read", "write"], risky_tools={"write"})
    assert rules == {"write": True}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

from langchain.agents.middleware import PIIMiddleware

PermissionMode = Literal["always_confirm", "confirm_risky", "never_confirm"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)

CLAUDE_PERMISSION_MODES: Mapping[str, PermissionMode] = {
    "default": "confirm_risky",
    "acceptedits": "confirm_risky",
    "plan": "always_confirm",
    "dontask": "always_confirm",
    "bypasspermissions": "never_confirm",
}
"""Claude Code's ``permissionMode`` values (lower-cased) and what they mean here."""


def normalize_permission_mode(value: Any) -> PermissionMode | None:
    """The canonical mode for ``value``; ``None`` stays ``None`` (inherit)."""
    if value is None:
        return None
    if isinstance(value, str):
        key = value.strip().replace("-", "_")
        if key.lower() in PERMISSION_MODES:
            return key.lower()  # type: ignore[return-value]
        mapped = CLAUDE_PERMISSION_MODES.get(key.replace("_", "").lower())
        if mapped is not None:
            return mapped
    raise ValueError(
        f"expected one of {', '.join(PERMISSION_MODES)} (or Claude Code's default, "
        f"acceptEdits, plan, dontAsk, bypassPermissions), got {value!r}"
    )


def approval_rules(
    mode: PermissionMode | None,
    tool_names: Iterable[str],
    *,
    risky_tools: Iterable[str] = (),
    interrupt_on: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``interrupt_on`` mapping for a child with these tools; ``{}`` means no approval."""
    names = list(tool_names)
    if mode == "always_confirm":
        rules: dict[str, Any] = dict.fromkeys(names, True)
    elif mode == "confirm_risky":
        risky = set(risky_tools)
        rules = {name: True for name in names if name in risky}
    else:
        rules = {}
    rules.update(interrupt_on or {})
    return {name: rule for name, rule in rules.items() if rule}


# ----------------------------------------------------------------------------
# The parent's data policy, applied to every child.
#
# A parent's ``PIIMiddleware`` is a rule about what data reaches a model, so
# it holds for the children too: each child, whether it inherits the parent's
# model or has its own, gets the parent's PII middleware (its model input,
# output and tool results, as configured), unless the child's own middleware
# already has one of the same name (the child's own wins). deepagents'
# children do not get it.
#
# Example::
#
#     agent = create_deep_agent(model, subagents=[...],
#                               middleware=[PIIMiddleware("email", apply_to_tool_results=True)])
# ----------------------------------------------------------------------------

POLICY_MIDDLEWARE: tuple[type, ...] = (PIIMiddleware,)
"""LangChain middleware that is the parent's data policy: every child gets it."""


def is_policy(middleware: Any) -> bool:
    """Whether a parent's middleware applies to every child, whatever its model."""
    return isinstance(middleware, POLICY_MIDDLEWARE)
