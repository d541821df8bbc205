"""What other processes write to stderr while the live tree is up is shown above it, never inside it."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pexpect

from helpers import REPO as ROOT
from helpers.cli import ANSI, entry_point, terminal_env

DIM = "\x1b[2m"


def _in_terminal(command: str, args: list[str], *, cwd: Path, env: dict[str, str], check: bool = True) -> str:
    """What ``command`` writes to a pseudo-terminal until it exits (with ``check``, 0), escape sequences and all."""
    screen = io.StringIO()
    child = pexpect.spawn(command, args, cwd=str(cwd), env=env, dimensions=(60, 200), encoding="utf-8", timeout=60)
    child.logfile_read = screen
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0 or not check, screen.getvalue()[-3000:]
    return screen.getvalue()

CALC_SERVER = """
import sys, time
from mcp.server.fastmcp import FastMCP
print("calc server: starting up on stdio", file=sys.stderr, flush=True)
server = FastMCP("calc", log_level="WARNING")

@server.tool()
def add(a: int, b: int) -> str:
    \"\"\"Add two integers.\"\"\"
    print(f"calc server: adding {a} and {b}", file=sys.stderr, flush=True)
    time.sleep(0.5)
    return str(a + b)

server.run("stdio")
"""


def test_an_mcp_servers_stderr_is_printed_above_the_live_tree(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (tmp_path / "home").mkdir()
    (tmp_path / "calc_server.py").write_text(CALC_SERVER, encoding="utf-8")
    (agents / "calculator.md").write_text(textwrap.dedent(f"""\
        ---
        name: calculator
        description: Does arithmetic with the calc server.
        tools: [mcp__calc]
        mcp_config:
          calc:
            command: {sys.executable}
            args: [{tmp_path / "calc_server.py"}]
        ---
        Use the calc tools for every sum.
        """), encoding="utf-8")
    command, *args = entry_point()
    raw = _in_terminal(command, [*args, "run", "add", "--yes", "--trust-folder", "--model", "scripted:cli_scripts:mcp_calc"],
                       cwd=tmp_path, env=terminal_env(tmp_path))
    assert "The sum is 5." in ANSI.sub("", raw), raw[-3000:]
    # Each line went through the console (styled dim, on a line of its own), not straight onto the tree.
    for line in ("calc server: starting up on stdio", "calc server: adding 2 and 3"):
        assert f"{DIM}{line}" in raw, (line, raw[-3000:])
        assert all(f"{DIM}{line}" in piece for piece in raw.split("\r\n") if line in piece), line


RELAY_SCRIPT = """
import subprocess, sys, time
from rich.console import Console
from deep_agent.cli._live_view import relayed_stderr

marker = sys.argv[1]
writer = ("import sys, time; sys.stderr.write('during the view\\\\n'); sys.stderr.flush(); time.sleep(1.0); "
          "sys.stderr.write('x' * 300000 + '\\\\n'); sys.stderr.flush(); open(sys.argv[1], 'w').close()")
with relayed_stderr(Console(force_terminal=True)):
    process = subprocess.Popen([sys.executable, "-c", writer, marker])
    time.sleep(0.6)
print("view ended", flush=True)
process.wait(timeout=20)
print("writer done", flush=True)
"""


def test_a_process_started_in_the_view_never_blocks_on_its_stderr_after_the_view_ends(tmp_path: Path) -> None:
    script, marker = tmp_path / "relay.py", tmp_path / "written"
    script.write_text(RELAY_SCRIPT, encoding="utf-8")
    out = _in_terminal(sys.executable, [str(script), str(marker)], cwd=ROOT, env=terminal_env(tmp_path))
    assert f"{DIM}during the view" in out  # relayed through the console while the view was up
    assert out.index("view ended") < out.index("writer done") and marker.exists()  # 300 kB later: drained


def test_nothing_is_relayed_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    script, marker = tmp_path / "relay.py", tmp_path / "written"
    script.write_text(RELAY_SCRIPT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), str(marker)], cwd=ROOT, env=terminal_env(tmp_path),
                          capture_output=True, text=True, timeout=40)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "during the view" in done.stderr and "during the view" not in done.stdout


BURST_SCRIPT = """
import faulthandler, os, subprocess, sys, time
from rich.console import Console
from rich.live import Live
from rich.text import Text
from deep_agent.cli._live_view import relayed_stderr

mode = sys.argv[1]
console = Console(force_terminal=True)
with relayed_stderr(console), Live(Text("the tree"), console=console, refresh_per_second=8):
    if mode == "burst":  # another process's many lines, then the view ends and the process exits at once
        subprocess.run(["seq", "-f", "LINE%g", "1", "20000"], stdout=2, check=True)
    elif mode == "partial":
        os.write(2, b"no newline at all")
        time.sleep(1.0)
    elif mode == "crash":
        faulthandler._sigsegv()
print("view ended", flush=True)
"""


def _relay_run(tmp_path: Path, mode: str, **env: str) -> str:
    script = tmp_path / "burst.py"
    script.write_text(BURST_SCRIPT, encoding="utf-8")
    return ANSI.sub("", _in_terminal(sys.executable, [str(script), mode], cwd=ROOT,
                                     env={**terminal_env(tmp_path), **env}, check=mode != "crash"))


def test_a_burst_of_lines_is_shown_whole_before_the_process_exits(tmp_path: Path) -> None:
    out = _relay_run(tmp_path, "burst")
    shown = {int(number) for number in re.findall(r"LINE(\d+)\n", out)}  # the tree's redraws may precede one
    assert shown == set(range(1, 20001)), f"{20000 - len(shown)} lines lost"
    assert out.index("LINE20000") < out.index("view ended")


def test_a_line_without_its_newline_is_shown(tmp_path: Path) -> None:
    assert "no newline at all" in _relay_run(tmp_path, "partial")


def test_a_crash_in_the_view_still_reports_on_the_terminal(tmp_path: Path) -> None:
    out = _relay_run(tmp_path, "crash", PYTHONFAULTHANDLER="1")
    assert "Fatal Python error: Segmentation fault" in out, out[-2000:]


PROMPT_SCRIPT = """
import subprocess, sys, time
from rich.console import Console
from rich.live import Live
from rich.text import Text
from deep_agent.cli._live_view import relayed_stderr

TITLE = r"printf '\\033]0;%s\\007' "
console = Console(force_terminal=True)
with relayed_stderr(console), Live(Text("the tree"), console=console, refresh_per_second=8):
    # a server started in the view that writes once the view has ended (at an approval prompt, say)
    during = subprocess.Popen(["sh", "-c", "sleep 1; " + TITLE + "STARTED-IN-VIEW >&2"])
print("Approve? [y]es / [n]o / [a]lways: ", flush=True)
# a server started while the prompt is up, with no view
subprocess.run(["sh", "-c", TITLE + "STARTED-AT-PROMPT >&2"], check=True)
during.wait()
time.sleep(0.5)
print("answered", flush=True)
"""


def test_nothing_another_process_writes_reaches_the_terminal_unescaped_at_a_prompt(tmp_path: Path) -> None:
    """An MCP server writing escape sequences while an approval prompt is up (after a live view, or started at
    the prompt) cannot move the cursor over the prompt or retitle the window: its bytes are shown escaped."""
    script = tmp_path / "prompt.py"
    script.write_text(PROMPT_SCRIPT, encoding="utf-8")
    out = _in_terminal(sys.executable, [str(script)], cwd=ROOT, env=terminal_env(tmp_path))
    for name in ("STARTED-IN-VIEW", "STARTED-AT-PROMPT"):
        assert f"\x1b]0;{name}" not in out, out[-2000:]
        assert f"\\x1b]0;{name}\\x07" in out, out[-2000:]
