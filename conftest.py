"""The test command is hermetic: no provider key or endpoint from the caller's shell reaches a test.

Exporting ``OPENAI_API_KEY`` (or ``OPENAI_BASE_URL``, an Anthropic or Google
key, LangSmith tracing...) must never make ``pytest`` go online: the tests,
the CLI subprocesses they start and the notebook kernels they launch all
inherit this process's environment, and all of them pick a real model or
send traces when such a variable is set. So they are removed before anything
runs. This file sits at the top of the repository so it applies whichever
paths pytest is given (``tests/``, ``docs/`` or one file).
"""

from __future__ import annotations

import os

# Imported now, not by hypothesis's plugin at the terminal summary: that late import makes pytest
# rewrite (ast.parse) hypothesis's modules at the very end of the session, and CPython 3.11's ast
# module then fails now and then with "SystemError: AST constructor recursion depth mismatch"
# (its recursion counter is shared interpreter state), an INTERNALERROR after every test passed.
import hypothesis.internal.observability  # noqa: F401
import pytest
from hypothesis import HealthCheck, settings
from sybil import Sybil
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

# Hypothesis's timing heuristics measure the machine, not the code: on a loaded machine a strategy
# that draws in 1 s draws in 7 (the too_slow health check failed there), and an example that runs
# in 50 ms runs past the 200 ms default deadline. Tests that want a bound on time assert it.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

# Variables that select or reach a model provider or a tracing service.
PROVIDER_PREFIXES = (
    "OPENAI_", "AZURE_OPENAI_", "ANTHROPIC_", "GOOGLE_API_", "GEMINI_", "MISTRAL_", "GROQ_",
    "COHERE_", "TOGETHER_", "FIREWORKS_", "DEEPSEEK_", "XAI_", "OPENROUTER_", "OLLAMA_", "HUGGINGFACEHUB_",
    "LANGSMITH_", "LANGCHAIN_", "DEEP_AGENT_MODEL",
)


def provider_variables(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """The names in ``environ`` that could make a test use a real model or service."""
    return sorted(
        name for name in environ
        if name.upper().startswith(PROVIDER_PREFIXES) or name.upper().endswith(("_API_KEY", "_API_TOKEN"))
    )


def pytest_configure(config: pytest.Config) -> None:
    for name in provider_variables(os.environ):
        del os.environ[name]


# Every Python code block of the README and the docs runs, top to bottom, one namespace per file, so
# an example cannot rot. Its setup is visible: a reader copies what they see, so no hidden block
# (tests/integration/docs/test_docs_examples_run_as_shown.py runs each page's blocks in one fresh file);
# a block that cannot run here (a server's own file, a real provider) carries `<!-- skip: next "why" -->`.
def _restore_cwd(namespace: dict[str, object]) -> None:
    """A page that works in a folder of its own saves the old one as ``_cwd``: back to it, pass or fail."""
    if isinstance(saved := namespace.get("_cwd"), str):
        os.chdir(saved)


pytest_collect_file = Sybil(
    parsers=[PythonCodeBlockParser(), SkipParser()],
    patterns=["README.md", "docs/*.md"],
    teardown=_restore_cwd,
).pytest()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The README's and docs' code blocks are marked ``docs``.

    A page's blocks share one namespace, top to bottom, so they must run in one
    process and in order: each page is one ``xdist_group`` (``--dist loadgroup``
    sends a group to a single worker, which keeps collection order).
    """
    for item in items:
        if item.path.suffix == ".md":
            item.add_marker("docs")
            item.add_marker(pytest.mark.xdist_group(name=f"page:{item.path}"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers per core, at most 16.

    About half of a worker's time is waiting, not computing: timeouts under
    test, subprocesses and servers starting, pseudo-terminals. A second worker
    per core runs while the first one waits (on 2 cores: 4 workers, 5.3
    instead of 6 minutes).
    """
    return min(2 * (os.cpu_count() or 1), 16)
