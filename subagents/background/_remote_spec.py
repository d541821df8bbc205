"""A background subagent served by a LangGraph Server: where it is, what is sent, how long to wait.

What goes over the wire is exactly what the spec says, nothing from the
environment: ``headers`` with every request, plus ``x-api-key`` only when
``api_key`` (the key itself) or ``api_key_env`` (the name of an environment
variable holding it) is set. ``langgraph-sdk`` on its own would load
``LANGGRAPH_API_KEY``/``LANGSMITH_API_KEY``/``LANGCHAIN_API_KEY`` and send
it to any url; we never let it.

``timeout_s`` bounds each status request (a poll, a check, a list);
``start_timeout_s`` bounds starting, steering and cancelling a task.

Example::

    spec = RemoteSubagentSpec(name="researcher", description="Researches at scale.",
                              graph_id="researcher", url="https://agents.example.com",
                              api_key_env="RESEARCH_SERVER_KEY", timeout_s=5)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from subagents._spec import NAME_PATTERN

DEFAULT_TIMEOUT_S = 10.0
"""Default bound on one status request to a server."""

DEFAULT_START_TIMEOUT_S = 30.0
"""Default bound on starting, steering or cancelling a remote task."""

API_KEY_HEADER = "x-api-key"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


class RemoteConfigError(ValueError):
    """A remote spec cannot be used as configured (say, its ``api_key_env`` is not set)."""


class RemoteSubagentSpec(BaseModel):
    """A background subagent served by a LangGraph Server.

    Args:
        name, description: as for a local subagent.
        graph_id: the graph (or assistant id) on the server.
        url: the server's base URL, ``http://`` or ``https://`` with a host.
        headers: sent with every request to this server, and nothing else is
            (no key is read from the environment unless ``api_key_env`` names it).
        api_key: sent as ``x-api-key``; never shown in a repr.
        api_key_env: the environment variable holding the key, read when the
            first request is made (an unset variable fails that request).
        timeout_s: bound on each status request (poll, check, list).
        start_timeout_s: bound on starting, steering or cancelling a task.
        config: the run config sent with each run (``{"recursion_limit": 50}``).
        metadata: more metadata for each task's server thread.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    graph_id: str
    url: str
    headers: Mapping[str, str] = Field(default_factory=dict)
    api_key: SecretStr | None = None
    api_key_env: str | None = None
    timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0, le=3600)
    start_timeout_s: float = Field(default=DEFAULT_START_TIMEOUT_S, gt=0, le=3600)
    config: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not NAME_PATTERN.fullmatch(value):
            raise ValueError(f"name must be a slug of letters, digits, '-' and '_' (got {value[:80]!r})")
        return value

    @field_validator("description", "graph_id")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return value

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return checked_url(value)

    @field_validator("headers")
    @classmethod
    def _header_lines(cls, value: Mapping[str, str]) -> Mapping[str, str]:
        for key, text in value.items():
            if not _HEADER_NAME.fullmatch(key):
                raise ValueError(f"header name {key[:80]!r} is not a valid HTTP header name")
            if (problem := header_value_problem(text)) is not None:
                raise ValueError(f"header {key!r} {problem}")
        return value

    @field_validator("api_key")
    @classmethod
    def _key_text(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and (problem := header_value_problem(value.get_secret_value())) is not None:
            raise ValueError(f"the key {problem} (it is sent as the {API_KEY_HEADER} header)")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError(f"must be an environment variable name (got {value[:80]!r})")
        return value

    @model_validator(mode="after")
    def _one_key_source(self) -> RemoteSubagentSpec:
        sources = [n for n, on in (("api_key", self.api_key is not None),
                                   ("api_key_env", self.api_key_env is not None),
                                   ("headers['x-api-key']", _has_key_header(self.headers))) if on]
        if len(sources) > 1:
            raise ValueError(f"give the API key one way only, not {' and '.join(sources)}")
        return self

    def request_headers(self) -> dict[str, str]:
        """Every header this spec's requests carry (the key included, if one is configured)."""
        headers = dict(self.headers)
        if self.api_key is not None:
            headers[API_KEY_HEADER] = self.api_key.get_secret_value()
        elif self.api_key_env is not None:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise RemoteConfigError(
                    f"remote subagent {self.name!r}: api_key_env names {self.api_key_env!r}, "
                    "which is not set in the environment"
                )
            if (problem := header_value_problem(key)) is not None:
                raise RemoteConfigError(f"remote subagent {self.name!r}: the key in {self.api_key_env!r} {problem} "
                                        f"(it is sent as the {API_KEY_HEADER} header)")
            headers[API_KEY_HEADER] = key
        return headers


def header_value_problem(text: str) -> str | None:
    """Why ``text`` cannot be sent as an HTTP header value (HTTP clients send ASCII only), or ``None``.

    A value that begins or ends with a space or tab is no header value
    either (the HTTP/1.1 client refuses it as a protocol error, which reads
    as the server being unreachable).
    """
    if "\r" in text or "\n" in text:
        return "must not contain line breaks"
    bad = next((c for c in text if not (" " <= c <= "~" or c == "\t")), None)
    if bad is not None:
        return f"must be printable ASCII (it holds {bad!r}, U+{ord(bad):04X})"
    if text != text.strip(" \t"):
        return "must not begin or end with a space or tab"
    return None


def checked_url(value: str) -> str:
    """``value`` without a trailing slash if it is an http(s) URL with a host; else ``ValueError``."""
    text = value.strip() if isinstance(value, str) else ""
    try:
        parts = urlsplit(text)
        host = parts.hostname
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        parts, host = None, None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ValueError(
            f"url must be an http:// or https:// URL with a host, such as http://127.0.0.1:2024 "
            f"(got {str(value)[:120]!r})"
        )
    return text.rstrip("/")


def _has_key_header(headers: Mapping[str, str]) -> bool:
    return any(k.lower() == API_KEY_HEADER for k in headers)
