"""The agent-file field ``short_answer_threshold``: one agent's continuation setting, over the run's."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from helpers.background import ledger, start
from helpers.graphs import records, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import AgentFileError, SubagentSpec, load_agent_file, wait_for_background
from subagents._outcome import CONTINUATION_PROMPT
from subagents._settings import DelegationSettings

FULL = "Full report:" + " details" * 40


def answer(out: dict, record: dict) -> str:
    """The child's whole answer: the ToolMessage (the ledger keeps a preview and its length)."""
    reply = next(m for m in out["messages"] if m.type == "tool" and m.tool_call_id == record["tool_call_id"])
    assert record["result_chars"] == len(reply.text)
    return reply.text


def agent_file(folder: Path, name: str, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.md"
    path.write_text(f"---\nname: {name}\ndescription: Answers briefly.\n{extra}---\nAnswer.\n", encoding="utf-8")
    return path


# -- parsing ------------------------------------------------------------------


@pytest.mark.parametrize(("line", "value"), [
    ("short_answer_threshold: 300\n", 300),
    ("shortAnswerThreshold: 0\n", 0),
    ("", None),
])
def test_the_field_is_read_in_either_spelling(tmp_path, line, value):
    assert load_agent_file(agent_file(tmp_path, "a", line)).short_answer_threshold == value


@pytest.mark.parametrize("raw", ["-1", "1.5", "true", "no", "'300'", "lots", "[1]"])
def test_a_bad_value_is_an_error_naming_the_file_and_field(tmp_path, raw):
    path = agent_file(tmp_path, "a", f"short_answer_threshold: {raw}\n")
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    message = str(info.value)
    assert str(path) in message and "field 'short_answer_threshold'" in message, message
    assert "expected a non-negative integer (characters; 0: off)" in message, message


def test_the_error_names_the_spelling_used(tmp_path):
    path = agent_file(tmp_path, "a", "shortAnswerThreshold: -5\n")
    with pytest.raises(AgentFileError, match=r"field 'shortAnswerThreshold': expected a non-negative integer"):
        load_agent_file(path)


@pytest.mark.parametrize("value", [-1, True, "200", 2.0])
def test_the_spec_in_code_refuses_what_is_not_a_non_negative_int(value):
    with pytest.raises(ValidationError, match="short_answer_threshold"):
        SubagentSpec(name="a", description="d", short_answer_threshold=value)


# -- effect -------------------------------------------------------------------


def model_for(*jobs: tuple[str, str]) -> ScriptedChatModel:
    """Each child answers its job with "ok"; a continuation request gets the full report."""
    return ScriptedChatModel(
        rules=[(CONTINUATION_PROMPT, [FULL]), *((job, ["ok"]) for job, _ in jobs)],
        responses=[{"tool_calls": [tool_call("task", description=job, subagent_type=agent) for job, agent in jobs]},
                   "parent done"],
    )


def continued(model: ScriptedChatModel, job: str) -> bool:
    return any(any(m.text == job for m in c["messages"]) and any(m.text == CONTINUATION_PROMPT for m in c["messages"])
               for c in model.calls)


def test_an_agent_with_the_field_is_continued_and_one_without_is_not(tmp_path, run):
    agent_file(tmp_path, "thorough", "short_answer_threshold: 200\n")
    agent_file(tmp_path, "plain")
    model = model_for(("job for thorough", "thorough"), ("job for plain", "plain"))
    out = run(create_deep_agent(model, settings=DelegationSettings.of(agents_dirs=[tmp_path])), user("go"))  # the run's threshold: 0
    by_agent = {r["agent_type"]: r for r in records(out)}
    assert by_agent["thorough"]["model_calls"] == 2 and answer(out, by_agent["thorough"]) == FULL
    assert by_agent["plain"]["model_calls"] == 1 and by_agent["plain"]["result"] == "ok"
    assert continued(model, "job for thorough") and not continued(model, "job for plain")


def test_zero_in_the_file_turns_off_the_runs_threshold_for_that_agent(tmp_path, run):
    agent_file(tmp_path, "terse", "shortAnswerThreshold: 0\n")
    agent_file(tmp_path, "plain")
    model = model_for(("job for terse", "terse"), ("job for plain", "plain"))
    out = run(create_deep_agent(model, settings=DelegationSettings.of(
        agents_dirs=[tmp_path], short_answer_threshold=200,
    )), user("go"))
    by_agent = {r["agent_type"]: r for r in records(out)}
    assert by_agent["terse"]["model_calls"] == 1 and by_agent["terse"]["result"] == "ok"
    assert by_agent["plain"]["model_calls"] == 2 and answer(out, by_agent["plain"]) == FULL


def test_the_field_applies_to_background_tasks_too(tmp_path):
    agent_file(tmp_path, "thorough", "short_answer_threshold: 200\n")
    agent_file(tmp_path, "plain")
    model = ScriptedChatModel(
        rules=[(CONTINUATION_PROMPT, [FULL]), ("job for thorough", ["ok"]), ("job for plain", ["ok"]),
               ("Background task updates", ["noted"])],
        responses=[start(("job for thorough", "thorough"), ("job for plain", "plain")), "started"],
        default="noted",
    )
    from langgraph.checkpoint.memory import InMemorySaver

    agent = create_deep_agent(model, background=True, checkpointer=InMemorySaver(),
    settings=DelegationSettings.of(agents_dirs=[tmp_path]))
    config = {"configurable": {"thread_id": "bg"}}
    out = agent.invoke(user("go"), config)
    assert wait_for_background(ledger(out), timeout_s=60)
    out = agent.invoke(user("news?"), config)
    by_agent = {r["agent_type"]: r for r in ledger(out).values()}
    assert by_agent["thorough"]["status"] == by_agent["plain"]["status"] == "completed"
    assert by_agent["thorough"]["result"] == FULL and by_agent["plain"]["result"] == "ok"
    assert continued(model, "job for thorough") and not continued(model, "job for plain")
