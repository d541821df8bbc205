"""The script a hook runs is protected as the shell would find it: missing yet, or after a ``cd``.

``files_run_by`` names what a trusted hook runs; those files join the
protected set. Before: a script named by a bare word (``bash guard.sh``)
missing when the run started was not named, so a command made it and the
guard's verdict was its own; and ``cd scripts && ./check.sh`` named
``check.sh`` of the folder, not the ``scripts/check.sh`` that runs.
"""

from __future__ import annotations

from types import SimpleNamespace

from deep_agent.tools._host_code import files_run_by
from deep_agent.tools._protected import Protected


def test_a_missing_script_and_one_after_cd_are_never_written(runner):
    (runner.ws / "scripts").mkdir()
    (runner.ws / "scripts" / "check.sh").write_text("exit 2\n")
    runner.chown(runner.ws)
    commands = ["bash guard.sh", "cd scripts && ./check.sh"]
    hooks = {"PreToolUse": [{"hooks": [{"type": "command", "command": c} for c in commands]}]}
    runs = files_run_by(SimpleNamespace(hooks=hooks, mcp_config=None), runner.ws)
    out = runner.run("echo 'exit 0' > guard.sh; echo 'exit 0' > scripts/check.sh; echo done",
                     protected=Protected.of(runner.ws, agent_files=runs))
    assert "done" in out and not (runner.ws / "guard.sh").exists(), out
    assert (runner.ws / "scripts" / "check.sh").read_text() == "exit 2\n", out
