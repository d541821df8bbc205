"""Exporting provider keys never makes the test command go online.

The trap: a fake ``OPENAI_API_KEY`` with ``OPENAI_BASE_URL`` pointing at a
closed loopback port (plus other providers' keys and LangSmith tracing).
Anything that picks a real model from the environment fails on it with a
connection error, so a test run that passes under that environment ran on
the scripted model.
"""

from __future__ import annotations

import os
import subprocess
import sys

from helpers import REPO as ROOT


def closed_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when this returns: nothing listens there


def trap_variables(dead: str = "http://127.0.0.1:9") -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "sk-fake-key-for-the-hermetic-test",
        "OPENAI_BASE_URL": f"{dead}/v1",
        "OPENAI_MODEL": "gpt-nothing",
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "GOOGLE_API_KEY": "fake",
        "LANGSMITH_TRACING": "true",
        "LANGSMITH_API_KEY": "lsv2-fake",
        "LANGSMITH_ENDPOINT": dead,
        "DEEP_AGENT_MODEL": "openai:gpt-nothing",
    }


def trap_environment() -> dict[str, str]:
    dead = f"http://127.0.0.1:{closed_port()}"
    return {**os.environ, **trap_variables(dead), "PYTHONPATH": str(ROOT)}


def test_the_test_run_sees_no_provider_keys_or_endpoints():
    leaked = sorted(set(trap_variables()) & set(os.environ))
    assert leaked == [], f"provider variables reached the tests: {leaked}"


def test_the_trap_environment_really_goes_online_outside_the_test_command():
    """Without the test command's scrub, these variables pick a real model that fails to connect."""
    probe = (
        "from deep_agent._model_choice import choose_model\n"
        "model = choose_model(None).with_retry(stop_after_attempt=1)\n"
        "try:\n    model.invoke('hi')\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n"
        "else:\n    print('answered')\n"
        # Out at once: LangSmith's flush to the dead endpoint at exit retries for some 10 s, and proves nothing more.
        "import os, sys\nsys.stdout.flush()\nos._exit(0)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=trap_environment(), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Connection" in done.stdout, done.stdout


def test_exported_keys_do_not_take_the_tests_or_notebooks_online():
    """A real notebook (it switches to a real model when OPENAI_API_KEY is set) and this file's check pass."""
    done = subprocess.run(
        # One worker, not -n auto's two per core: the scrub still runs in pytest-xdist's controller and in a
        # worker, without every core's two importing the suite for two tests.
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1",
         "tests/integration/notebooks/test_notebooks_fresh.py::"
         "test_a_notebook_executed_afresh_prints_what_it_was_committed_with[01_quickstart]",
         "tests/integration/cli/test_hermetic.py::test_the_test_run_sees_no_provider_keys_or_endpoints"],
        env=trap_environment(), cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout, done.stdout[-2000:]
