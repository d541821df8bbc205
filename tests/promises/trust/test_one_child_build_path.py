"""Every child, however it comes to be, is built by one function that applies the parent's floor.

The ways a child comes to be are enumerated below, one case each: declared,
``general-purpose``, created at run time (``create_subagent``), typed for one
call (``output_schema``, and deepagents' config key), forked, background, and
retried in the background (a new way adds its case here). In each, the tool
the parent gates (with LangChain's ``HumanInTheLoopMiddleware``, or by its
permission mode) pauses the child for a person, and the parent's
``PIIMiddleware`` redacts what the child's model sees. Two structural tests
fail when a child is built anywhere but ``SubagentRegistry.build``.

Before: a created child and a typed one were built beside the registry,
without the parent's middleware, and ran ``wire_money`` unasked; and a plain
``create_agent`` whose children took its tools never said that its approvals
reach them only through ``model_middleware=``.
"""

from __future__ import annotations

import ast
import itertools
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, PIIMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import BaseModel

from helpers import REPO
from helpers.background import background, on_task, start, started_ids, wait_for  # noqa: F401 - a fixture
from helpers.graphs import user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware, SubAgentMiddleware
from subagents._builder import SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY
from subagents._errors import ParentPolicyNotInherited, SubagentsError
from subagents._settings import DelegationSettings

EMAIL = "bob@example.com"
JOB = f"pay it to {EMAIL}"
MOVED: list[str] = []
_threads = itertools.count()


@tool
def wire_money(to: str) -> str:
    """Send money."""
    MOVED.append(to)
    return f"sent to {to}"


class Receipt(BaseModel):
    """What was paid."""

    paid: bool


RECEIPT_SCHEMA = {"title": "Receipt", "type": "object", "properties": {"paid": {"type": "boolean"}},
                  "required": ["paid"]}
PAYER = {"name": "payer", "description": "Pays.", "system_prompt": "Pay.", "tools": ["wire_money"]}


@pytest.fixture(autouse=True)
def _clean() -> None:
    MOVED.clear()


def policy() -> list[Any]:
    """The parent's floor: an approval for ``wire_money`` and an email redaction."""
    return [HumanInTheLoopMiddleware(interrupt_on={"wire_money": True}), redaction()]


def redaction() -> PIIMiddleware:
    return PIIMiddleware("email", strategy="redact", apply_to_input=True)


# The approval comes from the parent's own middleware, or from its permission mode.
FLOORS: dict[str, Callable[[], tuple[list[Any], DelegationSettings]]] = {
    "approval-middleware": lambda: (policy(), DelegationSettings()),
    "permission-mode": lambda: ([redaction()], DelegationSettings.of(permission_mode="confirm_risky",
                                                            risky_tools={"wire_money"})),
}


def task(agent: str, **extra: Any) -> dict[str, Any]:
    return {"tool_calls": [tool_call("task", description=JOB, subagent_type=agent, **extra)]}


def child(final: Any = "paid") -> list[Any]:
    return [{"tool_calls": [tool_call("wire_money", to="mallory")]}, final]


# way -> (SubAgentMiddleware arguments, the parent's replies to "go", the child's final reply, configurable)
FOREGROUND: dict[str, tuple[dict[str, Any], list[Any], Any, dict[str, Any]]] = {
    "declared": ({"subagents": [PAYER]}, [task("payer")], "paid", {}),
    "general-purpose": ({}, [task("general-purpose")], "paid", {}),
    "created-at-run-time": (
        {"dynamic_subagents": True},
        [{"tool_calls": [tool_call("create_subagent", name="maker", description="Pays.", system_prompt="Pay.",
                                   tools=["wire_money"])]}, task("maker")],
        "paid", {}),
    "typed-by-output-schema": ({"structured_results": True}, [task("general-purpose", output_schema=RECEIPT_SCHEMA)],
                               {"tool_calls": [tool_call("Receipt", paid=True)]}, {}),
    "typed-by-config-key": ({}, [task("general-purpose")], {"tool_calls": [tool_call("Receipt", paid=True)]},
                            {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: Receipt}),
    "forked": ({"subagents": [{**PAYER, "tools": None, "context": "fork"}]}, [task("payer")], "paid", {}),
}


def redacted_for_the_child(model: ScriptedChatModel) -> None:
    """The child's model saw the job with the address redacted, and never the address."""
    seen = [c for c in model.calls if any("pay it to" in str(m.content) for m in c["messages"] if m.type == "human")]
    assert seen, "the child's model was never called"
    for call in seen:
        texts = "\n".join(str(m.content) for m in call["messages"] if m.type == "human")
        assert EMAIL not in texts and "[REDACTED_EMAIL]" in texts, texts


@pytest.mark.parametrize("floor", FLOORS)
@pytest.mark.parametrize("way", FOREGROUND)
def test_a_foreground_child_asks_the_parents_approval_and_is_redacted_by_its_policy(way, floor, run):
    arguments, replies, final, configurable = FOREGROUND[way]
    model = ScriptedChatModel(rules=[("pay it to", child(final)), ("go", [*replies, "done"])])
    parents, options = FLOORS[floor]()
    specs = arguments.get("subagents", ())
    settings = options.updated(**{k: v for k, v in arguments.items() if k != "subagents"})
    delegation = SubAgentMiddleware(specs, model_middleware=parents, settings=settings)
    agent = create_agent(model, [wire_money], checkpointer=InMemorySaver(), middleware=[delegation, *parents])
    config = {"configurable": {"thread_id": f"{way}-{next(_threads)}", **configurable}}
    out = run(agent, user("go"), config)
    (pause,) = out["__interrupt__"]
    assert [a["name"] for a in pause.value["action_requests"]] == ["wire_money"]
    assert MOVED == [], "the child ran the parent's gated tool unasked"
    redacted_for_the_child(model)
    run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert MOVED == ["mallory"]  # the approval resumed into the child, which then ran it


def _fails_once() -> Callable[[list[Any]], Any]:
    calls = itertools.count()

    def reply(messages: list[Any]) -> Any:
        if next(calls) == 0:
            raise RuntimeError("the first attempt fails on purpose")
        return {"tool_calls": [tool_call("wire_money", to="mallory")]}

    return reply


@pytest.mark.parametrize("floor", FLOORS)
@pytest.mark.parametrize("way", ["background", "retried-in-the-background"])
def test_a_background_child_waits_for_the_parents_approval_and_is_redacted_by_its_policy(
        way, floor, run, background):  # noqa: F811 - the fixture
    retried = way == "retried-in-the-background"
    first = _fails_once() if retried else child()[0]
    model = ScriptedChatModel(rules=[
        ("pay it to", [first, first, "paid"]),
        ("fails on purpose", [on_task("retry_async_task"), "retried"]),
        ("go", [start((JOB, "general-purpose")), "started"]),
    ], default="ok")
    parents, options = FLOORS[floor]()
    agent = create_agent(model, [wire_money], checkpointer=InMemorySaver(),
                         middleware=[background(model_middleware=parents, settings=options), *parents])
    config = {"configurable": {"thread_id": f"{way}-{next(_threads)}"}}
    out = run(agent, user("go"), config)
    (task_id,) = started_ids(out["messages"])
    # A child that fails before the parent's second model call is told in that call, and retried in the same
    # turn; one that fails later is told at the next turn. Either way the second attempt is the one checked.
    if retried and background.task(task_id).fields["attempt"] == 1:
        wait_for(lambda: background.status(task_id) == "error")
        run(agent, user("how is it going?"), config)  # the failure is told, and the parent retries it
    assert not retried or background.task(task_id).fields["attempt"] == 2
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    request = background.task(task_id).fields["approval_request"]
    assert "wire_money" in str(request) and MOVED == [], "the child ran the parent's gated tool unasked"
    redacted_for_the_child(model)


# ----------------------------------------------------------------------------
# The structure that keeps it so: one call of create_agent builds children, one call of it builds them all.
# ----------------------------------------------------------------------------

PACKAGES = ("subagents", "middleware", "deep_agent")


def _calls_of(name: str) -> list[str]:
    """``file:function`` of every call of ``name`` in the library's code (docstrings and comments aside)."""
    found = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            calls = _Calls(name)
            calls.visit(ast.parse(path.read_text(encoding="utf-8")))
            found += [f"{path.relative_to(REPO).as_posix()}:{function}" for function in calls.found]
    return found


class _Calls(ast.NodeVisitor):
    """The innermost function holding each call of one name."""

    def __init__(self, name: str) -> None:
        self.name, self.within, self.found = name, ["<module>"], []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.within.append(node.name)
        self.generic_visit(node)
        self.within.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if (func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)) == self.name:
            self.found.append(self.within[-1])
        self.generic_visit(node)


def test_the_registry_builds_every_child_and_nothing_else_calls_the_builder():
    assert _calls_of("build_subagent") == ["subagents/_registry.py:build"]


def test_create_agent_builds_a_child_in_one_place():
    children = [c for c in _calls_of("create_agent") if c.startswith(("subagents/", "middleware/"))]
    assert children == ["subagents/_builder.py:build_subagent"]


# ----------------------------------------------------------------------------
# A plain create_agent cannot show the delegating middleware its neighbours: it says so, once.
# ----------------------------------------------------------------------------


@tool
def delete_database() -> str:
    """Delete the database."""
    MOVED.append("database")
    return "deleted"


def _warnings_of(build: Callable[[], Any]) -> list[ParentPolicyNotInherited]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [w.message for w in caught if isinstance(w.message, ParentPolicyNotInherited)]


@pytest.mark.parametrize("middleware", [SubAgentMiddleware, BackgroundSubagentMiddleware])
def test_a_plain_create_agent_whose_children_take_its_tools_warns_once_naming_model_middleware(middleware):
    gate = HumanInTheLoopMiddleware(interrupt_on={"delete_database": True})
    made: list[Any] = []

    def build() -> None:
        made.append(middleware())
        create_agent(ScriptedChatModel(), [delete_database], middleware=[gate, made[-1]])

    try:
        (warning,) = _warnings_of(build)
    finally:
        for each in made:
            getattr(each, "close", lambda: None)()
    assert "model_middleware=" in str(warning) and warning.agents == ("general-purpose",)
    assert warning.middleware == middleware.__name__ and isinstance(warning, SubagentsError)
    assert _where(middleware) == __file__  # the line that built the middleware, not the library


def _where(middleware: type) -> str:
    """The file a warning of building ``middleware`` here points at."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made = middleware()
    getattr(made, "close", lambda: None)()
    return next(w.filename for w in caught if issubclass(w.category, ParentPolicyNotInherited))


@pytest.mark.parametrize("build", [
    lambda: SubAgentMiddleware(model_middleware=[]),
    lambda: SubAgentMiddleware(model_middleware=policy()),
    lambda: SubAgentMiddleware([{**PAYER, "tools": [delete_database]}], settings=DelegationSettings.of(
        general_purpose=False,
    )),
    lambda: create_deep_agent(ScriptedChatModel(), [delete_database], middleware=policy()),
], ids=["given-empty", "given", "own-tools-only", "create_deep_agent"])
def test_no_warning_when_the_floor_is_given_or_no_child_takes_the_parents_tools(build):
    assert _warnings_of(build) == []


def test_created_subagents_take_the_parents_tools_too():
    (warning,) = _warnings_of(lambda: SubAgentMiddleware(settings=DelegationSettings.of(general_purpose=False, dynamic_subagents=True)))
    assert warning.agents == ("created at run time",)
