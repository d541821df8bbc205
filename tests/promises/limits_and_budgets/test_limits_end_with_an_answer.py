"""Limits end a task with an answer: the last call a limit allows is a wrap-up, with no tools.

Each limit that can be foreseen (turns, time, the task's own tokens and dollars, the shared budget's) gives
a looping child one last call without tools; its answer reaches the parent marked as cut short in one line,
and the record says ``partial`` with the limit's ``stop_reason``. A reply that calls a tool anyway runs no
tool; a wrap-up with no text, a crash, or wrap-ups turned off end the task with an error, as before.
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
from typing import Any

import pytest
from helpers.background import NOTICE, background, notices, on_task, start, started_ids, wait_for  # noqa: F401 - background is a fixture
from helpers.graphs import echo, parent_script, records, tool_messages, user
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, SummarizationMiddleware
from langchain_core.messages import AIMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel
from rich.console import Console

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from deep_agent.cli._inspect import tasks_view
from deep_agent.cli._live_view import TaskTree
from deep_agent.cli._store import background_row, sync_row
from subagents import Budget, SpecError, SubagentSpec
from subagents._metering import WRAP_UP_PROMPT, prompt_estimate
from subagents._settings import DelegationSettings
from subagents.definitions._agent_files import AgentFileError, load_agent_file

ANSWER = "Found so far: fact A and fact B; fact C is still open."


def asked_to_wrap_up(messages) -> bool:
    return bool(messages) and messages[-1].type == "human" and messages[-1].text == WRAP_UP_PROMPT


def loops_until_told(tool_name: str = "echo"):
    """A child that calls a tool on every call, and answers only when asked for its last answer."""
    def reply(messages):
        if asked_to_wrap_up(messages):
            return ANSWER
        return {"tool_calls": [tool_call(tool_name, x="again")]}
    return reply


@tool
def nap(x: str) -> str:
    """A slow step of work."""
    time.sleep(1.2)
    return "rested"


PRICES = {"scripted": (1.0, 1.0)}
# limit -> (spec fields, create_deep_agent options, the stop reason, words of the cut-short line)
LIMITS = {
    "max_turns": ({"max_turns": 3}, {}, "max_turns", "model calls (max_turns=3)"),
    "own tokens": ({"max_tokens": 3000}, {}, "budget", "tokens (3000)"),
    "own dollars": ({"max_budget_per_run": 0.003}, {"settings": DelegationSettings.of(prices=PRICES)}, "budget", "dollars ($0.003)"),
    "shared tokens": ({}, {"settings": lambda: DelegationSettings.of(budget=Budget(max_tokens=6000))}, "budget",
                      "tokens (6000)"),
    "shared dollars": ({}, {"settings": lambda: DelegationSettings.of(budget=Budget(max_usd=0.006, prices=PRICES))},
                       "budget", "dollars ($0.006)"),
    # 95% of timeout_s left starts the wrap-up: the first nap (1.2s) uses more than 5% of 20s.
    "time": ({"timeout_s": 20.0, "wrap_up": 0.95, "tools": ["nap"]}, {}, "timeout", "time (timeout_s=20)"),
}


def looping_agent(limit: str, **options):
    fields, extra, _, _ = LIMITS[limit]
    tools = fields.get("tools", ["echo"])
    model = ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))],
                              default=loops_until_told(tools[0]))
    spec = {"name": "looper", "description": "l", "tools": tools, "max_turns": 200, **fields}
    built = {k: v() if callable(v) else v for k, v in extra.items()}
    agent = create_deep_agent(model, [echo, nap], subagents=[spec], **built, **options)
    return agent, model, built["settings"].limits.budget if "settings" in built else None


def child_calls(model):
    return [c for c in model.calls if any(m.text == "loop" for m in c["messages"])]


@pytest.mark.parametrize("limit", list(LIMITS))
def test_each_limit_ends_a_looping_child_with_its_own_answer(run, limit):
    agent, model, budget = looping_agent(limit)
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (msg,) = tool_messages(out)
    _, _, stop_reason, named = LIMITS[limit]
    first, _, rest = msg.content.partition("\n\n")
    assert msg.status == "success"
    assert first.startswith("[Cut short by its limit on") and named in first and "\n" not in first
    assert rest == ANSWER
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", stop_reason, True, ANSWER)
    calls = child_calls(model)
    # The wrap-up is one call of the task's, counted, and offered no tools; every earlier call had them.
    assert record["model_calls"] == len(calls) >= 2
    assert calls[-1]["tools"] == [] and all(c["tools"] for c in calls[:-1])
    assert asked_to_wrap_up(calls[-1]["messages"]) and not any(asked_to_wrap_up(c["messages"]) for c in calls[:-1])
    if budget is not None:  # the wrap-up was reserved as any call: the shared limit still holds
        assert budget.tokens <= (budget.max_tokens or float("inf")) and budget.usd <= (budget.max_usd or float("inf"))


def test_parallel_children_on_a_shared_budget_each_keep_room_for_their_answer(run):
    budget = Budget(max_tokens=8000)
    model = ScriptedChatModel(rules=[("go", [{"tool_calls": [tool_call("task", description=f"loop {i}",
                                                                       subagent_type="looper") for i in range(4)]},
                                             "parent done"])],
                              default=loops_until_told())
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 200}
    out = run(create_deep_agent(model, [echo], subagents=[spec],
                                settings=DelegationSettings.of(budget=budget)), user("go"), {"recursion_limit": 1000})
    done = records(out)
    # A child that made a call held room for its wrap-up and answers with it. One that starts after the others
    # spent the budget (the order a loaded machine may pick) finds no room for a first call and its wrap-up:
    # it is refused before any call, with nothing to hand back.
    ran = [r for r in done if r["model_calls"]]
    seen = [(r["status"], r["stop_reason"], r["model_calls"], r.get("error")) for r in done]
    assert len(done) == 4 and ran and all(r["partial"] and r["result"] == ANSWER for r in ran), seen
    assert all(r["stop_reason"] == "budget" for r in done if not r["model_calls"]), done
    assert budget.reserved == 0  # every room held for a call and a wrap-up was given back


class SchemalessChild(ScriptedChatModel):
    """A model that sends no tool schemas (its provider is told of tools some other way) and reports no input
    tokens (never believed: its calls are held at the clamp)."""

    def bind_tools(self, tools, **kwargs):
        return self

    def _respond(self, messages, tools):
        result = super()._respond(messages, tools)
        message = result.generations[0].message
        output = message.usage_metadata["output_tokens"]
        message.usage_metadata = UsageMetadata(input_tokens=0, output_tokens=output, total_tokens=output)
        return result


def _crowded(run, budget: Budget, crowd, child: ScriptedChatModel | None = None) -> tuple[dict, list[str]]:
    """The record of a child looping on a tool that first runs ``crowd(step)`` (a sibling's call taking tokens),
    and its steps; the child's model is ``child``, else the parent's."""
    steps: list[str] = []

    @tool
    def crowded(x: str) -> str:
        """A step of work while siblings' calls take tokens."""
        steps.append(x)
        crowd(len(steps))
        return "done"

    loops = {"default": loops_until_told("crowded")} if child is None else {}
    spec = {"name": "looper", "description": "l", "tools": ["crowded"], "max_turns": 200,
            **({"model": child} if child is not None else {})}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))], **loops),
                              [crowded], subagents=[spec], settings=DelegationSettings.of(budget=budget))
    (record,) = records(run(agent, user("go"), {"recursion_limit": 1000}))
    assert (record["status"], record["stop_reason"], record["result"]) == ("completed", "budget", ANSWER), (
        record["error"], record["model_calls"])
    return record, steps


def _take_every_free_token(budget: Budget, *, spend: bool = False) -> None:
    free = budget.max_tokens - budget.tokens - budget.reserved
    budget.reserve(free, refuse=False)
    if spend:
        budget.spend(free, 0.0)


def test_a_child_whose_siblings_take_every_free_token_still_makes_its_wrap_up(run):
    """The room a child holds for its wrap-up is held at the scale the wrap-up's own hold asks: a model whose
    usage is never believed (this scripted one) is held at the clamp, the wrap-up included. A sibling's call
    in flight takes whatever the child does not hold (here: all of it, from the child's third step on, once
    it has seen how its conversation grows)."""
    budget = Budget(max_tokens=20000)
    _crowded(run, budget, lambda step: step >= 3 and _take_every_free_token(budget))


def test_a_siblings_output_no_one_foresaw_leaves_a_child_the_wrap_up_it_held_room_for(run):
    """A sibling holds every free token and its output passes them: what is spent and held passes the limit, though
    the budget is not spent. The child's wrap-up, within the room it held, was refused all the same (the budget
    judged it with the sibling's hold and overshoot), and the task ended with no answer."""
    budget = Budget(max_tokens=200000)
    _, steps = _crowded(run, budget, lambda step: step == 2 and _take_every_free_token(budget, spend=True))
    assert len(steps) == 2  # its next call was the wrap-up


def test_the_room_held_for_the_wrap_up_covers_its_instruction_and_its_prompts_growth(run):
    """The room for the wrap-up was its prompt grown as the wrap-up judged the calls (the first with tool schemas
    the model never sent: no growth seen), without the wrap-up's own instruction: a sibling holding every other
    token, the wrap-up asked a little more than its room and was refused."""
    budget = Budget(max_tokens=200000)
    _crowded(run, budget, lambda step: step == 2 and _take_every_free_token(budget),
             child=SchemalessChild(default=loops_until_told("crowded")))


class DenseChild(ScriptedChatModel):
    """Bills ``density`` times the prompt the library estimates (tool schemas included): a denser tokenizer."""

    density: float = 3.0

    def _respond(self, messages, tools):
        result = super()._respond(messages, tools)
        message = result.generations[0].message
        billed = int(prompt_estimate(messages, {"tools": tools} if tools else None) * self.density) + 1
        output = message.usage_metadata["output_tokens"]
        message.usage_metadata = UsageMetadata(input_tokens=billed, output_tokens=output,
                                               total_tokens=billed + output)
        return result


def test_a_child_whose_tokenizer_is_denser_wraps_up_within_its_own_max_tokens(run):
    """No shared budget learns the ratio: the child's own calls show it, and its own limit is judged at it
    (before: at the margin, so an 8x-denser child passed its max_tokens with no answer)."""
    model = DenseChild(density=8.0, rules=[("go", parent_script(("loop", "looper")))], default=loops_until_told())
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 200, "max_tokens": 20000}
    out = run(create_deep_agent(model, [echo], subagents=[spec]), user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["result"]) == ("completed", "budget", ANSWER), (
        record["error"], record["model_calls"])


def test_one_childs_huge_prompt_refused_leaves_its_siblings_their_wrap_ups(run):
    """A call too big for what is left is refused; the siblings' small calls still fit and are made (before:
    the refused call, remembered as the budget's smallest, refused every later call, wrap-ups included)."""
    budget = Budget(max_tokens=60000)

    @tool
    def look(x: str) -> str:
        """One step of work; job 0's third step returns a huge result."""
        looked.append(x)
        return "z" * 400_000 if x == "job 0" and looked.count(x) == 3 else "small"

    looked: list[str] = []

    def reply(messages):
        if asked_to_wrap_up(messages):
            return ANSWER
        job = next(m.text for m in messages if m.type == "human")
        return {"tool_calls": [tool_call("look", x=job)]}

    # Usage as estimated, believed: the budget learns the ratio and remembers the refused call.
    model = DenseChild(density=1.0, rules=[("go", [{"tool_calls": [tool_call("task", description=f"job {i}",
                                                                             subagent_type="looper")
                                                                   for i in range(3)]}, "parent done"])],
                       default=reply)
    spec = {"name": "looper", "description": "l", "tools": ["look"], "max_turns": 200}
    out = run(create_deep_agent(model, [look], subagents=[spec],
                                settings=DelegationSettings.of(budget=budget)), user("go"),
              {"recursion_limit": 1000})
    by_job = {r["description"]: r for r in records(out)}
    assert by_job["job 0"]["status"] == "error" and "~" in by_job["job 0"]["error"]  # its huge call: refused
    for job in ("job 1", "job 2"):
        assert (by_job[job]["status"], by_job[job]["result"]) == ("completed", ANSWER), by_job[job]["error"]


def test_a_delegation_that_waited_for_its_place_while_the_budget_was_spent_is_refused_as_new_work(run):
    """One place (max_concurrent_tasks=1): the second child waits while the first spends the budget to its
    wrap-up; given the place, it is refused as a delegation that came then, before any call."""
    model = DenseChild(density=1.0, rules=[("go", [{"tool_calls": [tool_call("task", description=f"loop {i}",
                                                                             subagent_type="looper")
                                                                   for i in range(2)]}, "parent done"])],
                       default=loops_until_told())
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 200}
    agent = create_deep_agent(model, [echo], subagents=[spec],
                              settings=DelegationSettings.of(budget=Budget(max_tokens=8000), max_concurrent_tasks=1))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    first, second = sorted(records(out), key=lambda r: r["model_calls"], reverse=True)
    assert (first["status"], first["stop_reason"], first["result"]) == ("completed", "budget", ANSWER)
    assert (second["stop_reason"], second["model_calls"]) == ("budget", 0)
    assert "no new delegations can start" in second["error"], second["error"]


def test_a_swap_of_held_room_is_one_step_and_changes_nothing_when_it_does_not_fit():
    budget = Budget(max_tokens=1000)
    budget.reserve(600, refuse=False)  # siblings' calls in flight
    assert budget.swap((100, 0.0), (300, 0.0)) is None  # 400 left, 100 of them its own
    assert budget.reserved == 800
    assert budget.swap((300, 0.0), (600, 0.0)) == "tokens" and budget.reserved == 800  # 500 at most: unchanged


@pytest.mark.parametrize("limit", list(LIMITS))
def test_a_background_task_cut_short_by_a_limit_hands_back_its_answer(run, background, limit):
    fields, extra, stop_reason, named = LIMITS[limit]
    tools = fields.get("tools", ["echo"])
    model = ScriptedChatModel(rules=[(NOTICE, ["noted"]), ("PARENT", [start(("loop", "looper")), "started"])],
                              default=loops_until_told(tools[0]))
    spec = SubagentSpec(name="looper", description="l", **{"max_turns": 200, **fields, "tools": tools})
    middleware = background([spec], **{k: v() if callable(v) else v for k, v in extra.items()})
    agent = create_agent(model, [echo, nap], middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{time.monotonic_ns()}"}}
    out = run(agent, user("PARENT go"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    out = run(agent, user("and now?"), config)  # the parent's next turn: the ledger and the notice
    record = out["async_tasks"][task_id]
    assert (record["status"], record["stop_reason"], record["partial"]) == ("completed", stop_reason, True)
    first, _, rest = record["result"].partition("\n\n")
    assert first.startswith("[Cut short by its limit on") and named in first and rest == ANSWER
    assert any(ANSWER in text for text in notices(out))


def counting_tool():
    ran = []

    @tool
    def work(x: str) -> str:
        """One step of work."""
        ran.append(x)
        return "done"

    return work, ran


@pytest.mark.parametrize("limit", [{"max_tokens": 12000}, {"max_budget_per_run": 0.012}], ids=["tokens", "dollars"])
def test_an_output_no_one_foresaw_past_the_childs_own_limit_still_ends_with_its_wrap_up(run, limit):
    """Its second call writes a long draft through a tool, past the limit by itself: the tool's start was refused,
    and the wrap-up too, and the task ended with no answer."""
    work, ran = counting_tool()

    def reply(messages):
        if asked_to_wrap_up(messages):
            return ANSWER
        long = sum(m.type == "ai" for m in messages) == 1
        return {"tool_calls": [tool_call("work", x="draft paragraph. " * (3000 if long else 1))]}

    child = ScriptedChatModel(default=reply)
    spec = {"name": "writer", "description": "w", "tools": ["work"], "model": child, "max_turns": 200, **limit}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("write", "writer")))]), [work],
                              subagents=[spec], settings=DelegationSettings.of(prices=PRICES))
    (record,) = records(run(agent, user("go"), {"recursion_limit": 1000}))
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", "budget", True, ANSWER), record["error"]
    # The long draft's tool ran; the wrap-up, with no tools, is the one call past the limit.
    assert len(ran) == 2 and len(child.calls) == 3 and child.calls[-1]["tools"] == []


def critic(model: ScriptedChatModel, hook: str) -> AgentMiddleware:
    """A root middleware of the child's that calls a model of its own at ``hook`` (``before_model``,
    ``after_model``) of each of the child's calls, on invoke and ainvoke."""
    def call(self: Any, state: Any, runtime: Any) -> None:
        model.invoke("critique")

    async def acall(self: Any, state: Any, runtime: Any) -> None:
        await model.ainvoke("critique")

    return type(f"Critic_{hook}", (AgentMiddleware,), {hook: call, f"a{hook}": acall})()


@pytest.mark.parametrize("said", ["Notes so far: fact A.", ""])
@pytest.mark.parametrize("limit", [{"max_tokens": 12000}, {"max_budget_per_run": 0.012}], ids=["tokens", "dollars"])
def test_a_critics_call_refused_before_the_wrap_up_ends_the_task_on_the_childs_last_answer(run, limit, said):
    """The child's second call wrote past its limit; the wrap-up was to come next, but the critic's call in
    before_model came first and was refused: the task ended as an error, with no answer."""
    def reply(messages):
        long = sum(m.type == "ai" for m in messages) == 1
        return {"content": said, "tool_calls": [tool_call("echo", x="draft paragraph. " * (3000 if long else 1))]}

    child, critic_model = ScriptedChatModel(default=reply), ScriptedChatModel(default="fine")
    spec = {"name": "writer", "description": "w", "tools": ["echo"], "model": child, "max_turns": 200,
            "middleware": [critic(critic_model, "before_model")], **limit}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("write", "writer")))]), [echo],
                              subagents=[spec], settings=DelegationSettings.of(prices=PRICES))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert len(child.calls) == 2 and not any(asked_to_wrap_up(c["messages"]) for c in child.calls)
    if said:  # as when other calls took the turns left: the last text the child gave, cut short by the limit
        assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
            "completed", "budget", True, said), record["error"]
        assert tool_messages(out)[0].content.startswith("[Cut short by its limit on")
    else:  # nothing said: the limit's error, as a wrap-up without text
        assert (record["status"], record["stop_reason"]) == ("error", "budget")


@pytest.mark.parametrize("wrap_up_says", [ANSWER, ""])
@pytest.mark.parametrize("max_turns", [3, 5])
def test_a_critics_call_refused_after_the_wrap_up_answered_ends_the_task_on_that_answer(run, max_turns, wrap_up_says):
    """The critic's call in after_model, past the wrap-up, was refused: the wrap-up's answer was lost, an error."""
    def reply(messages):
        return wrap_up_says if asked_to_wrap_up(messages) else {"content": NOTES, "tool_calls": [tool_call("echo", x="1")]}

    child = ScriptedChatModel(default=reply)
    spec = {"name": "writer", "description": "w", "tools": ["echo"], "model": child, "max_turns": max_turns,
            "middleware": [critic(ScriptedChatModel(default="fine"), "after_model")]}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("write", "writer")))]), [echo],
                              subagents=[spec])
    (record,) = records(run(agent, user("go"), {"recursion_limit": 1000}))
    assert asked_to_wrap_up(child.calls[-1]["messages"])
    if wrap_up_says:
        assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
            "completed", "max_turns", True, ANSWER), record["error"]
    else:  # nothing said on the wrap-up: the limit's error, never an earlier text
        assert (record["status"], record["stop_reason"]) == ("error", "max_turns")


NOTES = "Notes so far: fact A."


def notes_then_loops(tool_name: str = "echo"):
    """A looping child that says what it has found with each tool call, and answers when asked to."""
    def reply(messages):
        return ANSWER if asked_to_wrap_up(messages) else {"content": NOTES, "tool_calls": [tool_call(tool_name, x="1")]}
    return reply


@pytest.mark.parametrize("max_turns", [3, 5])
def test_a_summarisers_call_that_takes_the_last_turn_ends_the_task_on_its_last_answer(run, max_turns):
    """The summariser calls its model in before_model, after the wrap-up was judged a turn away: that call took
    the last turn. The wrap-up was refused (no answer), then sent as a call past max_turns: no limit passes its
    count, so the task ends on the last answer the child gave."""
    child = ScriptedChatModel(default=notes_then_loops())
    summariser = ScriptedChatModel(default="Summary of the work so far.")
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "model": child, "max_turns": max_turns,
            "middleware": [SummarizationMiddleware(summariser, trigger=("messages", 4), keep=("messages", 2))]}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))]), [echo],
                              subagents=[spec])
    (record,) = records(run(agent, user("go"), {"recursion_limit": 1000}))
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", "max_turns", True, NOTES), record["error"]
    assert summariser.calls and record["model_calls"] == len(child.calls) + len(summariser.calls) == max_turns
    assert not any(asked_to_wrap_up(call["messages"]) for call in child.calls)


@pytest.mark.parametrize("helper_calls", [1, 2])
def test_a_tools_model_calls_that_take_the_last_turns_leave_no_wrap_up_past_max_turns(run, helper_calls):
    """With max_turns=3, a tool's own model calls (metered as the child's) took turns 2 and 3, and the wrap-up
    was still sent: four calls. No limit passes its count: the task ends on the last answer the child gave."""
    helper = ScriptedChatModel(default="a helper's note")

    @tool
    def ask(x: str) -> str:
        """Asks a helper model."""
        for _ in range(helper_calls):
            helper.invoke(x)
        return "asked"

    child = ScriptedChatModel(default=notes_then_loops("ask"))
    spec = {"name": "looper", "description": "l", "tools": [ask], "model": child, "max_turns": 3}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))]), [echo],
                              subagents=[spec])
    (record,) = records(run(agent, user("go"), {"recursion_limit": 1000}))
    assert record["model_calls"] == len(child.calls) + len(helper.calls) == 3
    if helper_calls == 2:  # the count was reached before the child's second call: none is sent
        assert len(child.calls) == 1 and (record["status"], record["stop_reason"], record["partial"],
                                          record["result"]) == ("completed", "max_turns", True, NOTES)
    else:  # one turn left: the wrap-up, as always
        assert asked_to_wrap_up(child.calls[-1]["messages"]) and record["result"] == ANSWER


@pytest.mark.parametrize("text", ["Notes so far: fact A.", ""])
def test_a_tool_called_on_the_wrap_up_call_never_runs(run, text):
    work, ran = counting_tool()
    model = ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))],
                              default={"content": text, "tool_calls": [tool_call("work", x="more")]})
    agent = create_deep_agent(model, [work], subagents=[{"name": "looper", "description": "l", "tools": ["work"],
                                                          "max_turns": 3}])
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    (msg,) = tool_messages(out)
    assert len(ran) == 2 and record["model_calls"] == 3  # the third call's tool call was dropped
    if text:  # the reply's text is its answer, cut short by the limit
        assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
            "completed", "max_turns", True, text)
        assert msg.content.endswith(text)
    else:  # nothing said: the limit's error, as without a wrap-up
        assert (record["status"], record["stop_reason"], record["partial"]) == ("error", "max_turns", False)
        assert msg.content.startswith("Subagent 'looper' failed: hit its max_turns limit (3 model calls)")


@pytest.mark.parametrize("where", ["spec", "create_deep_agent"])
def test_wrap_ups_turned_off_end_each_limit_with_an_error(run, where):
    model = ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))], default=loops_until_told())
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 3}
    if where == "spec":
        agent = create_deep_agent(model, [echo], subagents=[{**spec, "wrap_up": False}])
    else:
        agent = create_deep_agent(model, [echo], subagents=[spec], settings=DelegationSettings.of(wrap_up=False))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["partial"]) == ("error", "max_turns", False)
    calls = child_calls(model)
    assert all(c["tools"] == ["echo"] and "Limits: " not in c["system"] for c in calls)


def test_a_specs_own_wrap_up_wins_over_the_callers(run):
    model = ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))], default=loops_until_told())
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 3, "wrap_up": True}
    out = run(create_deep_agent(model, [echo], subagents=[spec], settings=DelegationSettings.of(wrap_up=False)), user("go"), {"recursion_limit": 1000})
    assert records(out)[0]["partial"] is True


def test_the_childs_prompt_names_its_limits_from_its_second_call(run):
    model = ScriptedChatModel(rules=[("go", parent_script(("look", "looker"))),
                                     ("look", [{"tool_calls": [tool_call("echo", x="once")]}, "an answer"])])
    spec = {"name": "looker", "description": "l", "tools": ["echo"], "max_turns": 5, "timeout_s": 60.0,
            "max_tokens": 9000}
    out = run(create_deep_agent(model, [echo], subagents=[spec],
                                settings=DelegationSettings.of(budget=Budget(max_tokens=100_000))),
              user("go"), {"recursion_limit": 1000})
    first, second = [c for c in model.calls if any(m.text == "look" for m in c["messages"])]
    assert "Limits: " not in first["system"]  # the plan from the task alone, as without limits
    line = next(line for line in second["system"].splitlines() if line.startswith("Limits: "))
    assert all(part in line for part in ("5 model calls", "60s", "9000 tokens", "a budget shared"))
    (record,) = records(out)
    assert (record["stop_reason"], record["partial"]) == ("completed", False)  # no limit was near: no wrap-up


def test_a_crash_is_still_an_error(run):
    calls = iter(range(100))

    def crashes_second(messages):
        if next(calls) == 1:
            raise RuntimeError("the model's server fell over")
        return {"tool_calls": [tool_call("echo", x="again")]}

    model = ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))], default=crashes_second)
    agent = create_deep_agent(model, [echo], subagents=[{"name": "looper", "description": "l", "tools": ["echo"],
                                                          "max_turns": 3}])
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["partial"]) == ("error", False)
    assert "fell over" in tool_messages(out)[0].content


def test_an_agent_file_sets_wrap_up_and_a_bad_value_names_the_field(tmp_path):
    good = tmp_path / "slow.md"
    good.write_text("---\nname: slow\ndescription: d\nwrap_up: 0.3\n---\nWork.\n")
    assert load_agent_file(good).wrap_up == 0.3
    bad = tmp_path / "bad.md"
    bad.write_text("---\nname: bad\ndescription: d\nwrap_up: 2\n---\nWork.\n")
    with pytest.raises(AgentFileError, match="wrap_up"):
        load_agent_file(bad)
    with pytest.raises((SpecError, ValueError), match="wrap_up"):
        SubagentSpec(name="x", description="d", wrap_up=1.0)
    text = tmp_path / "text.md"  # text is no number here, as in every other numeric field
    text.write_text('---\nname: text\ndescription: d\nwrap_up: "0.3"\n---\nWork.\n')
    with pytest.raises(AgentFileError, match="wrap_up"):
        load_agent_file(text)


@pytest.mark.parametrize("value", [1.5, float("nan"), "yes"])
def test_a_bad_wrap_up_setting_names_what_it_may_be(value):
    with pytest.raises(SpecError, match=r"^wrap_up: expected true, false or a share of timeout_s above 0 and below 1"):
        create_deep_agent(ScriptedChatModel(default="ok"), [echo], settings=DelegationSettings.of(wrap_up=value))


def test_the_tasks_views_show_a_cut_short_task_apart():
    record = {"id": "abc123", "agent_type": "looper", "status": "completed", "stop_reason": "budget",
              "partial": True, "result": ANSWER, "started_at": time.time(), "tool_call_id": "call_1"}
    whole = {**record, "id": "def456", "partial": False, "stop_reason": "completed", "tool_call_id": "call_2"}
    assert (sync_row(record).shown_status, sync_row(whole).shown_status) == ("cut short (budget)", "completed")
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(tasks_view("thread-1", [sync_row(record), sync_row(whole)], width=200))
    tree = TaskTree("run")
    tree.update({"subagent_tasks": {"abc123": record, "def456": whole}})
    console.print(tree)
    lines = console.export_text().splitlines()
    assert sum("cut short (budget)" in line for line in lines) == 2  # a row in the table and one in the tree
    assert sum("looper" in line and "completed" in line and "cut short" not in line for line in lines) == 2


class SlowToWrapUp(ScriptedChatModel):
    """Calls its tool while it has tools; its wrap-up call takes longer than the task has left."""

    wrap_ups: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        if asked_to_wrap_up(messages):
            self.wrap_ups.append(messages)
            time.sleep(6)
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        if asked_to_wrap_up(messages):
            self.wrap_ups.append(messages)
            await asyncio.sleep(6)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


@tool
def long_nap(x: str) -> str:
    """A slower step of work."""
    time.sleep(1.5)
    return "rested"


def test_a_wrap_up_call_that_runs_past_the_deadline_ends_the_task_as_a_timeout(run):
    # 70% of 4s left starts the wrap-up: the first nap (1.5s) uses more than 30%; the wrap-up call then waits 6s.
    child = SlowToWrapUp(default=loops_until_told("long_nap"))
    parent = ScriptedChatModel(responses=parent_script(("loop", "looper")))
    spec = {"name": "looper", "description": "l", "tools": ["long_nap"], "model": child, "max_turns": 200,
            "timeout_s": 4.0, "wrap_up": 0.7}
    out = run(create_deep_agent(parent, [long_nap], subagents=[spec]), user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["partial"]) == ("error", "timeout", False)
    assert tool_messages(out)[0].content.startswith("Subagent 'looper' failed: timed out after 4s")
    assert len(child.wrap_ups) == 1  # the wrap-up call was made, and ran over


class Findings(BaseModel):
    summary: str


def test_a_structured_answer_on_the_wrap_up_call_is_kept_and_no_other_tool_runs(run):
    work, ran = counting_tool()

    def reply(messages):
        if asked_to_wrap_up(messages):  # the structured answer, and one more step that must not run
            return {"tool_calls": [tool_call("Findings", summary="fact A"), tool_call("work", x="on the wrap-up")]}
        return {"tool_calls": [tool_call("work", x="step")]}

    spec = {"name": "looper", "description": "l", "tools": ["work"], "max_turns": 3, "response_format": Findings,
            "model": ScriptedChatModel(default=reply)}
    out = run(create_deep_agent(ScriptedChatModel(responses=parent_script(("loop", "looper"))), [work],
                                subagents=[spec]), user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert ran == ["step", "step"]
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", "max_turns", True, '{"summary":"fact A"}')


def test_a_wrap_up_reply_cut_at_the_token_limit_is_the_answer_not_retried(run):
    cut = "Found so far: fact A, and fact"

    def reply(messages):
        if asked_to_wrap_up(messages):
            return AIMessage(cut, response_metadata={"finish_reason": "length"})
        return {"tool_calls": [tool_call("echo", x="again")]}

    spec = {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 3, "retry_truncated": True,
            "model": ScriptedChatModel(default=reply)}
    out = run(create_deep_agent(ScriptedChatModel(responses=parent_script(("loop", "looper"))), [echo],
                                subagents=[spec]), user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", "max_turns", True, cut)
    assert (record["model_calls"], record["truncated_retries"]) == (3, 0)


@tool
def archive(query: str) -> str:
    """Search the archive."""
    return "a record"


archive.description = "Search the archive. " + "It searches many kinds of records, with many options. " * 60


@pytest.mark.parametrize("limit", ["own tokens", "shared tokens, a model the budget has learned no ratio for"])
def test_the_first_call_is_judged_as_it_is_sent_and_held(run, limit):
    # The tool's schema is most of a call: a call with it does not fit (the shared budget holds a call to a model
    # it has learned no ratio for at the clamp), a call without it does. So the first call is the wrap-up.
    child = ScriptedChatModel(default=loops_until_told("archive"), model_name="child-model")
    spec = {"name": "looper", "description": "l", "tools": ["archive"], "model": child, "max_turns": 200}
    parent = ScriptedChatModel(responses=parent_script(("loop", "looper")))
    options = {"settings": DelegationSettings.of(budget=Budget(max_tokens=10_000))} if limit.startswith("shared") else {}
    if not options:
        spec["max_tokens"] = 500
    out = run(create_deep_agent(parent, [archive], subagents=[spec], **options), user("go"),
              {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", "budget", True, ANSWER)
    assert record["model_calls"] == 1 and child.calls[0]["tools"] == []


def test_a_follow_up_of_a_cut_short_background_task_is_a_new_run_cut_short_only_if_it_is(run, background):
    follow_up_started, crash = threading.Event(), threading.Event()

    def child(messages):
        if "CRASH" in next(m.text for m in reversed(messages) if m.type == "human"):
            follow_up_started.set()
            crash.wait(60)
            raise RuntimeError("the model's server fell over")
        return loops_until_told()(messages)

    parent = ScriptedChatModel(rules=[(NOTICE, ["noted"]), ("PARENT", [start(("loop", "looper")), "started"]),
                                      ("follow up", [on_task("update_async_task", message="CRASH now"), "sent"])],
                               default="ok")
    spec = SubagentSpec(name="looper", description="l", tools=["echo"], max_turns=3,
                        model=ScriptedChatModel(default=child))
    agent = create_agent(parent, [echo], middleware=[background([spec])], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{time.monotonic_ns()}"}}
    (task_id,) = started_ids(run(agent, user("PARENT go"), config)["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    assert run(agent, user("and now?"), config)["async_tasks"][task_id]["partial"] is True  # the notice is read
    run(agent, user("follow up"), config)
    assert follow_up_started.wait(60)
    running = dict(background.task(task_id).fields)
    crash.set()
    wait_for(lambda: background.status(task_id) == "error")
    record = run(agent, user("and now?"), config)["async_tasks"][task_id]
    assert (running["status"], running["stop_reason"], running["partial"]) == ("running", None, False)
    assert (record["status"], record["stop_reason"], record["partial"]) == ("error", "model_error", False)
    assert sync_row(record).cut_short is None and background_row({**record, "partial": True}).cut_short is None


def test_a_slow_models_wrap_up_comes_while_the_time_left_covers_a_call(run):
    # Each call takes 0.8s, more than the default share of 3.6s (0.54s): the wrap-up is made while the time left
    # still covers this call and one more at the longest a call took.
    child = ScriptedChatModel(default=loops_until_told(), latency_s=0.8)
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "model": child, "timeout_s": 3.6}
    out = run(create_deep_agent(ScriptedChatModel(responses=parent_script(("loop", "looper"))), [echo],
                                subagents=[spec]), user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", "timeout", True, ANSWER)
