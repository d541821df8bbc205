"""A folder is trusted once, by a person: untrusted agent files run no command; a change asks again."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import SCRIPTS, cli
from helpers.hostile_checkout import make_hostile_checkout

RUN = ("run", "Do it", "--model", "scripted:cli_scripts:delegate_to_each_agent", "--yes")


def setup(tmp_path: Path) -> tuple[Path, dict[str, Path], dict[str, str], Path]:
    root = tmp_path / "checkout"
    cases = make_hostile_checkout(root)
    config = tmp_path / "config"
    return root, cases, {**SCRIPTS, "XDG_CONFIG_HOME": str(config)}, config


def clear(cases: dict[str, Path]) -> None:
    """Remove the markers the hooks wrote: they are files the hooks name, and a named file that changed asks again."""
    for marker in cases.values():
        marker.unlink(missing_ok=True)


def test_untrusted_folder_without_a_terminal_loads_no_command_running_agent(tmp_path):
    root, cases, env, _ = setup(tmp_path)
    result = cli(*RUN, cwd=root, env=env)
    assert result.returncode == 0, result.stderr
    how_to = [line for line in result.stderr.splitlines() if "deep-agent trust" in line]
    assert len(how_to) == 1 and "--trust-folder" in how_to[0]
    assert "hooked" in how_to[0] and "mcp" in how_to[0]
    assert not cases["pre_hook"].exists() and not cases["mcp_server"].exists()


def test_trust_shows_every_command_then_the_run_loads_them(tmp_path):
    root, cases, env, config = setup(tmp_path)
    shown = cli("trust", cwd=root, env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"touch {cases['pre_hook']}" in shown.stdout
    assert f"MCP server tools: sh -c 'touch {cases['mcp_server']}'" in shown.stdout  # each argument's bounds show
    assert f"touch {cases['stop_hook']}" in shown.stdout
    # The record lives in the user's config directory, never in the folder the checkout controls.
    record = json.loads((config / "deep-agent" / "trusted-folders.json").read_text())
    assert list(record) == [str(root.resolve())]
    assert not any(p.name == "trusted-folders.json" for p in root.rglob("*"))
    result = cli(*RUN, cwd=root, env=env)
    assert "deep-agent trust" not in result.stderr
    assert cases["pre_hook"].exists()  # trusted: the hooked agent was loaded and its hook ran


def test_a_changed_hook_command_is_not_loaded_until_trusted_again(tmp_path):
    root, cases, env, _ = setup(tmp_path)
    assert cli("trust", str(root), cwd=tmp_path, env=env).returncode == 0
    hooked = root / ".claude" / "agents" / "hooked.md"
    changed = cases["pre_hook"].with_name("changed_hook")
    hooked.write_text(hooked.read_text().replace(f"touch {cases['pre_hook']}", f"touch {changed}"))
    result = cli(*RUN, cwd=root, env=env)
    assert "deep-agent trust" in result.stderr and "hooked" in result.stderr
    assert not changed.exists() and not cases["pre_hook"].exists()


def test_trust_folder_flag_trusts_for_this_and_later_runs(tmp_path):
    root, cases, env, _ = setup(tmp_path)
    first = cli(*RUN, "--trust-folder", cwd=root, env=env)
    assert "deep-agent trust" not in first.stderr and cases["pre_hook"].exists()
    clear(cases)
    again = cli(*RUN, cwd=root, env=env)
    assert "deep-agent trust" not in again.stderr and cases["pre_hook"].exists()


def _prompted_run(root: Path, answer: str, env: dict[str, str]) -> str:
    import io

    import pexpect
    from helpers.cli import entry_point, terminal_env

    command, *args = entry_point()
    screen = io.StringIO()
    child = pexpect.spawn(command, [*args, *RUN], cwd=str(root), env={**terminal_env(root), **env},
                          dimensions=(60, 200), encoding="utf-8", timeout=120)
    child.logfile_read = screen
    child.expect(r"Trust this folder and let these commands run\? \[y/N\]")
    child.sendline(answer)
    child.expect(pexpect.EOF)
    child.close()
    return screen.getvalue()


def test_on_a_terminal_the_user_sees_every_command_and_is_asked_once(tmp_path):
    root, cases, env, _ = setup(tmp_path)
    refused = _prompted_run(root, "n", env)
    assert f"touch {cases['pre_hook']}" in refused and f"touch {cases['mcp_server']}" in refused
    assert "They run in Bash's sandbox" in refused  # where they would run is said before the question
    assert not cases["pre_hook"].exists() and not cases["mcp_server"].exists()
    _prompted_run(root, "y", env)  # asked again: a refusal is not remembered
    assert cases["pre_hook"].exists()
    clear(cases)
    again = cli(*RUN, cwd=root, env=env)  # remembered: no prompt, no how-to line
    assert "deep-agent trust" not in again.stderr and cases["pre_hook"].exists()
