"""``ChatOpenAI`` for OpenAI-compatible servers with older request habits.

``ChatOpenAI`` sends what OpenAI's API expects today. Two of its habits
trip some OpenAI-compatible servers:

* an assistant message that calls tools goes out with ``"content": null``
  (llama-cpp-python's server answers HTTP 500);
* the reply cap goes out as ``max_completion_tokens``, which older servers
  ignore (llama-cpp-python's again: one call ran 3,766 tokens).

llama.cpp's own server (``llama-server``, ``xllamacpp``) accepts both, so
plain ``ChatOpenAI`` is right for it. For the cap alone a ``ChatOpenAI``
setting already works: ``ChatOpenAI(..., extra_body={"max_tokens": 256})``
(leave ``max_tokens`` unset). No setting changes the ``null`` content; this
class does both.

Example::

    from deep_agent.openai_compatible import OpenAICompatibleChat

    model = OpenAICompatibleChat(model="local", base_url="http://127.0.0.1:8000/v1",
                                 api_key="local", max_tokens=256)
    agent = create_deep_agent(model, force_delegation=True)
"""

from __future__ import annotations

from typing import Any

from langchain_openai import ChatOpenAI


def compatible_payload(payload: dict[str, Any], *, empty_content: bool = True,
                       legacy_max_tokens: bool = True) -> dict[str, Any]:
    """A chat-completions payload rewritten for older OpenAI-compatible servers.

    ``empty_content``: ``""`` instead of ``null`` message content.
    ``legacy_max_tokens``: ``max_tokens`` instead of ``max_completion_tokens``.
    """
    payload = dict(payload)
    if empty_content and isinstance(payload.get("messages"), list):
        payload["messages"] = [
            {**m, "content": ""} if isinstance(m, dict) and "content" in m and m["content"] is None else m
            for m in payload["messages"]
        ]
    if legacy_max_tokens and "max_completion_tokens" in payload:
        cap = payload.pop("max_completion_tokens")
        payload.setdefault("max_tokens", cap)
    return payload


class OpenAICompatibleChat(ChatOpenAI):
    """``ChatOpenAI`` that sends ``""`` for empty content and ``max_tokens`` for the cap.

    Args:
        empty_content: send ``""`` where ``ChatOpenAI`` sends ``null``.
        legacy_max_tokens: send ``max_tokens`` instead of ``max_completion_tokens``.

    Every other argument is ``ChatOpenAI``'s. Chat Completions only (the
    Responses API payload is left unchanged).
    """

    empty_content: bool = True
    legacy_max_tokens: bool = True

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "messages" not in payload:  # the Responses API: not ours to change
            return payload
        return compatible_payload(payload, empty_content=self.empty_content,
                                  legacy_max_tokens=self.legacy_max_tokens)
