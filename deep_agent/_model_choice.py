"""Which chat model the CLI and the Studio graph run on. In order: an explicit ``provider:model``; an OpenAI-compatible
server (``--base-url`` or ``OPENAI_BASE_URL``; no key needed on loopback); OpenAI (``OPENAI_API_KEY``); else
:class:`NoModelConfigured`. ``--model scripted`` (or ``DEEP_AGENT_SCRIPTED=1``) is the demo's offline model;
``scripted:package.module:factory`` calls ``factory()``."""

from __future__ import annotations

import contextlib
import importlib
import ipaddress
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from subagents._errors import SpecError, SubagentsError

DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
SCRIPTED = "scripted"

HOW_TO_CONFIGURE = (
    "no chat model is configured. Pass --model provider:name (for example "
    "--model openai:gpt-4.1-mini), or set OPENAI_API_KEY, or name an OpenAI-compatible "
    "server such as vLLM, llama.cpp or Ollama with --base-url URL (or OPENAI_BASE_URL; "
    "--model NAME or OPENAI_MODEL for the model name; no key needed on a loopback address). "
    "To try it offline, run: deep-agent demo"
)


class NoModelConfigured(SubagentsError, RuntimeError):
    """No model was named and the environment names none."""


def choose_model(name: str | None, env: Mapping[str, str] | None = None, *, timeout: float | None = None,
                 max_tokens: int | None = None, base_url: str | None = None, api_key_env: str | None = None,
                 retries: int = 0) -> Any:
    """The chat model to run, from ``name``, ``base_url`` or the environment; ``timeout`` bounds one call *including
    its retries*; with a server, ``name`` may be its own model name and its key is read from ``api_key_env``."""
    env = os.environ if env is None else env
    if name == SCRIPTED or (name is None and env.get("DEEP_AGENT_SCRIPTED") == "1"):
        from deep_agent._demo import demo_model

        return demo_model()
    if name and name.startswith(SCRIPTED + ":"):
        target = name.partition(":")[2]
        module, _, attr = target.partition(":")
        if not module or not attr:
            raise SpecError(f"--model scripted:MODULE:FACTORY expected, got 'scripted:{target}'")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise SpecError(f"--model scripted:{target}: cannot load the factory ({exc})") from None
        return factory()
    limits = model_limits(timeout, max_tokens, retries)
    server = base_url or env.get("OPENAI_BASE_URL") or None
    if name and not base_url and (":" in name or not server):
        from langchain.chat_models import init_chat_model

        if ":" not in name:
            raise SpecError(f"--model: expected provider:name (for example openai:gpt-4.1-mini), or a server's "
                            f"model name with --base-url URL, got {name!r}")
        return init_chat_model(name, **limits)
    key = env.get(api_key_env or "OPENAI_API_KEY")
    if not key:
        if api_key_env:
            raise SpecError(f"--api-key-env {api_key_env}: the variable {api_key_env} is not set")
        if server is None or not _loopback(server):
            if server is not None and (base_url or name):
                raise SpecError(f"--base-url {server}: not a loopback address, so a key is needed: "
                                "set OPENAI_API_KEY (or name another variable with --api-key-env NAME)")
            raise NoModelConfigured(HOW_TO_CONFIGURE)
        key = "not-needed"  # a local server (llama.cpp, Ollama, vLLM) checks no key; the client wants one
    from langchain_openai import ChatOpenAI

    model_name = (name.removeprefix("openai:") if name else None) or env.get("OPENAI_MODEL", DEFAULT_OPENAI_MODEL)
    return ChatOpenAI(model=model_name, base_url=server, api_key=key, **limits)


def _loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    with contextlib.suppress(ValueError):
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    return False


def model_limits(timeout: float | None, max_tokens: int | None, retries: int) -> dict[str, Any]:
    return {"max_retries": retries, **({} if timeout is None else {"timeout": timeout / (retries + 1)}),
            **({} if max_tokens is None else {"max_tokens": max_tokens})}
