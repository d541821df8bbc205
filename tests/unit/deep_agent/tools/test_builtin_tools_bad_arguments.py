"""The built-in tools given hostile arguments: every failure is a result naming the argument, never a crash."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers.processes import until_nothing_works_in

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from deep_agent.tools import builtin_tools
from subagents._settings import DelegationSettings


@pytest.fixture()
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n", encoding="utf-8")
    os.symlink("loop", root / "loop")  # a symlink to itself: resolving it raises
    return root


def tools(root: Path) -> dict:
    return {t.name: t for t in builtin_tools(root)}


@pytest.mark.parametrize("tool, args, named", [
    ("Read", {"file_path": "a\x00b"}, "file_path 'a\\x00b': contains a NUL byte"),
    ("Read", {"file_path": "\ud800"}, "lone surrogate U+D800"),
    ("Read", {"file_path": "~no-such-user-here/x"}, "file_path '~no-such-user-here/x': cannot be resolved"),
    ("Read", {"file_path": "x" * 5000}, "Read failed on 'xxx"),
    ("Write", {"file_path": "a.txt/inner", "content": "x"}, "Write failed on 'a.txt': Not a directory"),
    ("Write", {"file_path": "y" * 300, "content": "x"}, "File name too long"),
    ("Write", {"file_path": "ok.txt", "content": "\ud800"}, "content '\\ud800': holds the lone surrogate"),
    ("Edit", {"file_path": "a.txt", "old_string": "hello", "new_string": "\udc80"}, "new_string"),
    ("LS", {"path": "a\x00"}, "path 'a\\x00': contains a NUL byte"),
    ("Grep", {"pattern": "x", "path": "a\x00"}, "path 'a\\x00': contains a NUL byte"),
    ("Bash", {"command": "echo a\x00b"}, "command 'echo a\\x00b': contains a NUL byte"),
])
def test_a_hostile_argument_is_an_error_result_naming_it(ws, tool, args, named):
    result = tools(ws)[tool].invoke(args)
    assert named in result


def test_write_keeps_nul_bytes_in_content(ws):
    assert "Created" in tools(ws)["Write"].invoke({"file_path": "bin.txt", "content": "a\x00b"})
    assert (ws / "bin.txt").read_bytes() == b"a\x00b"


def test_a_permission_error_is_a_result(ws, monkeypatch):
    (ws / "locked.txt").write_text("x", encoding="utf-8")
    (ws / "locked.txt").chmod(0)
    if os.geteuid() == 0:  # root reads every file: the file system must refuse it another way
        real = os.open

        def refused(path, *args, **kwargs):
            if Path(path).name == "locked.txt":
                raise PermissionError(13, "Permission denied", str(path))
            return real(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", refused)
    assert "Permission denied" in tools(ws)["Edit"].invoke(
        {"file_path": "locked.txt", "old_string": "x", "new_string": "y"})


def test_glob_and_grep_skip_a_symlink_loop(ws):
    by_name = tools(ws)
    assert by_name["Glob"].invoke({"pattern": "*"}) == "a.txt"
    assert by_name["Grep"].invoke({"pattern": "hello"}) == "a.txt"


def test_the_root_run_goes_on_after_a_hostile_call(ws):
    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("Read", file_path="a\x00b"), tool_call("Glob", pattern="*")]}, "done"])
    agent = create_deep_agent(model, builtin_tools(ws), settings=DelegationSettings.of(general_purpose=False))
    out = agent.invoke({"messages": [{"role": "user", "content": "go"}]})
    results = {m.name: m for m in out["messages"] if m.type == "tool"}
    assert results["Read"].status == "error" and "NUL byte" in results["Read"].content
    assert results["Glob"].content == "a.txt"
    assert out["messages"][-1].content == "done"


def test_bash_keeps_only_what_it_can_show_and_never_loses_the_exit_code(ws):
    result = tools(ws)["Bash"].invoke({"command": "head -c 1000000 /dev/zero | tr '\\0' a; exit 3"})
    assert result.endswith("more bytes of output not kept]\n[exit code 3]")
    assert "[output truncated: " in result and len(result) < 30_200


def peak_growth_mb(ws: Path, tool: str, args: dict) -> int:
    """How much one call grows a fresh process's peak memory, in MB."""
    script = textwrap.dedent(f"""
        import resource
        from deep_agent.tools import builtin_tools
        tool = {{t.name: t for t in builtin_tools({str(ws)!r})}}[{tool!r}]
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tool.invoke({args!r})
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    """)
    return int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              check=True, timeout=120).stdout)


@pytest.mark.server  # starts a Python process of its own
def test_bash_output_of_hundreds_of_megabytes_costs_no_memory(ws):
    grown_mb = peak_growth_mb(ws, "Bash", {"command": "head -c 200000000 /dev/zero", "timeout": 60000})
    assert grown_mb < 50, f"peak memory grew by {grown_mb} MB for a 200 MB output"


@pytest.mark.server  # starts a Python process of its own
def test_reading_the_start_of_a_huge_file_costs_no_memory(ws):
    with open(ws / "huge.log", "w", encoding="utf-8") as file:
        file.writelines("x" * 99 + "\n" for _ in range(2_000_000))  # 200 MB
    grown_mb = peak_growth_mb(ws, "Read", {"file_path": "huge.log", "limit": 5})
    assert grown_mb < 50, f"peak memory grew by {grown_mb} MB to show 5 lines of a 200 MB file"


@pytest.mark.parametrize("bash", ["sandbox", "unconfined"])
@pytest.mark.parametrize("job", [
    "(sleep 1; touch late) & echo started",
    "(sleep 1; touch late) > /dev/null 2>&1 & echo started",  # the usual way to start a server: no pipe held
    "nohup sh -c 'sleep 1; touch late' > server.log 2>&1 & echo started",
    "(trap '' TERM; sleep 1; touch late) & echo started",
])
def test_a_job_a_command_leaves_running_ends_when_the_command_answers(ws, bash, job):
    if bash == "sandbox" and shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (Debian's bubblewrap package)")
    (tool,) = [t for t in builtin_tools(ws, bash=bash) if t.name == "Bash"]
    result = tool.invoke({"command": f"{job}; exit 3", "timeout": 20_000})
    assert result.split() == ["started", "[exit", "code", "3]"], result
    until_nothing_works_in(ws)  # a job that outlived the command touches its file first
    assert not (ws / "late").exists(), "a job outlived the command that started it"


def test_bash_still_kills_a_command_whose_shell_outlives_its_timeout(ws):
    result = tools(ws)["Bash"].invoke({"command": "sleep 30 & echo started; wait", "timeout": 500})
    assert result.startswith("started") and result.endswith("[command killed after 0.5s timeout]")


def test_a_pipe_in_the_workspace_is_refused_or_skipped_never_waited_on(ws):
    os.mkfifo(ws / "pipe")  # nothing ever writes to it: opening it would block for good
    by_name = tools(ws)
    for tool, args in [("Read", {"file_path": "pipe"}), ("Write", {"file_path": "pipe", "content": "x"}),
                       ("Edit", {"file_path": "pipe", "old_string": "a", "new_string": "b"})]:
        assert "is not a regular file" in by_name[tool].invoke(args)
    found, note = by_name["Grep"].invoke({"pattern": "hello"}).split("\n")
    assert found == "a.txt" and "not regular files" in note and note.endswith(": pipe]")


def test_read_shows_a_window_of_a_huge_file_without_loading_it(ws):
    with open(ws / "big.log", "w", encoding="utf-8") as file:
        file.write("y" * 5_000_000 + "\n")  # one line far longer than the cut
        file.writelines(f"line {i}\n" for i in range(2, 200_000))
    read = tools(ws)["Read"]
    first = read.invoke({"file_path": "big.log", "limit": 2})
    assert first.endswith(" [line truncated]\n     2\tline 2") and len(first) < 2_100
    assert read.invoke({"file_path": "big.log", "offset": 199_999}) == "199999\tline 199999"
    assert read.invoke({"file_path": "big.log", "offset": 300_000}) == "(no lines: big.log has 199999 line(s))"
    (ws / "crlf.txt").write_bytes(b"one\r\ntwo\rthree\n")
    assert read.invoke({"file_path": "crlf.txt"}) == "     1\tone\n     2\ttwo\n     3\tthree"


def test_a_file_name_that_is_not_utf8_reaches_the_model_as_sendable_text(ws):
    (ws / "loop").unlink()
    with open(os.path.join(os.fsencode(ws), b"caf\xe9.txt"), "w", encoding="utf-8") as file:
        file.write("hello\n")
    by_name = tools(ws)
    results = [by_name["LS"].invoke({}), by_name["Glob"].invoke({"pattern": "caf*"}),
               by_name["Grep"].invoke({"pattern": "hello", "glob": "caf*"})]
    for result in results:
        result.encode("utf-8")  # a lone surrogate here would fail the next model request
        assert "caf\\xe9.txt" in result


def test_a_pattern_that_backtracks_without_end_is_stopped_and_named(ws, monkeypatch):
    from deep_agent.tools import _search as search

    monkeypatch.setattr(search, "GREP_SECONDS", 0.5)
    (ws / "long.txt").write_text("a" * 5000 + "!\n", encoding="utf-8")  # Python's re takes years on this
    result = tools(ws)["Grep"].invoke({"pattern": "(a|aa)+$", "output_mode": "content"})
    assert "pattern '(a|aa)+$' took more than 0.5 s to match (stopped in long.txt)" in result, result
    # Ordinary patterns keep Python's syntax and results.
    assert tools(ws)["Grep"].invoke({"pattern": r"^h(?P<rest>el+)o$", "output_mode": "content"}) == "a.txt:1:hello"


def test_glob_stops_looking_after_its_cap_and_says_so(ws, monkeypatch):
    from deep_agent.tools import _search as search

    monkeypatch.setattr(search, "MAX_GLOB_SCANNED", 5)
    for i in range(8):
        (ws / f"f{i}.log").write_text("x", encoding="utf-8")
    lines = tools(ws)["Glob"].invoke({"pattern": "*.log"}).splitlines()
    assert len(lines) == 6 and lines[-1].startswith("... [stopped looking after 5 matches"), lines
    assert len(tools(ws)["Glob"].invoke({"pattern": "f[0-3].log"}).splitlines()) == 4


def test_a_pipe_put_in_place_of_a_checked_file_is_refused_not_waited_on(ws, monkeypatch):
    # The file is checked, then swapped for a pipe before it is opened: the open itself must not block.
    from deep_agent.tools import _workspace as workspace

    (ws / "swap.txt").write_text("x\n", encoding="utf-8")
    real = workspace.open_regular

    def swapped(path, *args, **kwargs):
        if path.name == "swap.txt" and path.is_file():
            path.unlink()
            os.mkfifo(path)
        return real(path, *args, **kwargs)

    for module in ("files", "search"):
        monkeypatch.setattr(f"deep_agent.tools._{module}.open_regular", swapped)
    for tool, args in (("Read", {"file_path": "swap.txt"}),
                       ("Edit", {"file_path": "swap.txt", "old_string": "x", "new_string": "y"}),
                       ("Write", {"file_path": "swap.txt", "content": "z"})):
        (ws / "swap.txt").unlink(missing_ok=True)
        (ws / "swap.txt").write_text("x\n", encoding="utf-8")
        result = tools(ws)[tool].invoke(args)
        assert "not a regular file" in result, (tool, result)
