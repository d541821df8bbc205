"""The ledger keeps a compact record per delegation; the full texts stay readable elsewhere.

Every checkpoint carries the whole ``subagent_tasks`` ledger, so a record
must not grow with the task's description or the child's answer. These
tests try to break that promise (huge answers, huge errors, huge
descriptions, a record written twice) and check that nothing a user reads
lost a character: the ToolMessage, the transcript and the command line's
task rows all still give the full texts.
"""

from __future__ import annotations

import json

import pytest

from langgraph.checkpoint.memory import InMemorySaver

from helpers.graphs import records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from deep_agent.cli._store import task_rows
from middleware._task_tool import ERROR_PREVIEW_CHARS, PREVIEW_CHARS, ledger_entry
from subagents import TaskRecord, get_transcript
from subagents._settings import DelegationSettings

LONG_ANSWER = "Report." + " finding" * 6000  # ~48k characters
LONG_TASK = "job" + " context" * 500


def _delegating_model(description: str, child_reply: object) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("job", [child_reply])],
        responses=[{"tool_calls": [tool_call("task", description=description,
                                             subagent_type="general-purpose")]}, "parent done"],
    )


def test_a_huge_answer_leaves_a_small_record_and_a_full_tool_message(run):
    agent = create_deep_agent(_delegating_model(LONG_TASK, LONG_ANSWER), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "big"}}
    out = run(agent, user("go"), config)
    (record,) = records(out)
    assert len(record["result"]) == PREVIEW_CHARS and record["result"].endswith("…")
    assert LONG_ANSWER.startswith(record["result"][:-1])
    assert record["result_chars"] == len(LONG_ANSWER)
    assert len(record["description"]) == PREVIEW_CHARS and record["description_chars"] == len(LONG_TASK)
    assert len(json.dumps(record)) < 1500, "the record must not grow with the texts"
    TaskRecord.model_validate(record)
    # The full answer is in the parent's messages and the child's transcript.
    (message,) = tool_messages(out)
    assert message.content == LONG_ANSWER
    transcript = get_transcript(agent, config, record["id"])
    assert transcript[-1].content == LONG_ANSWER
    assert transcript[0].content == LONG_TASK
    # The command line's rows put the full texts back.
    (row,) = task_rows(agent.get_state(config).values)
    assert row.result == LONG_ANSWER and row.description == LONG_TASK and row.outcome == LONG_ANSWER


def test_a_huge_error_is_clipped_in_the_record_and_whole_in_the_reply(run):
    reason = "broken " * 200  # past the record's preview, within what an error message keeps
    out = run(create_deep_agent(_delegating_model("job: fail", ValueError(reason))), user("go"))
    (record,) = records(out)
    assert record["status"] == "error"
    assert len(record["error"]) <= ERROR_PREVIEW_CHARS and record["error"].endswith("…")
    assert record["error_chars"] > ERROR_PREVIEW_CHARS
    (message,) = tool_messages(out)
    assert reason.strip() in message.content and message.status == "error"
    (row,) = task_rows(out)
    assert reason.strip() in row.error and not row.error.startswith("Subagent '")


def test_short_texts_are_kept_whole(run):
    out = run(create_deep_agent(_delegating_model("job: small", "A complete short answer.")), user("go"))
    (record,) = records(out)
    assert record["result"] == "A complete short answer." and record["result_chars"] == 24
    assert record["description"] == "job: small" and record["description_chars"] == 10
    assert record["error"] is None and record["error_chars"] is None
    (row,) = task_rows(out)
    assert row.result == "A complete short answer."


def test_compacting_twice_changes_nothing_and_keeps_the_full_length():
    full = {"id": "t1", "description": "d" * 5000, "result": "r" * 300, "error": None}
    once = ledger_entry(full)
    assert ledger_entry(once) == once
    assert once["description_chars"] == 5000 and once["result_chars"] == 300
    # A preview exactly at the limit is still recognised as one.
    assert len(once["result"]) == PREVIEW_CHARS


def test_a_preview_never_splits_past_the_limit_for_any_length():
    for n in (0, 1, PREVIEW_CHARS - 1, PREVIEW_CHARS, PREVIEW_CHARS + 1, 10 * PREVIEW_CHARS):
        entry = ledger_entry({"id": "t", "description": "", "result": "x" * n})
        assert len(entry["result"]) <= PREVIEW_CHARS and entry["result_chars"] == n
        assert (entry["result"] == "x" * n) == (n <= PREVIEW_CHARS)


def test_the_ledger_grows_by_a_bounded_amount_per_delegation(run):
    """Ten delegations with 48k-character answers: the ledger stays under 15 KB in all."""
    calls = [tool_call("task", description=f"job {i}", subagent_type="general-purpose") for i in range(10)]
    model = ScriptedChatModel(rules=[("job", [LONG_ANSWER])], responses=[{"tool_calls": calls}, "done"])
    out = run(create_deep_agent(model), user("go"))
    assert len(records(out)) == 10
    assert len(json.dumps(out["subagent_tasks"])) < 15_000
    assert all(m.content == LONG_ANSWER for m in tool_messages(out))


@pytest.mark.parametrize("count", [1, 10, 25, 26, 50, 100, 1000])
def test_the_agent_names_are_listed_once_per_parent_call(count):
    """Before: every name was in the block, the tool description and (up to 25 agents) the schema's enum."""
    from middleware import SubAgentMiddleware

    specs = [{"name": f"agent-{i:04d}", "description": f"Handles case {i}."} for i in range(count)]
    mw = SubAgentMiddleware(specs, settings=DelegationSettings.of(general_purpose=False))
    (task,) = mw.tools
    schema = json.dumps(task.tool_call_schema.model_json_schema())
    assert "agent-" not in task.description and "agent-" not in schema
    assert all(mw.prompt_block.count(f"agent-{i:04d}") == 1 for i in range(count))
    assert all(f"- agent-{i:04d}: Handles case {i}." in mw.prompt_block for i in range(count))


@pytest.mark.parametrize("count", [1, 25, 26])
def test_the_enum_of_names_is_there_when_asked_for_up_to_the_limit(count):
    """For servers that constrain tool calls to the schema: `name_enum=True` adds it (not past ENUM_LIMIT)."""
    from middleware import SubAgentMiddleware
    from middleware._task_tool import ENUM_LIMIT

    specs = [{"name": f"agent-{i:04d}", "description": f"Handles case {i}."} for i in range(count)]
    (task,) = SubAgentMiddleware(specs, settings=DelegationSettings.of(general_purpose=False, name_enum=True)).tools
    field = task.tool_call_schema.model_json_schema()["properties"]["subagent_type"]
    assert field.get("enum") == ([f"agent-{i:04d}" for i in range(count)] if count <= ENUM_LIMIT else None)


def test_an_unknown_name_in_a_large_registry_still_gets_a_clear_error(run):
    specs = [{"name": f"agent-{i:04d}", "description": f"Handles case {i}.", "system_prompt": "Work."}
             for i in range(150)]
    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description="job", subagent_type="agent-9999")]}, "done"])
    out = run(create_deep_agent(model, subagents=specs), user("go"))
    (message,) = tool_messages(out)
    assert message.status == "error" and "agent-9999" in message.content
    (record,) = records(out)
    assert record["status"] == "error" and record["stop_reason"] == "invalid_call"
