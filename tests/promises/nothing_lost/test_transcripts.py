"""Transcripts: readable by task id after the run, wherever they were kept."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers import REPO as ROOT
from helpers.attacks import MODES, _invoke, _parallel, _records, _user
from helpers.graphs import call, checkpointer, records, user
from subagents import (
    get_transcript,
)
from subagents._transcripts import jsonl_path, read_jsonl
from subagents._settings import DelegationSettings


@tool
def lookup(q: str) -> str:
    """Look up."""
    return f"found {q}"


def scripted():
    return ScriptedChatModel(
        rules=[("research X", [{"tool_calls": [tool_call("lookup", q="X")]}, "X is " + "x" * 250])],
        responses=[{"tool_calls": [tool_call("task", description="research X", subagent_type="general-purpose")]},
                   "parent done"],
    )


def assert_child_history(messages):
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    assert messages[0].content == "research X"
    assert messages[2].content == "found X"
    assert messages[3].content.startswith("X is")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_transcript_from_the_parents_checkpointer(mode, kind, tmp_path):
    async with checkpointer(kind, mode, tmp_path) as saver:
        agent = create_deep_agent(scripted(), [lookup], checkpointer=saver)
        config = {"configurable": {"thread_id": f"t-{kind}-{mode}"}}
        out = await call(mode, agent, user("go"), config)
        (record,) = records(out)
        assert record["transcript"].startswith("checkpoint:tools:")
        # The public reader is sync; off the event loop, as a user would call it
        # (an async saver serves sync reads from its own loop).
        messages = await asyncio.to_thread(get_transcript, agent, config, record["id"])
        assert_child_history(messages)
        assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("thread_id", [uuid.UUID(int=7), 42], ids=["uuid", "int"])
async def test_transcript_reads_back_for_a_non_text_thread_id(mode, kind, thread_id, tmp_path):
    # LangGraph stores a thread under the text form of its id; the reader must look it up the same way.
    async with checkpointer(kind, mode, tmp_path) as saver:
        agent = create_deep_agent(scripted(), [lookup], checkpointer=saver)
        config = {"configurable": {"thread_id": thread_id}}
        out = await call(mode, agent, user("go"), config)
        (record,) = records(out)
        assert record["transcript"].startswith("checkpoint:tools:")
        messages = await asyncio.to_thread(get_transcript, agent, config, record["id"])
        assert_child_history(messages)


def test_transcript_without_a_checkpointer_is_kept_in_memory(run):
    agent = create_deep_agent(scripted(), [lookup])
    out = run(agent, user("go"))
    (record,) = records(out)
    assert record["transcript"] == f"memory:{record['id']}"
    # A parent without a checkpointer has no saved state: read from its output.
    assert_child_history(get_transcript(out, {}, record["id"]))


def test_jsonl_sink_writes_header_and_messages(run, tmp_path):
    from langgraph.checkpoint.memory import InMemorySaver

    agent = create_deep_agent(scripted(), [lookup], checkpointer=InMemorySaver(), settings=DelegationSettings.of(
        sessions_dir=str(tmp_path),
    ))
    config = {"configurable": {"thread_id": "thread-9"}}
    out = run(agent, user("go"), config)
    (record,) = records(out)
    path = jsonl_path(tmp_path, "thread-9", record["id"])
    assert path == tmp_path / "thread-9" / "subagents" / f"agent-{record['id']}.jsonl"
    assert record["transcript"] == f"jsonl:{path}"
    first = json.loads(path.read_text().splitlines()[0])
    assert set(first) == {"id", "created_at", "cwd", "metadata"}
    assert first["id"] == record["id"]
    assert first["metadata"] == {"agent_type": "general-purpose", "parent_session_id": "thread-9",
                                 "tool_call_id": record["tool_call_id"]}
    header, messages = read_jsonl(path)
    assert header == first
    assert_child_history(messages)
    assert_child_history(get_transcript(agent, config, record["id"]))


def test_store_sink(run):
    from langgraph.checkpoint.memory import InMemorySaver

    store = InMemoryStore()
    agent = create_deep_agent(scripted(), [lookup], checkpointer=InMemorySaver(), store=store,
    settings=DelegationSettings.of(transcript_store=True))
    config = {"configurable": {"thread_id": "s1"}}
    out = run(agent, user("go"), config)
    (record,) = records(out)
    assert record["transcript"] == "store:subagent_transcripts/s1"
    assert_child_history(get_transcript(agent, config, record["id"]))


@pytest.mark.server  # starts a Python process of its own
def test_a_crash_leaves_a_readable_partial_jsonl(tmp_path):
    script = textwrap.dedent(
        f"""
        import os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from langchain_core.tools import tool
        from deep_agent import create_deep_agent
        from deep_agent._testing import ScriptedChatModel, tool_call
        from subagents import DelegationSettings

        @tool
        def crash(x: str) -> str:
            '''Kill the process, as a power cut would.'''
            os._exit(3)

        model = ScriptedChatModel(
            rules=[("risky job", [{{"tool_calls": [tool_call("crash", x="now")]}}])],
            responses=[{{"tool_calls": [tool_call("task", description="risky job",
                                                  subagent_type="general-purpose")]}}, "never"],
        )
        agent = create_deep_agent(model, [crash], settings=DelegationSettings.of(sessions_dir={str(tmp_path)!r}))
        agent.invoke({{"messages": [{{"role": "user", "content": "go"}}]}},
                     {{"configurable": {{"thread_id": "crashy"}}}})
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 3, result.stderr
    (path,) = (tmp_path / "crashy" / "subagents").glob("agent-*.jsonl")
    header, messages = read_jsonl(path)
    assert header["metadata"]["agent_type"] == "general-purpose"
    assert [m.type for m in messages] == ["human", "ai"]
    assert messages[1].tool_calls[0]["name"] == "crash"


def test_unknown_task_id_is_a_clear_error():
    from langgraph.checkpoint.memory import InMemorySaver

    agent = create_deep_agent(scripted(), [lookup], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "empty"}}
    with pytest.raises(KeyError, match="no task 'nope' in the ledgers of thread 'empty'"):
        get_transcript(agent, config, "nope")


def test_a_broken_sink_costs_that_task_its_transcript_only(run, tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the sessions folder should be")
    agent = create_deep_agent(scripted(), [lookup], settings=DelegationSettings.of(sessions_dir=str(blocker)))
    out = run(agent, user("go"))
    (record,) = records(out)
    assert record["status"] == "completed" and record["transcript"] is None
    assert "not-a-dir" in record["transcript_error"]
    assert out["messages"][-1].content == "parent done"


@pytest.mark.parametrize("where, value, message", [
    (7, None, "field 'transcript' must be text such as 'jsonl:<path>', not int"),
    ("store:subagent_transcripts/t", {"not": "messages"}, "has no 'messages' list"),
    ("store:subagent_transcripts/t", {"messages": [{"junk": 1}]}, "holds a message that cannot be read"),
    ("jsonl:/nonexistent/sessions/t/subagents/agent-task-1.jsonl", None,
     "task 'task-1': its transcript file '/nonexistent/sessions/t/subagents/agent-task-1.jsonl' is missing"),
])
def test_a_damaged_record_or_store_item_names_what_is_wrong(where, value, message):
    from subagents import read_transcript

    store = InMemoryStore()
    if value is not None:
        store.put(("subagent_transcripts", "t"), "task-1", value)
    with pytest.raises(LookupError, match=message):
        read_transcript({"id": "task-1", "transcript": where}, thread_id="t", store=store)


@MODES
def test_an_approved_childs_jsonl_transcript_holds_each_message_once(mode, tmp_path):
    """After an approval the resumed child records again from its start into the same file: the
    task description and first reply appear twice, and a second header sits mid-file."""

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        return f"deployed {target}"

    model = ScriptedChatModel(
        rules=[("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, "deploy finished"])],
        responses=_parallel(("deploy job", "deployer")),
    )
    agent = create_deep_agent(model, [deploy], checkpointer=InMemorySaver(),
                              subagents=[{"name": "deployer", "description": "deploys", "tools": ["deploy"],
                                          "interrupt_on": {"deploy": True}}], settings=DelegationSettings.of(
                                              sessions_dir=str(tmp_path),
                                          ))
    config = {"configurable": {"thread_id": f"approve-{mode}"}}
    _invoke(mode, agent, _user(), config)
    out = _invoke(mode, agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    (record,) = _records(out)
    messages = get_transcript(agent, config, record["id"])
    assert [m.type for m in messages] == ["human", "ai", "tool", "ai"]
    lines = open(record["transcript"].split(":", 1)[1], encoding="utf-8").read().splitlines()
    assert sum("metadata" in json.loads(line) for line in lines) == 1, "one header line"


@MODES
def test_a_jsonl_transcript_keeps_messages_with_a_lone_surrogate(mode, tmp_path):
    """Models do emit lone surrogates (a split emoji). The JSONL sink fails to encode them and the
    recorder's error is swallowed: the task completes with an empty transcript."""
    model = ScriptedChatModel(rules=[("job", ["half an emoji: \ud83d"])], responses=_parallel(("job", "general-purpose")))
    agent = create_deep_agent(model, [], settings=DelegationSettings.of(sessions_dir=str(tmp_path)))
    config = {"configurable": {"thread_id": f"surrogate-{mode}"}}
    out = _invoke(mode, agent, _user(), config)
    (record,) = _records(out)
    assert record["status"] == "completed"
    assert [m.type for m in get_transcript(out, config, record["id"])] == ["human", "ai"]


@MODES
def test_a_refused_delegation_still_has_a_transcript_that_can_be_read_back(mode):
    """'Every delegation, finished or failed, has a record ... and a transcript that can be read back.'
    A refused one (unknown type, budget spent, nested call) has transcript=None, and get_transcript
    raises LookupError for it (the CLI's `transcript TASK_ID` then fails) instead of giving back an
    empty transcript or the task it was given."""
    model = ScriptedChatModel(responses=_parallel(("do the thing", "no-such-agent")))
    agent = create_deep_agent(model, [], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"refused-{mode}"}}
    out = _invoke(mode, agent, _user(), config)
    (record,) = _records(out)
    assert record["stop_reason"] == "invalid_call"
    messages = get_transcript(agent, config, record["id"])  # empty, or the task it was given
    assert all(m.text == "do the thing" for m in messages)


@pytest.mark.parametrize("thread_id", ["../x", "a/../../x", "/etc", "..", "x\x00y", "é", "a" * 5000, 12345])
def test_jsonl_paths_stay_inside_a_symlinked_sessions_dir(tmp_path, thread_id):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    model = ScriptedChatModel(rules=[("job", ["done"])], responses=_parallel(("job", "general-purpose")))
    agent = create_deep_agent(model, [], settings=DelegationSettings.of(sessions_dir=str(tmp_path / "link")))
    config = {"configurable": {"thread_id": thread_id}}
    out = agent.invoke(_user(), config)
    (record,) = _records(out)
    path = record["transcript"].split(":", 1)[1]
    assert os.path.realpath(path).startswith(str(real.resolve()) + os.sep)
    assert [m.type for m in get_transcript(out, config, record["id"])] == ["human", "ai"]


def test_an_invalid_calls_record_has_an_empty_transcript_that_reads_back(run):
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "c1", "type": "tool_call",
                                                 "args": {"description": 5, "subagent_type": "general-purpose"}}])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    (record,) = records(run(agent, user("go"), config))
    assert record["transcript"] == "none:"
    assert get_transcript(agent, config, record["id"]) == []


@pytest.mark.parametrize("thread_id", ["../X", "..", "a/../../X", "/tmp/abs-escape", uuid.uuid4(), 7])
def test_thread_ids_never_write_outside_the_sessions_folder(run, tmp_path, thread_id):
    sessions = tmp_path / "inner" / "sessions"
    model = ScriptedChatModel(
        rules=[("job", ["done"])],
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="general-purpose")]},
                   "parent carried on"],
    )
    agent = create_deep_agent(model, checkpointer=InMemorySaver(),
    settings=DelegationSettings.of(sessions_dir=str(sessions)))
    out = run(agent, user("go"), {"configurable": {"thread_id": thread_id}})
    (record,) = records(out)
    assert record["status"] == "completed"
    kind, _, path = record["transcript"].partition(":")
    assert kind == "jsonl" and Path(path).is_absolute()
    assert sessions.resolve() in Path(path).resolve().parents
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and all(sessions.resolve() in p.resolve().parents for p in written)
    assert not Path("/tmp/abs-escape").exists()
