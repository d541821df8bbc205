"""Data is never code: state that came with a cloned folder is read as data, and runs nothing.

The CLI keeps its state in ``./.deep_agent/``. LangGraph's default
checkpoint serializer rebuilds objects by importing and calling what the
data names, so a repository shipping a crafted ``state.sqlite`` ran its own
command when the user typed ``deep-agent tasks`` in it. Each test here
crafts such a file and checks that nothing runs.
"""

from __future__ import annotations

import enum
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from helpers.cli import SCRIPTS, cli, make_project
from subagents._ledger import DataOnlySerializer, UntrustedDataError


def hostile(command: str) -> Any:
    """A value LangGraph's serializer stores as ("os", "system", command): loading it calls os.system."""
    member = enum.Enum("system", {"run": command})
    member.__module__ = "os"
    return member.run


def craft_state(folder: Path, thread: str, marker: Path) -> None:
    """A ``.deep_agent/`` whose thread ``thread`` holds a checkpoint that runs ``touch marker`` when loaded."""
    state = folder / ".deep_agent"
    state.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(state / "state.sqlite") as conn:
        saver = SqliteSaver(conn)  # the attacker writes with the default serializer
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [hostile(f"touch {marker}")],
                                        "subagent_tasks": {"t": hostile(f"touch {marker}")}}
        checkpoint["channel_versions"] = {"messages": 1, "subagent_tasks": 1}
        saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, checkpoint,
                  {"source": "input", "step": -1, "parents": {}}, {"messages": 1, "subagent_tasks": 1})
    (state / "last_thread").write_text(thread)


def test_the_crafted_value_is_real_code_for_the_default_serializer_and_refused_as_data(tmp_path):
    marker = tmp_path / "ran"
    blob = JsonPlusSerializer().dumps_typed([hostile(f"touch {marker}")])
    JsonPlusSerializer().loads_typed(blob)
    assert marker.exists(), "the attack is real: the default serializer ran the command"
    marker.unlink()
    with pytest.raises(UntrustedDataError, match=r"checkout/state.sqlite: holds an object of type os.system"):
        DataOnlySerializer("checkout/state.sqlite").loads_typed(blob)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["pickle", "json"])
def test_pickled_and_legacy_json_data_are_refused_unread(kind):
    with pytest.raises(UntrustedDataError, match=f"state.sqlite: holds {kind} data"):
        DataOnlySerializer("state.sqlite").loads_typed((kind, b"cos\nsystem\n(S'true'\ntR."))


def test_what_the_library_writes_reads_back_through_the_data_only_serializer(tmp_path):
    from deep_agent import create_deep_agent
    from deep_agent._testing import ScriptedChatModel, tool_call
    from helpers.graphs import user

    model = ScriptedChatModel(rules=[("job", ["done"]), ("go", [{"tool_calls": [
        tool_call("task", description="job", subagent_type="general-purpose")]}, "finished"])])
    with sqlite3.connect(tmp_path / "s.sqlite", check_same_thread=False) as conn:
        saver = SqliteSaver(conn, serde=DataOnlySerializer("s.sqlite"))
        agent = create_deep_agent(model, checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        out = agent.invoke(user("go"), config)
        again = create_deep_agent(model, checkpointer=saver).get_state(config).values
    assert again["messages"] == out["messages"] and again["subagent_tasks"] == out["subagent_tasks"]


@pytest.mark.server  # starts the command line in processes of its own
@pytest.mark.parametrize("command", [
    ("tasks",), ("tasks", "evil"), ("transcript", "abc123"),
    ("run", "hello", "--thread", "evil", "--model", "scripted:cli_scripts:one_edit", "--yes"),
])
def test_no_command_of_the_cli_runs_code_from_a_cloned_folders_state(tmp_path, command):
    project = make_project(tmp_path)
    marker = tmp_path / "ran"
    craft_state(project, "evil", marker)
    result = cli(*command, cwd=project, env=SCRIPTS)
    assert not marker.exists(), f"{command}: the crafted state ran its command"
    assert result.returncode != 0
    assert "state.sqlite: holds an object of type os.system" in result.stderr and "Traceback" not in result.stderr


def test_a_crafted_whole_ledger_in_a_checkpoint_runs_nothing(tmp_path):
    """A ledger whole in every checkpoint is stored compressed: decoding it is reading data too."""
    import zlib

    from subagents._ledger import LedgerChannel
    from subagents._ledger import merge_records

    marker = tmp_path / "ran"
    kind, data = JsonPlusSerializer().dumps_typed({"t": {"id": "t", "x": hostile(f"touch {marker}")}})
    spec = LedgerChannel(dict, merge_records)
    spec.key = "subagent_tasks"
    with pytest.raises(ValueError, match="subagent_tasks"):
        spec.from_checkpoint(zlib.compress(data))
    assert not marker.exists()
