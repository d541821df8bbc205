"""What an OpenAI-compatible model server can do with tools, read once per server.

llama.cpp's server renders tools only through the model's chat template;
when the template cannot (SmolLM2's, Gemma 3's), the server silently drops
``tools``, ignores ``tool_choice`` and parses no tool call. It says so on
``GET /props`` (``chat_template_caps.supports_tool_calls``). Forced
delegation reads it at first use and goes straight to the JSON-schema
mechanism, rather than paying one wasted call to find out. Left to the model
(no forced delegation), delegation cannot happen at all on such a server:
:func:`warn_if_no_tool_calls` says so, once per base url.

Example::

    tool_calls_supported(chat_model)   # False for SmolLM2 on llama.cpp; None when the server does not say
    warn_if_no_tool_calls(chat_model)  # a ToolCallsUnsupported warning, the first time for its server
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import warnings
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from subagents.errors import ToolCallsUnsupported

PROBE_TIMEOUT_S = 2.0
"""How long the one request to ``/props`` may take (a server that does not answer is asked no more)."""

_known: dict[str, bool | None] = {}
_warned: set[str] = set()
_lock = threading.Lock()
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def base_url_of(model: Any) -> str | None:
    """The base url of an OpenAI-compatible chat model (``ChatOpenAI``'s public ``openai_api_base``), if any."""
    url = getattr(model, "openai_api_base", None)
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def tool_calls_supported(model: Any) -> bool | None:
    """Whether the model's server parses tool calls: ``True``/``False`` as it says, ``None`` when unknown.

    Asked once per base url and process (the answer is cached, a failure too).
    Only a loopback server is asked without being a llama.cpp server for
    sure: a hosted API is never sent a request it does not expect.
    """
    url = base_url_of(model)
    if url is None:
        return None
    with _lock:
        if url in _known:
            return _known[url]
    found = _probe(url)
    with _lock:
        _known[url] = found
    return found


def probe_pending(model: Any) -> bool:
    """Whether :func:`tool_calls_supported` would ask a server (so an async caller runs it off the loop)."""
    url = base_url_of(model)
    with _lock:
        return url is not None and url not in _known


def warn_if_no_tool_calls(model: Any) -> None:
    """Issue :class:`~subagents.errors.ToolCallsUnsupported` if the model's server parses no tool call.

    Once per base url and process, however many agents use it; a server
    that does not say, or says it parses them, gets no warning.
    """
    url = base_url_of(model)
    if url is None:
        return
    with _lock:
        if url in _warned:
            return
    if tool_calls_supported(model) is not False:
        return
    with _lock:
        if url in _warned:
            return
        _warned.add(url)
    warnings.warn(ToolCallsUnsupported(url), stacklevel=3)


def _probe(url: str) -> bool | None:
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    path = parts.path.rstrip("/")
    root = path[: -len("/v1")] if path.endswith("/v1") else path
    try:
        with _DIRECT.open(urlunsplit((parts.scheme, parts.netloc, root + "/props", "", "")),
                          timeout=PROBE_TIMEOUT_S) as answer:
            props = json.loads(answer.read(1 << 20))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    caps = props.get("chat_template_caps") if isinstance(props, dict) else None
    if not isinstance(caps, dict) or not isinstance(caps.get("supports_tool_calls"), bool):
        return None
    return bool(caps["supports_tool_calls"] and caps.get("supports_tools", True))
