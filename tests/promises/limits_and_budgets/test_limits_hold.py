"""Limits that hold, and nothing lost: budgets, caps and answers under parallel children and odd endings."""

from __future__ import annotations

import argparse
import json
import threading
import time
from typing import Any

import pytest
from helpers.background import NOTICE, notices, start
from helpers.graphs import parent_script, records, tool_messages, user
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget
from subagents._settings import DelegationSettings

PRICES = {"scripted": (1000.0, 2000.0)}  # USD per million tokens: dear, so budgets bite
LOOP_OUTPUT_TOKENS = 25  # what one looping ``echo`` call of a child outputs, at most


@tool
def echo(x: str) -> str:
    """Echo."""
    return x * 50


def looping_children(children: int, **options: Any) -> ScriptedChatModel:
    """A parent that starts ``children`` looping children in parallel, then answers."""
    return ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("task", description=f"loop {i}", subagent_type="general-purpose")
                                       for i in range(children)]}, "parent done"])],
        default={"tool_calls": [tool_call("echo", x="again")]},
        latency_s=0.02,  # long enough that the children's calls overlap
        **options,
    )


def final_call_tokens(out: dict[str, Any]) -> int:
    """What the parent's last model call (its answer, after every child) spent."""
    last = out["messages"][-1]
    usage = last.usage_metadata or {}
    return int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))


# -- 1. a dollar budget holds under parallel children -----------------------------------------------------


def test_parallel_children_never_spend_past_the_dollar_budget(run):
    children, limit = 8, 1.0
    budget = Budget(max_usd=limit, prices=PRICES)
    agent = create_deep_agent(looping_children(children), [echo], settings=DelegationSettings.of(budget=budget))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    assert {r["stop_reason"] for r in records(out)} == {"budget"}
    last = out["messages"][-1].usage_metadata
    final_usd = (last["input_tokens"] * PRICES["scripted"][0] + last["output_tokens"] * PRICES["scripted"][1]) / 1e6
    # Running calls hold their prompt's dollars: only outputs can pass the limit, one call's per child.
    one_output_usd = LOOP_OUTPUT_TOKENS * PRICES["scripted"][1] / 1e6
    assert budget.usd - final_usd <= limit + children * one_output_usd


# -- 2. a token budget counts what the provider bills: tool schemas, and its own token counts -----------


class BillingModel(ScriptedChatModel):
    """Bills as providers do: the tool schemas sent with a call are input, at ``chars_per_token``."""

    chars_per_token: int = 4

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        result = super()._respond(messages, tools)
        message = result.generations[0].message
        prompt_chars = sum(len(m.text) for m in messages) + len(json.dumps(tools or []))
        usage = dict(message.usage_metadata)
        usage["input_tokens"] = prompt_chars // self.chars_per_token + 1
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        message.usage_metadata = usage
        return result


def _catalogue(x: str) -> str:
    return x


catalogue = StructuredTool.from_function(
    _catalogue, name="catalogue",
    description="Look an item up in the catalogue. " + "Every field of it is described here at length. " * 80,
)


def test_parallel_children_never_spend_past_the_token_budget_counting_tool_schemas(run):
    children, limit = 8, 6000
    budget = Budget(max_tokens=limit)
    model = looping_children(children)
    model = BillingModel(**{k: getattr(model, k) for k in ("rules", "default", "latency_s")})
    agent = create_deep_agent(model, [echo, catalogue], settings=DelegationSettings.of(budget=budget))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    assert {r["stop_reason"] for r in records(out)} == {"budget"}
    assert budget.tokens - final_call_tokens(out) <= limit + children * LOOP_OUTPUT_TOKENS


def test_a_token_budget_learns_the_providers_token_count_from_reported_usage(run):
    limit = 6000
    budget = Budget(max_tokens=limit)
    # A tokenizer far denser than four characters a token: one token a character.
    model = BillingModel(rules=[("go", parent_script(("loop", "general-purpose"))[:1] + ["parent done"])],
                         default={"tool_calls": [tool_call("echo", x="again")]}, chars_per_token=1)
    agent = create_deep_agent(model, [echo], settings=DelegationSettings.of(budget=budget))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert record["stop_reason"] == "budget" and record["model_calls"] > 2
    assert budget.tokens - final_call_tokens(out) <= limit + LOOP_OUTPUT_TOKENS


# -- 5. a background notice is no user message: it neither resets max_delegations nor re-forces task -----


def _background_agent(model: ScriptedChatModel, **options: Any) -> Any:
    done = threading.Event()

    @tool
    def finish(x: str) -> str:
        """Finish the background job."""
        done.set()
        return "finished"

    @tool
    def wait_for_background(x: str) -> str:
        """Wait until the background job has finished."""
        done.wait(10)
        time.sleep(0.5)  # the background child's last model call, and its record settling
        return "the background job finished"

    return create_deep_agent(model, [finish, wait_for_background], background=True,
                             checkpointer=InMemorySaver(), **options)


def test_a_background_notice_does_not_reset_max_delegations(run):
    model = ScriptedChatModel(
        rules=[
            ("bg job", [{"tool_calls": [tool_call("finish", x="1")]}, "bg done"]),
            ("wait job", [{"tool_calls": [tool_call("wait_for_background", x="1")]}, "waited"]),
            ("sync job", ["sync done"]),
            (NOTICE, [{"tool_calls": [tool_call("task", description=f"sync job {i}", subagent_type="general-purpose")]}
                      for i in range(4)] + ["noted"]),
            ("go", [{"tool_calls": [*start(("bg job", "general-purpose"))["tool_calls"],
                                    tool_call("task", description="wait job", subagent_type="general-purpose")]},
                    "go done"]),
        ],
        default="ok",
    )
    agent = _background_agent(model, settings=DelegationSettings.of(max_delegations=3))  # the start and the wait job are two of them
    out = run(agent, user("go"), {"configurable": {"thread_id": "cap"}, "recursion_limit": 200})
    assert notices(out), "no notice came during the run; the test would prove nothing"
    ran = [r for r in records(out) if r["stop_reason"] != "refused"]
    assert len(ran) == 2
    assert any(r["stop_reason"] == "refused" for r in records(out))


def test_background_starts_and_task_calls_are_one_count_under_max_delegations(run):
    # Before: only task calls counted; with max_delegations=3 a model made 12 background starts.
    model = ScriptedChatModel(rules=[
        ("job", ["job done"]),
        ("go", [{"tool_calls": [tool_call("start_async_task", description="job a", subagent_type="general-purpose"),
                                tool_call("start_async_task", description="job b", subagent_type="general-purpose"),
                                tool_call("task", description="job c", subagent_type="general-purpose"),
                                tool_call("start_async_task", description="job d", subagent_type="general-purpose"),
                                tool_call("task", description="job e", subagent_type="general-purpose")]},
                "go done"]),
    ], default="ok")
    agent = create_deep_agent(model, background=True, checkpointer=InMemorySaver(),
    settings=DelegationSettings.of(max_delegations=3))
    out = run(agent, user("go"), {"configurable": {"thread_id": "one-count"}})
    assert {r["description"] for r in records(out)} == {"job c", "job e"}
    assert {r["description"]: r["stop_reason"] for r in records(out)}["job e"] == "refused"
    started = {r["description"]: r["stop_reason"] for r in out["async_tasks"].values()}
    assert started.keys() == {"job a", "job b", "job d"} and started["job d"] == "refused"  # recorded as task's
    refused = [m for m in tool_messages(out) if "delegation limit reached" in m.text]
    assert len(refused) == 2 and {m.status for m in refused} == {"error"}, refused
    last = [c for c in model.calls if any(m.type == "tool" for m in c["messages"])][-1]  # the parent's next
    assert not {"task", "start_async_task"} & set(last["tools"]), last["tools"]


def test_a_background_notice_does_not_force_another_delegation(run):
    model = ScriptedChatModel(
        rules=[
            ("bg job", [{"tool_calls": [tool_call("finish", x="1")]}, "bg done"]),
            ("wait job", [{"tool_calls": [tool_call("wait_for_background", x="1")]}, "waited"]),
            (NOTICE, ["noted"]),
            ("go", [{"tool_calls": [*start(("bg job", "general-purpose"))["tool_calls"],
                                    tool_call("task", description="wait job", subagent_type="general-purpose")]},
                    "go done"]),
        ],
        default="ok",
    )
    agent = _background_agent(model, settings=DelegationSettings.of(force_delegation=True))
    out = run(agent, user("go"), {"configurable": {"thread_id": "force"}, "recursion_limit": 200})
    assert notices(out), "no notice came during the run; the test would prove nothing"
    after_notice = [c for c in model.calls if c["messages"][-1].text.startswith(NOTICE)]
    assert after_notice and all(c["tools"] != ["task"] for c in after_notice)
    assert out["messages"][-1].text == "noted"


# -- 9. a root that keeps delegating past max_delegations ends, with a clear message -------------------


def _insistent_root() -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("job", ["child answer"])],
        default={"tool_calls": [tool_call("task", description="job", subagent_type="general-purpose")]},
    )


def test_a_root_that_keeps_calling_task_is_ended_by_max_root_turns(run):
    model = _insistent_root()
    agent = create_deep_agent(model, settings=DelegationSettings.of(max_delegations=2, max_root_turns=5))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    root_calls = [c for c in model.calls if c["messages"][-1].text != "job"]
    assert len(root_calls) == 5
    final = out["messages"][-1]
    assert final.type == "ai" and not final.tool_calls
    assert "max_root_turns=5" in final.text


def test_the_root_has_a_default_turn_cap_below_langgraphs_recursion_limit(run):
    model = _insistent_root()
    out = run(create_deep_agent(model, settings=DelegationSettings.of(max_delegations=1)), user("go"), {"recursion_limit": 2000})
    assert "max_root_turns" in out["messages"][-1].text


# -- 12. a return_direct tool's result is the child's answer ----------------------------------------------


@tool(return_direct=True)
def lookup(q: str) -> str:
    """Look the answer up and return it as the final answer."""
    return f"the answer to {q} is 42"


def test_a_return_direct_tools_result_reaches_the_parent(run):
    model = ScriptedChatModel(
        rules=[("find", [{"tool_calls": [tool_call("lookup", q="life")]}])],
        responses=parent_script(("find it", "finder")),
    )
    agent = create_deep_agent(model, [lookup], subagents=[
        {"name": "finder", "description": "Finds answers.", "tools": ["lookup"]}])
    out = run(agent, user("go"))
    (record,) = records(out)
    assert record["status"] == "completed" and record["result"] == "the answer to life is 42"
    (message,) = tool_messages(out)
    assert "the answer to life is 42" in message.text


# -- 14. SystemExit from a child's tool fails that task alone ---------------------------------------------


@tool
def cli(argv: str) -> str:
    """Run the command line parser on ``argv``."""
    parser = argparse.ArgumentParser(prog="cli", add_help=False)
    parser.add_argument("--count", type=int, required=True)
    return str(parser.parse_args(argv.split()).count)


def test_a_system_exit_from_a_childs_tool_fails_that_task_alone(run, capsys):
    model = ScriptedChatModel(
        rules=[("bad args", [{"tool_calls": [tool_call("cli", argv="--nope")]}]),
               ("healthy", ["healthy answer"])],
        responses=parent_script(("bad args", "general-purpose"), ("healthy", "general-purpose")),
    )
    out = run(create_deep_agent(model, [cli]), user("go"))
    assert out["messages"][-1].text == "parent carried on"
    by_description = {r["description"]: r for r in records(out)}
    assert by_description["healthy"]["status"] == "completed"
    assert by_description["healthy"]["result"] == "healthy answer"
    failed = by_description["bad args"]
    assert failed["status"] == "error" and failed["stop_reason"] == "tool_error"
    assert "SystemExit" in failed["error"] and "2" in failed["error"]


# -- 15. a reply cut at the token limit is marked; a failing transcript sink costs only the transcript -----


def test_a_reply_cut_at_the_token_limit_is_recorded_truncated(run):
    cut = AIMessage(content="The first half of the rep", response_metadata={"finish_reason": "length"})
    model = ScriptedChatModel(rules=[("report", [cut])], responses=parent_script(("report", "general-purpose")))
    out = run(create_deep_agent(model), user("go"))
    (record,) = records(out)
    assert record["status"] == "completed" and record["stop_reason"] == "truncated"
    assert record["result"] == "The first half of the rep"


def test_an_unwritable_sessions_dir_costs_the_transcript_not_the_delegation(run, tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the sessions directory's parent should be")
    model = ScriptedChatModel(rules=[("job", ["job done"])], responses=parent_script(("job", "general-purpose")))
    out = run(create_deep_agent(model, settings=DelegationSettings.of(sessions_dir=str(blocker / "sessions"))), user("go"))
    (record,) = records(out)
    assert record["status"] == "completed" and record["result"] == "job done"
    assert record["transcript"] is None and "not-a-directory" in record["transcript_error"]
    (message,) = tool_messages(out)
    assert message.status != "error" and "job done" in message.text


def test_a_budget_with_no_room_left_for_the_smallest_refused_call_starts_nothing_new():
    from subagents._errors import BudgetExceeded

    budget = Budget(max_tokens=100)
    budget.charge(None, 90, 0)
    with pytest.raises(BudgetExceeded):
        budget.reserve(20)
    assert "too little is left for a call of ~20" in (budget.exhausted() or "")


def test_a_call_refused_only_for_what_running_calls_hold_leaves_the_budget_open():
    from subagents._errors import BudgetExceeded

    budget = Budget(max_tokens=100)
    held = [budget.reserve(40), budget.reserve(40)]
    with pytest.raises(BudgetExceeded):
        budget.reserve(40)  # 80 held: refused now, but nothing is spent yet
    assert budget.exhausted() is None
    for tokens, usd in held:
        budget.release(tokens, usd)
    assert budget.reserve(40) == (40, 0.0)


@pytest.mark.parametrize("unnamed", [None, ""])
def test_a_model_that_names_itself_nowhere_teaches_no_ratio_and_is_held_at_the_clamp(unnamed):
    """Two such models cannot be told apart: a parent's plain English taught ~1.1x, and a 16x-denser child's
    first wave was then held at 1.1x and spent 1.2x of the limit (found by a review that did not read the tests)."""
    budget = Budget(max_tokens=100_000)
    budget.learn(unnamed, 100, 100)
    assert budget.learned(unnamed) is None
    assert budget.hold(100, unnamed) == (1600, 0.0)  # 16 times the estimate
    budget.learn("gpt-x", 100, 100)  # a named model still teaches its own
    assert budget.learned("gpt-x") == pytest.approx(1.1) and budget.hold(100, "gpt-x")[0] == 111  # ceil


def test_a_provider_that_repeats_call_ids_gets_no_more_delegations(run):
    # Before: a call's place in the run was the first call of its id, so a provider numbering calls per
    # message ("call_0" every turn) made six delegations under max_delegations=2.
    def again(i: int) -> dict[str, Any]:
        return {"tool_calls": [{"name": "task", "id": "call_0",
                                "args": {"description": f"job {i}", "subagent_type": "general-purpose"}}]}

    model = ScriptedChatModel(rules=[("job", ["job done"])], responses=[again(i) for i in range(6)] + ["done"])
    out = run(create_deep_agent(model, settings=DelegationSettings.of(max_delegations=2)), user("go"))
    assert [r["stop_reason"] for r in records(out)].count("refused") >= 1
    assert sum(1 for c in model.calls if c["messages"][-1].type == "human") == 3  # the parent's first, two children


@pytest.mark.parametrize("follow_up", ["retry_async_task", "update_async_task"])
def test_a_retry_or_a_follow_up_is_a_delegation_more(run, follow_up):
    # Before: under max_delegations=1, one start then retries of a failed task (or follow-ups of a
    # finished one) ran the child again each time.
    runs: list[int] = []
    settled = threading.Event()

    def child(messages: Any) -> Any:
        runs.append(1)
        settled.set()
        return RuntimeError("child fails") if follow_up == "retry_async_task" else "child answer"

    def follow(messages: Any) -> Any:
        settled.wait(10)
        time.sleep(0.3)  # the background child's record settling
        task_id = next(m.text.split()[3] for m in messages if m.type == "tool" and m.text.startswith("Started"))
        args = {"task_id": task_id} | ({"message": "job: more"} if follow_up == "update_async_task" else {})
        return {"tool_calls": [tool_call(follow_up, **args)]}

    model = ScriptedChatModel(rules=[("job", [child] * 10)], responses=[
        {"tool_calls": [tool_call("start_async_task", description="job", subagent_type="general-purpose")]},
        *[follow] * 3, "done"])
    out = run(create_deep_agent(model, background=True, settings=DelegationSettings.of(max_delegations=1)), user("go"))
    refused = [m for m in tool_messages(out) if "delegation limit reached" in m.text]
    assert len(refused) >= 3 and len(runs) == 1, (runs, [m.text[:80] for m in tool_messages(out)])


def test_a_tool_raising_the_first_of_many_refusals_ends_its_task_on_the_budget(run):
    # The meter kept only its last 8 refusals: the first of a refused batch of ten, raised by the tool, was taken
    # for the tool's own error (stop_reason tool_error).
    inner = ScriptedChatModel(default="x", model_name="scripted")

    @tool
    def fanout(topic: str) -> str:
        """Ask a model about a topic, ten ways."""
        outs = inner.batch([f"{i} {'word ' * 4000}" for i in range(10)], {"max_concurrency": 1},
                           return_exceptions=True)
        raise next(out for out in outs if isinstance(out, BaseException))

    child = ScriptedChatModel(responses=[{"tool_calls": [tool_call("fanout", topic="t")]}, "child answer"])
    spec = {"name": "r", "description": "r", "model": child, "tools": ["fanout"], "max_tokens": 3000}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("research", "r")))]), [fanout],
                              subagents=[spec])
    (record,) = records(run(agent, user("go")))
    assert (record["stop_reason"], inner.calls) == ("budget", []), record["error"]


@pytest.mark.parametrize("how", ["batch", "one big prompt"])
@pytest.mark.parametrize("cap", [{"max_tokens": 6000}, {"max_budget_per_run": 6.0}], ids=["tokens", "dollars"])
def test_a_childs_own_caps_hold_its_tools_model_calls_before_they_are_sent(run, how, cap):
    # Judged only after a call, a tool's batch of ten 5,000-token prompts, or one 40,000-token prompt, spent
    # many times the child's own cap.
    inner = ScriptedChatModel(default="x" * 40, model_name="scripted")
    big = "word " * 4000

    @tool
    def fanout(topic: str) -> str:
        """Ask a model about a topic."""
        outs = inner.batch([f"{i} {big}" for i in range(10)]) if how == "batch" else [inner.invoke(big * 8)]
        return f"{len(outs)} answers"

    child = ScriptedChatModel(responses=[{"tool_calls": [tool_call("fanout", topic="t")]}, "child answer"])
    spec = {"name": "r", "description": "r", "model": child, "tools": ["fanout"], **cap}
    agent = create_deep_agent(ScriptedChatModel(rules=[("go", parent_script(("research", "r")))]), [fanout],
                              subagents=[spec], settings=DelegationSettings.of(prices=PRICES))
    (record,) = records(run(agent, user("go"), {"recursion_limit": 1000}))
    spent = record["charged_input_tokens"] + record["charged_output_tokens"], record["cost_usd"]
    assert spent[0] <= 6000 if "max_tokens" in cap else spent[1] <= 6.0
    assert len(inner.calls) < (2 if how == "batch" else 1)
