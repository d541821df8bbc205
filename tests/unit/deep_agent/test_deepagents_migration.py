"""Where this library deliberately differs from deepagents, or accepts more.

Each difference fails with an error that names the argument or field and
says what to write instead; each wider input (any runnable, any tool) is
checked here on invoke and ainvoke.
"""

from __future__ import annotations

from typing import Any

import pytest

from helpers.compat import ANSWER, delegating, tool_texts
from helpers.graphs import user
from deep_agent.testing import ScriptedChatModel

# -- where we deliberately differ: the error says what to write ---------------


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"backend": object()}, "backend"),
        ({"state_schema": dict}, "state_schema"),
    ],
)
def test_subagent_middleware_refuses_deepagents_only_arguments(kwargs, named):
    from deep_agent import SubAgentMiddleware

    with pytest.raises(TypeError, match=rf"SubAgentMiddleware\(\): deepagents' argument '{named}'.*docs/migrating.md"):
        SubAgentMiddleware(subagents=[{"name": "a", "description": "A."}], **kwargs)


def test_unknown_keyword_is_still_a_type_error():
    from deep_agent import SubAgentMiddleware

    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        SubAgentMiddleware(colour="red")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"mode": "fork"}, "field 'mode': 'fork' is not supported"),
        ({"permissions": [{"operations": ["write"], "paths": ["/**"], "mode": "deny"}]}, "field 'permissions'"),
    ],
)
def test_fork_mode_and_permissions_are_refused_with_a_fix(extra, message):
    from deep_agent import create_deep_agent

    with pytest.raises(Exception, match=message):
        create_deep_agent(ScriptedChatModel(), subagents=[{"name": "a", "description": "A.", **extra}])


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
