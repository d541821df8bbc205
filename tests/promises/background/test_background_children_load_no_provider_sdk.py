"""A background child loads no provider SDK its model does not belong to.

Every background child gets a copy of its model with an HTTP client of its
own, and which copy it needs depends on the model's provider class. Asking
``isinstance(model, ChatAnthropic)`` by importing ``langchain_anthropic``
loaded that SDK (3,336 modules, 1.5-1.7 s of CPU) into any process where it
was installed, whatever the model. The question is asked of ``sys.modules``
now: a model of a provider's class means its module is already loaded.
"""

from __future__ import annotations

import ast
import json
import sys

from helpers import REPO
from helpers.background import run_script
from subagents._settings import DelegationSettings

PROVIDER_SDKS = ("langchain_anthropic", "anthropic", "langchain_openai", "openai",
                 "langchain_google_genai", "google.genai")

BUILDS_A_PROVIDER_MODEL = {
    "deep_agent/_model_choice.py": {"langchain_openai"},  # the command line's OpenAI model
    "deep_agent/_local_model.py": {"langchain_openai"},  # a local server's model, an OpenAI-compatible client
    # the copy of a model of that provider, imported only for one (see with_own_async_client)
    "subagents/definitions/_models.py": {"openai", "anthropic"},
}
"""Every library module that imports a provider SDK, and which: where a model of that provider is built."""


def test_a_background_child_on_the_scripted_model_loads_no_provider_sdk() -> None:
    loaded = run_script(__file__)
    assert loaded == {"completed": True, "provider_sdks": []}


def test_only_the_modules_that_build_a_providers_model_import_its_sdk() -> None:
    """A new import of a provider SDK (an ``isinstance`` check's, say) fails here until it is listed."""
    found: dict[str, set[str]] = {}
    for package in ("subagents", "middleware", "deep_agent"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                sdks = {n.split(".")[0] for n in names if n.split(".")[0] in {s.split(".")[0] for s in PROVIDER_SDKS}}
                if sdks:
                    found.setdefault(path.relative_to(REPO).as_posix(), set()).update(sdks)
    assert found == BUILDS_A_PROVIDER_MODEL


def _run_one_child() -> None:
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    from deep_agent._testing import ScriptedChatModel, tool_call
    from middleware import BackgroundSubagentMiddleware
    from subagents.background import wait_for_background

    parent = ScriptedChatModel(rules=[("go", [{"tool_calls": [tool_call(
        "start_async_task", description="do X", subagent_type="worker")]}, "started"])], default="ok")
    worker = {"name": "worker", "description": "Works.", "model": ScriptedChatModel(default="done")}
    middleware = BackgroundSubagentMiddleware([worker], settings=DelegationSettings.of(notify=False))
    try:
        agent = create_agent(parent, middleware=[middleware], checkpointer=InMemorySaver())
        out = agent.invoke({"messages": [{"role": "user", "content": "go"}]}, {"configurable": {"thread_id": "t"}})
        completed = wait_for_background(out["async_tasks"], timeout_s=60)
    finally:
        middleware.close()
    print(json.dumps({"completed": completed, "provider_sdks": sorted(set(PROVIDER_SDKS) & set(sys.modules))}))


if __name__ == "__main__":
    _run_one_child()
