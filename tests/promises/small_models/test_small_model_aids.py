"""Small-model aids, on scripted models that behave like llama.cpp's server.

The promises tried: a child with :class:`ForceToolUse` calls one of its
tools on its first call (its arguments from a JSON reply) and answers
freely after; ``ForceDelegation(description="verbatim")`` hands the child
the user's message as written; :class:`ReturnChildAnswer` ends a turn of
one successful delegation on the child's answer, and leaves every other
turn to the model; ``auto`` forcing counts the tokens of the call it drops,
and asks a server that says it parses no tool call straight for JSON;
left to the model, such a server gets one warning per base url.
"""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from helpers.graphs import records, user
from helpers.server_like import ServerLikeModel
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import ForceDelegation, ForceToolUse, ReturnChildAnswer
from middleware import _limits as server_caps
from middleware._limits import forced_tool_schema
from subagents._errors import ToolCallsUnsupported
from subagents._settings import DelegationSettings

FACTS = {"alpha_code": "7741", "beta_code": "3318"}
SEEN: list[dict[str, Any]] = []


@tool
def lookup(key: str) -> str:
    """Look up the fact stored under a key."""
    SEEN.append({"tool": "lookup", "key": key})
    return FACTS.get(key, f"no fact stored under {key!r}")


@tool
def shout(text: str) -> str:
    """Say something loudly."""
    SEEN.append({"tool": "shout", "text": text})
    return text.upper()


class JsonChild(ScriptedChatModel):
    """A child model that fills a ``response_format`` with ``json_reply`` and otherwise follows its script."""

    json_reply: Any = None
    formats: list[Any] = Field(default_factory=list)

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.formats.append(kwargs.get("response_format"))
        if kwargs.get("response_format") and self.json_reply is not None:
            text = self.json_reply if isinstance(self.json_reply, str) else json.dumps(self.json_reply)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list[Any], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        return self._generate(messages, stop, run_manager, **kwargs)


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    SEEN.clear()
    server_caps._known.clear()
    server_caps._warned.clear()
    yield
    server_caps._known.clear()
    server_caps._warned.clear()


# -- ForceToolUse ----------------------------------------------------------------------------------


def test_a_forced_child_calls_its_tool_with_the_arguments_of_its_json_reply_then_answers_freely():
    """Before: a model that never calls tools (a template that renders none) answered without its tool."""
    child = JsonChild(json_reply={"key": "alpha_code"}, default="The value is 7741.")
    agent = create_agent(child, [lookup], middleware=[ForceToolUse()])
    out = agent.invoke(user("Find the fact alpha_code."))
    assert SEEN == [{"tool": "lookup", "key": "alpha_code"}]
    assert out["messages"][-1].text == "The value is 7741."
    first, second = child.formats[:2]
    assert first["json_schema"]["schema"]["required"] == ["key"]  # the tool's own arguments
    assert second is None  # later calls are free


def test_with_several_tools_the_reply_names_the_tool_and_its_arguments():
    child = JsonChild(json_reply={"tool": "shout", "arguments": {"text": "hi"}}, default="done")
    agent = create_agent(child, [lookup, shout], middleware=[ForceToolUse()])
    agent.invoke(user("Shout hi."))
    assert SEEN == [{"tool": "shout", "text": "hi"}]
    branches = child.formats[0]["json_schema"]["schema"]["anyOf"]
    assert [b["properties"]["tool"]["enum"] for b in branches] == [["lookup"], ["shout"]]


def test_only_the_named_tools_are_forced_and_a_reply_that_fits_none_is_left_as_text():
    child = JsonChild(json_reply={"tool": "lookup", "arguments": {"key": "x"}}, default="done")
    agent = create_agent(child, [lookup, shout], middleware=[ForceToolUse(tools=["shout"])])
    out = agent.invoke(user("Shout."))
    assert SEEN == []  # the schema was shout's arguments; a reply for another tool is not a call
    assert out["messages"][-1].type == "ai"


async def test_the_async_path_forces_the_same_call():
    child = JsonChild(json_reply={"key": "beta_code"}, default="3318 it is.")
    agent = create_agent(child, [lookup], middleware=[ForceToolUse()])
    out = await agent.ainvoke(user("beta_code?"))
    assert SEEN == [{"tool": "lookup", "key": "beta_code"}] and out["messages"][-1].text == "3318 it is."


def test_the_schema_of_one_tool_is_its_arguments_closed_to_other_keys():
    spec = {"name": "lookup", "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}
    schema = forced_tool_schema([spec])
    assert schema["required"] == ["key"] and schema["additionalProperties"] is False
    assert "required" not in spec["parameters"]  # the caller's spec is not changed


def test_a_spec_opts_in_and_its_siblings_do_not():
    child_model = JsonChild(json_reply={"key": "alpha_code"}, default="7741.")
    plain_model = JsonChild(json_reply={"key": "beta_code"}, default="plain answer")
    parent = ScriptedChatModel(rules=[("go", [{"tool_calls": [
        tool_call("task", description="alpha_code please", subagent_type="forced"),
        tool_call("task", description="anything", subagent_type="plain")]}, "done"])])
    agent = create_deep_agent(parent, subagents=[
        {"name": "forced", "description": "F.", "model": child_model, "tools": [lookup], "middleware": [ForceToolUse()]},
        {"name": "plain", "description": "P.", "model": plain_model, "tools": [lookup]},
    ], settings=DelegationSettings.of(general_purpose=False))
    out = agent.invoke(user("go"))
    assert SEEN == [{"tool": "lookup", "key": "alpha_code"}]
    assert sorted(r["status"] for r in records(out)) == ["completed", "completed"]


# -- verbatim descriptions --------------------------------------------------------------------------


def _children(answer: str = "child answer") -> list[dict[str, Any]]:
    return [{"name": n, "description": f"{n}.", "model": ScriptedChatModel(default=answer)} for n in ("alpha", "beta")]


@pytest.mark.parametrize("honours_tool_choice", [False, True], ids=["response_format", "tool_choice"])
def test_verbatim_hands_the_child_the_users_message_and_asks_the_model_only_for_the_agent(honours_tool_choice):
    """Before: the child got the small model's own description (a placeholder, or the facts dropped)."""
    parent = ServerLikeModel(honours_tool_choice=honours_tool_choice, json_reply={"subagent_type": "beta"},
                             default="done")
    agent = create_deep_agent(parent, subagents=_children(), settings=DelegationSettings.of(
        force_delegation=ForceDelegation(description="verbatim"),
    ))
    prompt = "Find alpha_code, beta_code and the ship's name; answer with all three."
    out = agent.invoke(user(prompt))
    (record,) = records(out)
    assert record["description"] == prompt
    forced = parent.settings[0]
    schemas = [forced["response_format"]["json_schema"]["schema"]] if forced["response_format"] else forced["schemas"]
    assert all(list(s["properties"]) == ["subagent_type"] for s in schemas)


def test_the_forced_prompt_holds_no_placeholder_a_model_could_copy():
    from middleware._limits import FORCED_CALL_PROMPT, VERBATIM_CALL_PROMPT

    for prompt in (FORCED_CALL_PROMPT, VERBATIM_CALL_PROMPT):
        assert "<" not in prompt and ">" not in prompt


# -- ReturnChildAnswer -----------------------------------------------------------------------------


def test_one_successful_delegation_ends_the_turn_on_the_childs_answer():
    parent = ScriptedChatModel(rules=[("question", [{"tool_calls": [
        tool_call("task", description="find it", subagent_type="alpha")]}, "a garbled rewrite"])])
    agent = create_deep_agent(parent, subagents=_children("The answer is 7741."),
                              middleware=[ReturnChildAnswer()], settings=DelegationSettings.of(
                                  general_purpose=False,
                              ))
    out = agent.invoke(user("question"))
    assert out["messages"][-1].type == "ai" and out["messages"][-1].text == "The answer is 7741."
    assert len(parent.calls) == 1  # no second root call


@pytest.mark.parametrize("case", ["parallel", "failed"])
def test_any_other_turn_goes_back_to_the_model(case):
    calls = [tool_call("task", description="one", subagent_type="alpha")]
    if case == "parallel":
        calls.append(tool_call("task", description="two", subagent_type="beta"))
    parent = ScriptedChatModel(rules=[("question", [{"tool_calls": calls}, "the root's own summary"])])
    children = _children("child answer")
    if case == "failed":
        children[0]["model"] = ScriptedChatModel(default=RuntimeError("model down"))
    agent = create_deep_agent(parent, subagents=children, middleware=[ReturnChildAnswer()],
    settings=DelegationSettings.of(general_purpose=False))
    out = agent.invoke(user("question"))
    assert out["messages"][-1].text == "the root's own summary" and len(parent.calls) == 2


async def test_the_child_answer_ends_the_turn_on_ainvoke_too():
    parent = ScriptedChatModel(rules=[("question", [{"tool_calls": [
        tool_call("task", description="find it", subagent_type="alpha")]}, "rewrite"])])
    agent = create_deep_agent(parent, subagents=_children("Async answer."),
                              middleware=[ReturnChildAnswer()], settings=DelegationSettings.of(
                                  general_purpose=False,
                              ))
    out = await agent.ainvoke(user("question"))
    assert out["messages"][-1].text == "Async answer."


# -- auto forcing: the dropped call's tokens, and the server's own word -----------------------------


def test_the_tokens_of_the_call_auto_forcing_drops_are_counted():
    """Before: the ignored tool_choice call's tokens were missing from the root's usage."""

    class Billing(ServerLikeModel):
        def _server_reply(self, messages: list[Any], kwargs: dict[str, Any]) -> ChatResult | None:
            if kwargs.get("tool_choice") not in (None, "auto", "none") and not kwargs.get("response_format"):
                self.settings.append({"tool_choice": kwargs.get("tool_choice")})
                return ChatResult(generations=[ChatGeneration(message=AIMessage("I will not call tools", usage_metadata={
                    "input_tokens": 300, "output_tokens": 52, "total_tokens": 352}))])
            return super()._server_reply(messages, kwargs)

    parent = Billing(default="done")
    agent = create_deep_agent(parent, subagents=_children(), settings=DelegationSettings.of(force_delegation=True))
    out = agent.invoke(user("hello"))
    forced = next(m for m in out["messages"] if m.type == "ai" and m.tool_calls)
    assert forced.usage_metadata["input_tokens"] == 310 and forced.usage_metadata["total_tokens"] == 367


class _Props(BaseHTTPRequestHandler):
    caps: dict[str, Any] = {}
    asked = 0

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).asked += 1
        body = json.dumps({"chat_template_caps": self.caps}).encode()
        self.send_response(200 if self.path == "/props" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def props_server() -> Iterator[tuple[str, type[_Props]]]:
    handler = type("Props", (_Props,), {"caps": {}, "asked": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1", handler
    finally:
        server.shutdown()
        server.server_close()


class _Served(ServerLikeModel):
    openai_api_base: str | None = None


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_server_that_says_it_parses_no_tool_call_gets_json_from_the_first_call(props_server, mode):
    """Before: every new agent first sent a tool_choice call the server ignored."""
    url, handler = props_server
    handler.caps = {"supports_tools": False, "supports_tool_calls": False}
    parent = _Served(openai_api_base=url, default="done")
    agent = create_deep_agent(parent, subagents=_children(), settings=DelegationSettings.of(force_delegation=True))
    out = agent.invoke(user("hello")) if mode == "sync" else await agent.ainvoke(user("hello"))
    assert len(records(out)) == 1
    assert parent.settings[0]["response_format"] is not None and parent.settings[0]["tool_choice"] is None
    again = create_deep_agent(parent, subagents=_children(), settings=DelegationSettings.of(force_delegation=True))
    again.invoke(user("hello"))
    assert handler.asked == 1  # once per server and process


def test_a_server_that_parses_tool_calls_keeps_tool_choice(props_server):
    url, handler = props_server
    handler.caps = {"supports_tools": True, "supports_tool_calls": True}
    parent = _Served(openai_api_base=url, honours_tool_choice=True, default="done")
    create_deep_agent(parent, subagents=_children(), settings=DelegationSettings.of(force_delegation=True)).invoke(user("hello"))
    assert parent.settings[0]["tool_choice"] == "task"


def test_a_hosted_api_is_never_probed():
    assert server_caps.tool_calls_supported(_Served(openai_api_base="https://api.example.com/v1")) is None
    assert server_caps._known == {"https://api.example.com/v1": None}


# -- auto mode (delegation left to the model): a server that parses no tool call is named once ---------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_auto_mode_warns_once_per_server_that_parses_no_tool_call(props_server, mode):
    """Before: the model was offered ``task`` it could never call, and nothing said so."""
    url, handler = props_server
    handler.caps = {"supports_tools": False, "supports_tool_calls": False}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # two agents, two runs each, one server
            agent = create_deep_agent(_Served(openai_api_base=url, default="done"), subagents=_children())
            for _ in range(2):
                out = agent.invoke(user("hello")) if mode == "sync" else await agent.ainvoke(user("hello"))
                assert out["messages"][-1].text == "done"
    said = [w.message for w in caught if isinstance(w.message, ToolCallsUnsupported)]
    assert [w.base_url for w in said] == [url]
    assert "force_delegation=True" in str(said[0]) and handler.asked == 1


def test_auto_mode_is_quiet_for_a_server_that_parses_tool_calls_or_does_not_say(props_server):
    url, handler = props_server
    other = url.replace("127.0.0.1", "localhost")  # another base url of the same server
    handler.caps = {"supports_tools": True, "supports_tool_calls": True}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        create_deep_agent(_Served(openai_api_base=url, default="done"), subagents=_children()).invoke(user("hi"))
        handler.caps = {}
        create_deep_agent(_Served(openai_api_base=other, default="done"), subagents=_children()).invoke(user("hi"))
        handler.caps = {"supports_tools": False, "supports_tool_calls": False}
        forced = create_deep_agent(_Served(openai_api_base=url + "/", default="done"), subagents=_children(),
        settings=DelegationSettings.of(force_delegation=True))
        forced.invoke(user("hi"))  # forced delegation works around it: nothing to warn of
    assert not [w for w in caught if isinstance(w.message, ToolCallsUnsupported)]
    assert handler.asked == 3
