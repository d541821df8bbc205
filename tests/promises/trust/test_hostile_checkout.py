"""A hostile checkout runs nothing: ``agents list``, ``agents validate`` and ``run`` without a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import SCRIPTS, cli
from helpers.hostile_checkout import make_hostile_checkout


@pytest.fixture()
def checkout(tmp_path: Path) -> tuple[Path, dict[str, Path], dict[str, str]]:
    cases = make_hostile_checkout(tmp_path)
    env = {**SCRIPTS, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    return tmp_path, cases, env


COMMANDS = [
    ("agents", "list"),
    ("agents", "list", "--format", "json"),
    ("agents", "validate"),
    ("run", "Do it", "--model", "scripted:cli_scripts:delegate_to_each_agent"),
    ("run", "Do it", "--model", "scripted:cli_scripts:delegate_to_each_agent", "--permission-mode", "always_confirm"),
]


def test_no_hostile_case_runs_under_any_command(checkout):
    root, cases, env = checkout
    tried = 0
    for command in COMMANDS:
        result = cli(*command, cwd=root, env=env)
        assert "Traceback" not in result.stderr, result.stderr
        tried += len(cases)
        ran = sorted(name for name, marker in cases.items() if marker.exists())
        assert ran == [], f"{' '.join(command)} ran {ran}"
        assert not (root / "bash-ran").exists(), f"{' '.join(command)} ran the child's Bash"
        if command[0] == "run":
            assert "deep-agent trust" in result.stderr and "--trust-folder" in result.stderr
    assert tried == 30  # 6 hostile cases x 5 commands, none ran
    assert not (root / ".deep_agent" / "trusted-folders.json").exists()
