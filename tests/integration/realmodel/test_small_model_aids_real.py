"""Small-model aids on the real SmolLM2-135M: the model itself must produce the call the library routes.

Unlike the plumbing tests beside it, these fail when the model cannot do
its part: a base model that cannot follow a chat writes arguments that do
not come from the task. :data:`SKILL_CHECKS` lists them, and a test swaps
such a base model in (SmolLM2 served with no chat template of its own,
:data:`helpers.local_model.BASE_MODEL_TEMPLATE`) and requires every one of
them to fail on it. Before, the forced child's check passed there: with its
reply held to the tool's JSON schema, copying the one key its task named
took no chat.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.graphs import records, user
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import ForceDelegation, ForceToolUse, ReturnChildAnswer
from subagents._settings import DelegationSettings

pytestmark = pytest.mark.realmodel


def _tools(seen: list[str]) -> tuple[Any, Any]:
    @tool
    def lookup(key: str) -> str:
        """Look up the fact stored under a key."""
        seen.append(f"lookup:{key}")
        return {"alpha_code": "7741"}.get(key.strip(), f"no fact stored under {key!r}")

    @tool
    def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression such as 3 * (4 + 5)."""
        seen.append(f"calculate:{expression}")
        numbers = [int(n) for n in expression.replace("*", " ").split() if n.isdigit()]
        return str(numbers[0] * numbers[1]) if "*" in expression and len(numbers) == 2 else "cannot compute"

    return lookup, calculate


def forced_child_takes_the_key_its_task_asks_for(server: Any) -> None:
    """Three keys are named; the task asks for the last (a model continuing text copies the first)."""
    seen: list[str] = []
    lookup, _ = _tools(seen)
    task = "The keys are beta_code, gamma_code and alpha_code. Look up the key alpha_code."
    parent = ScriptedChatModel(rules=[("go", [{"tool_calls": [tool_call(
        "task", description=task, subagent_type="librarian")]}, "done"])])
    librarian = {"name": "librarian", "description": "Looks up facts by key.", "tools": [lookup],
                 "model": server.chat_model(max_tokens=32),
                 "system_prompt": "Use the lookup tool.", "middleware": [ForceToolUse(answer_with_result=True)]}
    out = create_deep_agent(parent, subagents=[librarian], settings=DelegationSettings.of(general_purpose=False)).invoke(user("go"))
    assert seen == ["lookup:alpha_code"]
    [record] = records(out)
    assert record["status"] == "completed" and record["result"] == "7741"


def root_and_child_take_their_choices_from_the_users_words(server: Any) -> None:
    seen: list[str] = []
    lookup, calculate = _tools(seen)
    child_model = server.chat_model(max_tokens=32)
    specs = [
        {"name": "librarian", "description": "Looks up stored facts by their key, with the lookup tool.",
         "tools": [lookup], "model": child_model, "middleware": [ForceToolUse(answer_with_result=True)]},
        {"name": "calculator", "description": "Does arithmetic with the calculate tool.",
         "tools": [calculate], "model": child_model, "middleware": [ForceToolUse(answer_with_result=True)]},
    ]
    agent = create_deep_agent(server.chat_model(max_tokens=32), subagents=specs,
                              middleware=[ReturnChildAnswer()], settings=DelegationSettings.of(
                                  general_purpose=False, force_delegation=ForceDelegation(description="verbatim"),
                              ))
    out = agent.invoke(user("Compute 37 * 41."))
    [record] = records(out)
    assert record["agent_type"] == "calculator" and record["description"] == "Compute 37 * 41."
    assert len(seen) == 1 and seen[0].startswith("calculate:") and "37" in seen[0] and "41" in seen[0]
    assert out["messages"][-1].text == "1517"


SKILL_CHECKS = [forced_child_takes_the_key_its_task_asks_for, root_and_child_take_their_choices_from_the_users_words]
"""The checks that need the model to do its part: each passes on SmolLM2, each fails on a base model."""


def test_a_forced_child_calls_its_tool_with_the_key_named_in_its_task(local_model):  # noqa: F811
    forced_child_takes_the_key_its_task_asks_for(local_model)


def test_the_root_picks_the_agent_and_its_child_the_arguments_from_the_users_words(local_model):  # noqa: F811
    root_and_child_take_their_choices_from_the_users_words(local_model)


def test_every_check_that_needs_the_model_fails_on_a_base_model_without_a_chat_template(tmp_path):
    from helpers.local_model import BASE_MODEL_TEMPLATE, running_local_model

    template = tmp_path / "base-model.jinja"
    template.write_text(BASE_MODEL_TEMPLATE)
    with running_local_model(tmp_path, parallel=1, chat_template=str(template)) as base_model:
        passed = []
        for check in SKILL_CHECKS:
            try:
                check(base_model)
            except AssertionError:
                continue
            passed.append(check.__name__)
    assert not passed, f"these pass without a model that follows a chat: {passed}"


def test_the_shipped_chat_template_makes_the_server_render_and_parse_tools(local_model, tmp_path):  # noqa: F811
    """SmolLM2's own template renders no tools; with ``--chat-template chatml-tools`` the server says it does.

    Before: the command had no ``--chat-template``, so this server never started.
    """
    import json
    import urllib.request

    from helpers.local_model import running_local_model

    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def caps(url: str) -> dict[str, Any]:
        with direct.open(url.removesuffix("/v1") + "/props", timeout=30) as answer:
            return json.load(answer)["chat_template_caps"]

    assert caps(local_model.url)["supports_tool_calls"] is False  # the model's own template
    with running_local_model(tmp_path, parallel=1, chat_template="chatml-tools") as served:
        found = caps(served.url)
        assert found["supports_tools"] is True and found["supports_tool_calls"] is True
        tools = [{"type": "function", "function": {"name": "lookup", "description": "Look up a fact.",
                                                   "parameters": {"type": "object",
                                                                  "properties": {"key": {"type": "string"}}}}}]
        body = json.dumps({"messages": [{"role": "user", "content": "Find alpha."}], "tools": tools}).encode()
        request = urllib.request.Request(served.url.removesuffix("/v1") + "/apply-template", data=body,
                                         headers={"content-type": "application/json"})
        with direct.open(request, timeout=30) as answer:
            prompt = json.load(answer)["prompt"]
        assert "<tools>" in prompt and '"name": "lookup"' in prompt and "<tool_call>" in prompt
