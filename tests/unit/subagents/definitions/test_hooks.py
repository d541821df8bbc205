"""Claude Code hooks in agent files and on the root, with real shell scripts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.tools import tool

from helpers.graphs import records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import AgentFileError, SpecError, discover_agents, load_agent_file
from helpers.agent_files import DETAIL, write
from subagents._settings import DelegationSettings

RAN: list[str] = []


@tool
def Bash(command: str) -> str:  # noqa: N802 - Claude Code's tool name
    """Run a command."""
    RAN.append(command)
    return f"ran {command}"


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def hooks_yaml(event: str, command: str, matcher: str = "Bash", timeout: float | None = None) -> str:
    extra = f", timeout: {timeout}" if timeout else ""
    return (f"hooks:\n  {event}:\n    - matcher: {matcher}\n      hooks:\n"
            f"        - {{type: command, command: {json.dumps(command)}{extra}}}\n")


def agent(tmp_path: Path, hooks: str, rules: list, extra: str = "") -> ScriptedChatModel:
    write(tmp_path / "agents" / "coder.md",
          f"---\nname: coder\ndescription: codes\ntools: [Bash]\n{extra}{hooks}---\nYou code.\n")
    return ScriptedChatModel(rules=rules, responses=[
        {"tool_calls": [tool_call("task", description="do the job", subagent_type="coder")]}, "parent carried on"])


def child_tool_results(model: ScriptedChatModel) -> list:
    last = [c for c in model.calls if any(m.text == "do the job" for m in c["messages"][:2])][-1]
    return [m for m in last["messages"] if m.type == "tool"]


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def test_a_blocking_pre_tool_use_hook_refuses_the_call_and_its_stderr_is_the_result(tmp_path, run):
    guard = script(tmp_path / "guard.sh",
                   'if grep -q "rm -rf" ; then echo "rm -rf is not allowed here" >&2; exit 2; fi\nexit 0\n')
    model = agent(tmp_path, hooks_yaml("PreToolUse", guard), [("do the job", [
        {"tool_calls": [tool_call("Bash", command="rm -rf /"), tool_call("Bash", command="ls")]},
        "done." + DETAIL])])
    out = run(create_deep_agent(model, [Bash], settings=DelegationSettings.of(
        agents_dirs=[tmp_path / "agents"], general_purpose=False,
    )),
              user("go"))
    blocked, allowed = child_tool_results(model)
    assert blocked.content == "rm -rf is not allowed here" and blocked.status == "error"
    assert allowed.content == "ran ls" and RAN == ["ls"]
    assert records(out)[0]["status"] == "completed"


def test_a_guard_that_blocks_and_leaves_a_background_job_running_still_blocks(tmp_path, run):
    # The job holds the hook's stdout for 5 s, longer than the hook's timeout: the verdict
    # is the guard's exit status, not the end of its output.
    guard = script(tmp_path / "guard.sh", "(sleep 5) &\necho 'rm -rf is not allowed' >&2\nexit 2\n")
    model = agent(tmp_path, hooks_yaml("PreToolUse", guard, timeout=2), [("do the job", [
        {"tool_calls": [tool_call("Bash", command="rm -rf /")]}, "done." + DETAIL])])
    run(create_deep_agent(model, [Bash], settings=DelegationSettings.of(
        agents_dirs=[tmp_path / "agents"], general_purpose=False,
    )), user("go"))
    (blocked,) = child_tool_results(model)
    assert RAN == [] and blocked.status == "error" and blocked.content == "rm -rf is not allowed"


def test_a_post_tool_use_logger_sees_the_event_as_json(tmp_path, run):
    log = tmp_path / "log.jsonl"
    logger = script(tmp_path / "log.sh", f'cat >> {log}\necho >> {log}\n')
    model = agent(tmp_path, hooks_yaml("PostToolUse", logger, matcher="Ba.*"), [("do the job", [
        {"tool_calls": [tool_call("Bash", command="echo hi")]}, "done." + DETAIL])])
    out = run(create_deep_agent(model, [Bash], settings=DelegationSettings.of(
        agents_dirs=[tmp_path / "agents"], general_purpose=False,
    )),
              user("go"))
    (event,) = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert event["hook_event_name"] == "PostToolUse" and event["tool_name"] == "Bash"
    assert event["tool_input"] == {"command": "echo hi"} and event["tool_response"] == "ran echo hi"
    assert event["agent_type"] == "coder" and event["task_id"] == records(out)[0]["id"]


def test_a_stop_hook_asks_the_child_to_continue_once(tmp_path, run):
    more = script(tmp_path / "more.sh", 'if grep -q \'"stop_hook_active": true\'; then exit 0; fi\n'
                                        'echo "Add a one-line summary." >&2\nexit 2\n')
    model = agent(tmp_path, hooks_yaml("Stop", more, matcher="'*'"), [
        ("do the job", ["first draft." + DETAIL]),
        ("Add a one-line summary.", ["draft plus summary." + DETAIL]),
    ])
    out = run(create_deep_agent(model, [Bash], settings=DelegationSettings.of(
        agents_dirs=[tmp_path / "agents"], general_purpose=False,
    )),
              user("go"))
    assert tool_messages(out)[0].content.startswith("draft plus summary.")


def test_a_stop_hook_that_never_lets_go_is_bounded_by_max_turns(tmp_path, run):
    nag = script(tmp_path / "nag.sh", 'echo "Keep going." >&2\nexit 2\n')
    model = agent(tmp_path, hooks_yaml("Stop", nag, matcher="'*'"),
                  [("do the job", ["draft." + DETAIL]), ("Keep going.", ["again." + DETAIL])],
                  extra="maxTurns: 3\n")
    out = run(create_deep_agent(model, [Bash], settings=DelegationSettings.of(
        agents_dirs=[tmp_path / "agents"], general_purpose=False,
    )),
              user("go"))
    (record,) = records(out)
    assert record["status"] == "error" and "max_turns" in record["error"]
    assert out["messages"][-1].content == "parent carried on"


def test_a_hook_that_times_out_or_fails_is_a_warning_and_the_tool_runs(tmp_path, run):
    slow = script(tmp_path / "slow.sh", f"sleep 30\ntouch {tmp_path / 'slow-ended'}\n")
    hooks = ("hooks:\n  PreToolUse:\n    - matcher: Bash\n      hooks:\n"
             f"        - {{type: command, command: {slow}, timeout: 1}}\n"
             "        - {type: command, command: exit 3}\n")  # ran and failed (a missing one blocks)
    model = agent(tmp_path, hooks, [("do the job", [
        {"tool_calls": [tool_call("Bash", command="ls")]}, "done." + DETAIL])])
    run(create_deep_agent(model, [Bash], settings=DelegationSettings.of(
        agents_dirs=[tmp_path / "agents"], general_purpose=False,
    )), user("go"))
    assert not (tmp_path / "slow-ended").exists()  # the run did not wait for the slow hook's end
    (result,) = child_tool_results(model)
    assert result.content == "ran ls" and RAN == ["ls"]
    warnings = result.additional_kwargs["hook_warnings"]
    assert "timed out after 1s" in warnings[0] and "exited 3" in warnings[1]


def test_root_hooks_run_around_each_delegation(tmp_path, run):
    log = tmp_path / "root.jsonl"
    logger = script(tmp_path / "log.sh", f'cat >> {log}\necho >> {log}\n')
    review = script(tmp_path / "review.sh", 'echo "Check the child\'s numbers." >&2\nexit 2\n')
    entry = lambda command: [{"matcher": "general-purpose", "hooks": [{"type": "command", "command": command}]}]  # noqa: E731
    hooks = {"SubagentStart": entry(logger), "SubagentStop": [*entry(logger), *entry(review)]}
    model = ScriptedChatModel(rules=[("sum it", ["the sum is 4." + DETAIL])], responses=[
        {"tool_calls": [tool_call("task", description="sum it", subagent_type="general-purpose")]}, "done"])
    out = run(create_deep_agent(model, hooks=hooks), user("go"))
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [e["hook_event_name"] for e in events] == ["SubagentStart", "SubagentStop"]
    assert events[0]["subagent_type"] == "general-purpose" and events[0]["description"] == "sum it"
    assert events[1]["task_id"] == records(out)[0]["id"] and events[1]["status"] == "completed"
    message = tool_messages(out)[0]
    assert message.content.startswith("the sum is 4.")
    assert message.content.endswith("Hook feedback: Check the child's numbers.")


def test_unknown_hook_events_are_errors_at_load_time(tmp_path):
    path = write(tmp_path / "a.md", "---\nname: a\ndescription: d\nhooks:\n  PreToolCall: []\n---\nB\n")
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    assert info.value.field == "hooks" and "unknown hook event 'PreToolCall'" in str(info.value)
    start = write(tmp_path / "b.md", "---\nname: b\ndescription: d\nhooks:\n  SubagentStart: []\n---\nB\n")
    with pytest.raises(AgentFileError, match="SubagentStart is a root event"):
        load_agent_file(start)
    bad_matcher = write(tmp_path / "c.md", "---\nname: c\ndescription: d\nhooks:\n  PreToolUse:\n"
                                           "    - {matcher: '(', hooks: [{type: command, command: x}]}\n---\nB\n")
    with pytest.raises(AgentFileError, match="matcher '\\(' is not a valid pattern"):
        load_agent_file(bad_matcher)
    with pytest.raises(SpecError, match="hooks: unknown hook event 'Nope'"):
        create_deep_agent(ScriptedChatModel(), hooks={"Nope": []})



@pytest.mark.parametrize(("matcher", "reason"),
                         [("a{99999999999}", "too large"), ("(?:" * 600 + "a" + ")" * 600, "nests too deeply")],
                         ids=["huge repeat", "deep groups"])
def test_a_matcher_re_cannot_compile_is_an_error_naming_file_and_field(tmp_path, matcher, reason):
    path = write(tmp_path / "agents" / "m.md", "---\nname: m\ndescription: d\nhooks:\n  PreToolUse:\n"
                 f"    - matcher: '{matcher}'\n      hooks: [{{type: command, command: x}}]\n---\nB\n")
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    assert info.value.field == "hooks" and "is not a valid pattern" in str(info.value)
    assert reason in str(info.value) and str(path) in str(info.value)
    (problem,) = discover_agents([tmp_path / "agents"]).problems
    assert problem.error.field == "hooks" and "is not a valid pattern" in problem.message
    with pytest.raises(SpecError, match=f"hooks: .*is not a valid pattern.*{reason}"):
        create_deep_agent(ScriptedChatModel(), hooks={
            "PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": "x"}]}]})

def test_subagent_stop_in_a_subagent_file_is_its_stop_and_the_root_has_stop_hooks_too(tmp_path, run):
    path = write(tmp_path / "s.md", "---\nname: s\ndescription: d\nhooks:\n  SubagentStop:\n"
                                   "    - hooks: [{type: command, command: 'true'}]\n---\nB\n")
    assert list(load_agent_file(path).hooks) == ["Stop"]
    more = script(tmp_path / "more.sh", 'if grep -q \'"stop_hook_active": true\'; then exit 0; fi\n'
                                        'echo "Say which agent did it." >&2\nexit 2\n')
    model = ScriptedChatModel(rules=[("Say which agent did it.", ["general-purpose did it."])],
                              responses=["first answer"])
    out = run(create_deep_agent(model, hooks={"Stop": [{"hooks": [{"type": "command", "command": more}]}]}),
              user("go"))
    assert [m.text for m in out["messages"] if m.type == "ai"] == ["first answer", "general-purpose did it."]


def test_hooks_still_run_once_the_working_directory_is_gone(tmp_path, run, monkeypatch):
    """A tool that removed the folder the process runs in made every hook raise FileNotFoundError into the agent."""
    from langchain.agents import create_agent

    from subagents.definitions import HookMiddleware

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    hooks = HookMiddleware({"PreToolUse": [{"hooks": [{"type": "command", "command": "exit 0"}]}]}, scope="root")
    agent = create_agent(ScriptedChatModel(responses=[{"tool_calls": [tool_call("ping")]}, "ok"]), [ping],
                         middleware=[hooks])
    out = run(agent, user("go"))
    assert out["messages"][-1].text == "ok" and tool_messages(out)[-1].content == "pong"
