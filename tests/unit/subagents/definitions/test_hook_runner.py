"""A hook command is bounded: its verdict is its own exit status, its timeout ends the call,
and its output is kept to a cap however much it prints. Real shell commands, both runners."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
import tracemalloc
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.background import wait_for
from subagents.definitions._hooks import MAX_OUTPUT_CHARS, HookOutcome, arun_hook, run_hook

EVENT = {"hook_event_name": "PreToolUse", "tool_name": "Bash"}
Run = Callable[..., HookOutcome]


@pytest.fixture(params=["sync", "async"])
def hook(request: pytest.FixtureRequest) -> Run:
    """``hook(command, timeout, event=EVENT)`` through ``run_hook`` or ``arun_hook``."""
    if request.param == "sync":
        return lambda command, timeout, event=EVENT: run_hook(command, event, timeout)
    return lambda command, timeout, event=EVENT: asyncio.run(arun_hook(command, event, timeout))


@pytest.fixture
def escaped(tmp_path: Path) -> Iterator[str]:
    """A shell snippet starting a child that leaves the hook's process group but keeps its pipes."""
    pid_file = tmp_path / "escaped.pid"
    child = (f"import os, time; os.setsid(); open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(30); "
             f"open({str(tmp_path / 'escaped.ended')!r}, 'w')")
    yield f"{sys.executable} -c \"{child}\" &"
    if pid_file.exists():  # the killed group did not include it: end it here
        try:
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def test_the_verdict_is_the_exit_status_even_while_a_background_job_holds_the_output(hook):
    outcome = hook("(sleep 5) & echo 'rm -rf is not allowed' >&2; exit 2", 3)
    assert outcome.exit_code == 2 and outcome.problem is None
    assert outcome.stderr.strip() == "rm -rf is not allowed"


def still_running(tmp_path: Path) -> bool:
    """Whether the escaped child had not ended (it marks its end after 30 s) when the call returned, having run."""
    ended = (tmp_path / "escaped.ended").exists()
    return bool(wait_for((tmp_path / "escaped.pid").exists)) and not ended


def test_a_hook_that_exits_at_once_is_not_held_by_a_child_that_left_its_group(hook, escaped, tmp_path):
    outcome = hook(f"{escaped} exit 0", 20)
    assert still_running(tmp_path)
    assert outcome.exit_code == 0


def test_the_timeout_bounds_the_call_even_when_a_child_left_the_process_group(hook, escaped, tmp_path):
    outcome = hook(f"{escaped} sleep 30", 1)
    assert still_running(tmp_path)
    assert outcome.exit_code is None and outcome.problem == "timed out after 1s"


def test_an_asyncio_hook_leaves_no_transport_behind(escaped):
    # Collect what earlier tests in this process left first: only this hook's own transports count.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        asyncio.run(arun_hook(f"{escaped} exit 0", EVENT, 20))
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]


def test_a_flood_of_output_is_cut_to_the_cap_without_being_held_in_memory(hook):
    tracemalloc.start()
    try:
        outcome = hook("head -c 200000000 /dev/zero | tr '\\0' a", 60)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert outcome.exit_code == 0 and outcome.stdout == "a" * MAX_OUTPUT_CHARS
    assert peak < 20_000_000, f"{peak} bytes held for 200 MB of output"

