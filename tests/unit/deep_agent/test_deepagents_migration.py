"""Where this library deliberately differs from deepagents, or accepts more.

Each difference fails with an error that names the argument or field and
says what to write instead; each wider input (any runnable, any tool) is
checked here on invoke and ainvoke.
"""

from __future__ import annotations

from typing import Any, NotRequired

import pytest
from langchain.agents import AgentState

from helpers.compat import ANSWER, delegating, tool_texts
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel

# -- where we deliberately differ: the error says what to write ---------------


class Notes(AgentState):
    notes: NotRequired[str]


def test_subagent_middleware_takes_deepagents_whole_signature(run):
    """deepagents' keyword-only call, backend= included: backend is kept and unused, as deepagents does."""
    from langchain.agents import create_agent

    from deep_agent import SubAgentMiddleware

    backend = object()
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegating(("job", "a")))
    mw = SubAgentMiddleware(backend=backend, subagents=[{"name": "a", "description": "A.", "system_prompt": "Do."}],
                            system_prompt="Delegate well.", task_description="Pick one of {available_agents}.",
                            private_state_keys=frozenset(), state_schema=Notes)
    assert mw.backend is backend and mw.subagent_names == {"a", "general-purpose"}
    assert "Pick one of" in mw.tools[0].description
    out = run(create_agent(model, [], middleware=[mw], state_schema=Notes), {**user("go"), "notes": "n1"})
    assert tool_texts(out)[0].strip() == ANSWER.strip()
    graph = mw.registry.graph("a", parent_model=model, parent_tools=[])
    assert "notes" in graph.get_input_jsonschema()["properties"]  # state_schema= reaches the child's state


def test_a_state_schema_that_is_no_class_names_the_argument():
    from deep_agent import SubAgentMiddleware

    with pytest.raises(TypeError, match="argument 'state_schema': expected a TypedDict class"):
        SubAgentMiddleware(subagents=[{"name": "a", "description": "A."}], state_schema={"notes": str})


def test_async_subagent_middleware_is_deepagents_spelling_of_background_tasks():
    from deep_agent import AsyncSubAgentMiddleware, AsyncSubAgentState
    from middleware import AsyncTaskLedgerState, BackgroundSubagentMiddleware

    remote = {"name": "r", "description": "R.", "graph_id": "r", "url": "http://127.0.0.1:9"}
    mw = AsyncSubAgentMiddleware(async_subagents=[remote])
    assert isinstance(mw, BackgroundSubagentMiddleware) and AsyncSubAgentState is AsyncTaskLedgerState
    assert "start_async_task" in [t.name for t in mw.tools]
    assert "general-purpose" not in mw.tools[0].description  # only the remote agents, as in deepagents
    with pytest.raises(ValueError, match="argument 'async_subagents'"):
        AsyncSubAgentMiddleware(async_subagents=[])


def test_unknown_keyword_is_still_a_type_error():
    from deep_agent import SubAgentMiddleware

    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        SubAgentMiddleware(colour="red")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"mode": "branch"}, "field 'mode': expected 'isolated' or 'fork'"),
        ({"mode": "fork", "context": "isolated"}, "'fork' contradicts context='isolated'"),
        ({"permissions": [{"operations": ["write"], "paths": ["/**"], "mode": "deny"}]}, "field 'permissions'"),
    ],
)
def test_unknown_modes_and_spec_permissions_are_refused_with_a_fix(extra, message):
    from deep_agent import create_deep_agent

    with pytest.raises(Exception, match=message):
        create_deep_agent(ScriptedChatModel(), subagents=[{"name": "a", "description": "A.", **extra}])


def test_fork_mode_is_context_fork(run):
    from deep_agent import create_deep_agent

    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegating(("job", "a")))
    spec = {"name": "a", "description": "A.", "mode": "fork", "tools": []}
    run(create_deep_agent(model, subagents=[spec]), user("the parent's own question"))
    (child,) = [c for c in model.calls if any("job" in m.text for m in c["messages"] if m.type == "human")]
    assert any("the parent's own question" in m.text for m in child["messages"])  # it saw the parent's talk


def test_isolated_mode_is_accepted(run):
    from deep_agent import create_deep_agent

    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegating(("job", "a")))
    spec = {"name": "a", "description": "A.", "mode": "isolated", "tools": []}
    out = run(create_deep_agent(model, subagents=[spec]), user("go"))
    assert tool_texts(out)[0].strip() == ANSWER.strip()


def test_compiled_subagent_alias_is_the_same_class():
    from deep_agent import CompiledSubAgent, CompiledSubagent

    assert CompiledSubAgent is CompiledSubagent


# -- compiled runnables of any kind --------------------------------------------


class InvokeOnly:
    """A runnable with only ``invoke`` (no ``ainvoke``), recording how it was called."""

    def __init__(self) -> None:
        self.seen: list[tuple[dict[str, Any], str]] = []

    def invoke(self, inputs: dict[str, Any], config: dict[str, Any] | None = None) -> dict[str, Any]:
        import threading

        from langchain_core.messages import AIMessage

        self.seen.append((dict(config or {}), threading.current_thread().name))
        return {"messages": [*inputs["messages"], AIMessage(content=ANSWER)]}


def test_a_runnable_without_ainvoke_is_accepted_and_stamped(run):
    from deep_agent import CompiledSubAgent, create_deep_agent

    runnable = InvokeOnly()
    spec = CompiledSubAgent(name="plain", description="Plain.", runnable=runnable)
    model = ScriptedChatModel(responses=delegating(("job", "plain")))
    out = run(create_deep_agent(model, subagents=[spec]), user("go"))
    assert tool_texts(out)[0] == ANSWER.rstrip()
    ((config, thread),) = runnable.seen
    assert config["metadata"]["lc_agent_name"] == "plain" and config["run_name"] == "plain"
    if run.mode == "async":
        import threading

        assert thread != threading.main_thread().name  # never on the event loop's thread


def test_a_compiled_runnables_own_recursion_limit_wins(run):
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    from deep_agent import create_deep_agent

    limits: list[int] = []

    def answer(state: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
        limits.append(config["recursion_limit"])
        return {"messages": [AIMessage(content=ANSWER)]}

    spec = {"name": "lambda", "description": "L.",
            "runnable": RunnableLambda(answer).with_config(recursion_limit=7)}
    model = ScriptedChatModel(responses=delegating(("job", "lambda")))
    run(create_deep_agent(model, subagents=[spec]), user("go"), {"recursion_limit": 50})
    assert limits == [7]


def test_something_that_cannot_run_is_refused():
    from deep_agent import create_deep_agent

    with pytest.raises(Exception, match="field 'runnable'.*an object with invoke"):
        create_deep_agent(ScriptedChatModel(), subagents=[{"name": "x", "description": "X.", "runnable": 42}])


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ([42], "item 0: expected a tool name, BaseTool, function or tool dict, got int"),
        ([{"type": "function"}], "item 0: a tool dict needs a 'name'"),
        ("internet_search", "not one str"),
    ],
)
def test_bad_tools_name_the_item(tools, message):
    from deep_agent import create_deep_agent

    with pytest.raises(Exception, match=message):
        create_deep_agent(ScriptedChatModel(), subagents=[{"name": "x", "description": "X.", "tools": tools}])


def test_a_name_no_provider_claims_is_still_an_error():
    from deep_agent import create_deep_agent

    with pytest.raises(Exception, match="field 'model' 'my-model' is not 'inherit'"):
        create_deep_agent(ScriptedChatModel(), subagents=[{"name": "x", "description": "X.", "model": "my-model"}])


def test_an_async_spec_given_to_the_task_tool_says_where_it_belongs():
    from deep_agent import SubAgentMiddleware

    remote = {"name": "r", "description": "R.", "graph_id": "g", "url": "http://127.0.0.1:9"}
    with pytest.raises(Exception, match="runs as a background task: pass it in create_deep_agent"):
        SubAgentMiddleware([remote])


class ConfigurableOnly:
    """``with_config`` returns a configured copy; ``invoke`` only; no ``ainvoke``."""

    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = config

    def with_config(self, config: dict[str, Any]) -> ConfigurableOnly:
        return ConfigurableOnly(config)

    def invoke(self, inputs: dict[str, Any], config: Any = None) -> dict[str, Any]:
        from langchain_core.messages import AIMessage

        assert self.config is not None, "expected the configured copy"
        return {"messages": [AIMessage(content=f"{self.config['run_name']}: {ANSWER}")]}


def test_one_runnable_under_two_names_keeps_each_name(run):
    from deep_agent import create_deep_agent

    shared = ConfigurableOnly()
    specs = [{"name": n, "description": n, "runnable": shared} for n in ("agent-alpha", "agent-beta")]
    model = ScriptedChatModel(responses=delegating(("alpha work", "agent-alpha"), ("beta work", "agent-beta")))
    out = run(create_deep_agent(model, subagents=specs), user("go"))
    assert sorted(t.split(":")[0] for t in tool_texts(out)) == ["agent-alpha", "agent-beta"]
    assert shared.config is None  # the caller's runnable is never changed
