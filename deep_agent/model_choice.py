"""Which chat model the CLI and the Studio graph run on.

In order: an explicit ``provider:model`` string; else the environment
(``OPENAI_API_KEY``, with ``OPENAI_BASE_URL`` for any OpenAI-compatible
server such as vLLM, llama.cpp or Ollama, and ``OPENAI_MODEL`` for the model
name); else :class:`NoModelConfigured`, whose message says how to configure
one. ``DEEP_AGENT_SCRIPTED=1`` (or ``--model scripted``) selects the offline
scripted model of the demo; ``--model scripted:package.module:factory``
calls ``factory()`` for a scripted model of your own, for tests.

Example::

    model = choose_model("openai:gpt-4.1-mini")
    model = choose_model(None, env={"OPENAI_API_KEY": "sk-...", "OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"})
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from subagents.errors import SubagentsError

DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
SCRIPTED = "scripted"

HOW_TO_CONFIGURE = (
    "no chat model is configured. Pass --model provider:name (for example "
    "--model openai:gpt-4.1-mini), or set OPENAI_API_KEY (plus OPENAI_BASE_URL for an "
    "OpenAI-compatible server such as vLLM, llama.cpp or Ollama, and OPENAI_MODEL for "
    "the model name). To try it offline, run: deep-agent demo"
)


class NoModelConfigured(SubagentsError, RuntimeError):
    """No model was named and the environment names none."""


def choose_model(
    name: str | None,
    env: Mapping[str, str] | None = None,
    *,
    timeout: float | None = None,
    max_tokens: int | None = None,
) -> Any:
    """The chat model to run, from ``name`` or the environment.

    ``timeout`` (seconds per request) and ``max_tokens`` (output tokens per
    call) go to the model's constructor when given.
    """
    env = os.environ if env is None else env
    if name == SCRIPTED or (name is None and env.get("DEEP_AGENT_SCRIPTED") == "1"):
        from deep_agent.demo import demo_model

        return demo_model()
    if name and name.startswith(SCRIPTED + ":"):
        return _scripted_factory(name.partition(":")[2])
    if name:
        from langchain.chat_models import init_chat_model

        if ":" not in name:
            raise ValueError(f"--model: expected provider:name (for example openai:gpt-4.1-mini), got {name!r}")
        return init_chat_model(name, **_limits(timeout, max_tokens))
    if env.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(
            model=env.get("OPENAI_MODEL", DEFAULT_OPENAI_MODEL),
            base_url=env.get("OPENAI_BASE_URL") or None,
            api_key=env["OPENAI_API_KEY"],
            **_limits(timeout, max_tokens),
        )
    raise NoModelConfigured(HOW_TO_CONFIGURE)


def _limits(timeout: float | None, max_tokens: int | None) -> dict[str, Any]:
    limits: dict[str, Any] = {}
    if timeout is not None:
        limits["timeout"] = timeout
    if max_tokens is not None:
        limits["max_tokens"] = max_tokens
    return limits


def _scripted_factory(target: str) -> Any:
    import importlib

    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"--model scripted:MODULE:FACTORY expected, got 'scripted:{target}'")
    try:
        factory = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--model scripted:{target}: cannot load the factory ({exc})") from None
    return factory()
