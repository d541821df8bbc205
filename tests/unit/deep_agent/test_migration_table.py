"""The migration page's table of deepagents' arguments cannot drift from deepagents or from this library.

It lists every argument of deepagents' ``create_deep_agent`` and
``SubAgentMiddleware`` and every key of its three spec types, no more; an
argument it calls accepted is in this library's signature, and a spec key is
accepted or refused (a ``SpecError`` naming the field) as the table says.
"""

from __future__ import annotations

import inspect
import re
import typing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deepagents")

from deepagents import AsyncSubAgent as DeepAsyncSubAgent  # noqa: E402
from deepagents import create_deep_agent as deep_create_deep_agent  # noqa: E402
from deepagents.backends import StateBackend  # noqa: E402
from deepagents.middleware.subagents import CompiledSubAgent as DeepCompiledSubAgent  # noqa: E402
from deepagents.middleware.subagents import SubAgent as DeepSubAgent  # noqa: E402
from deepagents.middleware.subagents import SubAgentMiddleware as DeepSubAgentMiddleware  # noqa: E402
from langchain_core.runnables import RunnableLambda  # noqa: E402
from pydantic import BaseModel  # noqa: E402

import deep_agent  # noqa: E402
from deep_agent._testing import ScriptedChatModel  # noqa: E402
from subagents._spec import SpecError  # noqa: E402

PAGE = Path(__file__).parents[3] / "docs" / "migrating.md"
VERDICTS = {"as is", "different", "refused"}


def _table() -> dict[str, tuple[str, str]]:
    text = PAGE.read_text().split("## Every deepagents argument", 1)[1]
    rows: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        match = re.match(r"\| `([^`]+)` \|([^|]+)\|([^|]*)\|$", line)
        if match:
            key, verdict, why = match[1], match[2].strip(), match[3].strip()
            assert key not in rows, f"{PAGE.name}: {key} is listed twice"
            rows[re.sub(r"\((\w+)=\)$", r".\1", key)] = (verdict, why)
    return rows


def _deepagents_arguments() -> set[str]:
    names = {f"create_deep_agent.{p}" for p in inspect.signature(deep_create_deep_agent).parameters}
    names |= {f"SubAgentMiddleware.{p}" for p in inspect.signature(DeepSubAgentMiddleware.__init__).parameters
              if p != "self"}
    for spec in (DeepSubAgent, DeepCompiledSubAgent, DeepAsyncSubAgent):
        names |= {f"{spec.__name__}.{k}" for k in typing.get_type_hints(spec)}
    return names


def test_the_table_lists_every_deepagents_argument_and_no_other():
    listed, expected = set(_table()), _deepagents_arguments()
    assert not expected - listed, f"missing from {PAGE.name}: {sorted(expected - listed)}"
    assert not listed - expected, f"not deepagents' (any more): {sorted(listed - expected)}"


def test_each_row_has_a_verdict_and_each_difference_a_reason():
    for key, (verdict, why) in _table().items():
        assert verdict in VERDICTS, f"{key}: verdict {verdict!r} is not one of {sorted(VERDICTS)}"
        if verdict != "as is":
            assert why, f"{key}: a {verdict!r} row says why"


@pytest.mark.parametrize("where, ours", [("create_deep_agent", deep_agent.create_deep_agent),
                                         ("SubAgentMiddleware", deep_agent.SubAgentMiddleware.__init__)])
def test_accepted_arguments_are_in_this_librarys_signature(where, ours):
    params = inspect.signature(ours).parameters
    for key, (verdict, _) in _table().items():
        owner, _, name = key.partition(".")
        if owner == where:
            assert (name in params) == (verdict != "refused"), f"{where}({name}=) is {verdict!r} in the table"


def _keys(spec: Any) -> tuple[set[str], set[str]]:
    """A spec ``TypedDict``'s keys and its required ones (read from the hints: ``__required_keys__`` misses
    ``NotRequired`` under postponed annotations before Python 3.14)."""
    hints = typing.get_type_hints(spec, include_extras=True)
    return set(hints), {k for k, v in hints.items() if typing.get_origin(v) is not typing.NotRequired}


@pytest.mark.parametrize("ours, theirs", [(deep_agent.SubAgent, DeepSubAgent),
                                          (deep_agent.AsyncSubAgent, DeepAsyncSubAgent)])
def test_a_deepagents_spec_dict_type_checks_as_ours(ours, theirs):
    # A documented dict (an AsyncSubAgent without url, say) must pass a type checker with the import swapped.
    (keys, required), (_, their_required) = _keys(ours), _keys(theirs)
    assert required <= their_required
    accepted = {key.partition(".")[2] for key, (verdict, _) in _table().items()
                if key.startswith(f"{theirs.__name__}.") and verdict != "refused"}
    assert accepted <= keys, f"accepted but not typed: {sorted(accepted - keys)}"


class _Reply(BaseModel):
    answer: str


_MODEL = ScriptedChatModel(default="done")
_SPECS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "SubAgent": ({"name": "helper", "description": "d", "system_prompt": "p"}, {
        "tools": [], "model": _MODEL, "middleware": [], "interrupt_on": {}, "skills": ["./skills/"],
        "permissions": [{"operations": ["write"], "paths": ["/**"], "mode": "deny"}],
        "response_format": _Reply, "mode": "fork"}),
    "CompiledSubAgent": ({"name": "helper", "description": "d", "runnable": RunnableLambda(lambda s: s)},
                         {"mode": "isolated"}),
    "AsyncSubAgent": ({"name": "remote", "description": "d", "graph_id": "g", "url": "http://127.0.0.1:9"}, {
        "headers": {}, "webhook": "http://127.0.0.1:9/hook", "update_strategy": "interrupt",
        "notify_parent": True, "mode": "isolated"}),
}


def _build(kind: str, spec: dict[str, Any]) -> None:
    if kind == "AsyncSubAgent":
        deep_agent.AsyncSubAgentMiddleware(async_subagents=[spec])
    elif kind == "SubAgent":  # as deepagents users make them: on an agent with a file backend
        deep_agent.create_deep_agent(_MODEL, backend=StateBackend(), subagents=[spec])
    else:
        deep_agent.SubAgentMiddleware(subagents=[spec], model=_MODEL)


@pytest.mark.filterwarnings("ignore")  # a skill folder that is not there warns; the key is still accepted
@pytest.mark.parametrize("kind", sorted(_SPECS))
def test_spec_keys_are_accepted_or_refused_as_the_table_says(kind):
    base, values = _SPECS[kind]
    _build(kind, base)  # the required keys alone build
    for key, (verdict, _) in _table().items():
        owner, _, field = key.partition(".")
        if owner != kind or field in base:
            continue
        assert field in values, f"no probe value for {key}"
        if verdict == "refused":
            with pytest.raises(SpecError, match=field):
                _build(kind, {**base, field: values[field]})
        else:
            _build(kind, {**base, field: values[field]})
