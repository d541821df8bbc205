"""A scripted chat server on loopback, for background tasks over real HTTP.

``/v1/chat/completions`` (OpenAI's API) and ``/v1/messages`` (Anthropic's)
answer by one script (see :class:`ScriptedChatServer`), streamed or not, on
keep-alive connections, as real servers do. Tests point a ``ChatOpenAI`` (or
the CLI, through ``OPENAI_BASE_URL``) at ``server.url``, a ``ChatAnthropic``
at ``server.anthropic_url``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHILD_ANSWER = "The child's answer, from the server."
STARTED = "Started it."
CARRIED_ON = "Nothing else to do."
LATENCY_S = 0.05  # every reply waits a little, so every read of a connection waits on its loop


class ScriptedChatServer:
    """A threaded server on loopback answering ``/v1/chat/completions`` and ``/v1/messages`` by script.

    A request offering ``start_async_task`` is the parent's: asked to "please
    start", it starts one background task; once the tool has answered it says
    ``STARTED`` (even if a notice of the finished task came first);
    otherwise ``CARRIED_ON``. Any other request is a child's: ``CHILD_ANSWER``.
    Streams (``"stream": true``) get the same replies as server-sent events.
    Keep-alive connections, as real servers have. ``/v1/messages`` speaks
    Anthropic's Messages API (its requests read as OpenAI's, its replies and
    events written as Anthropic's). Given ``caps``, ``/props`` answers as
    llama.cpp's server does, with them as its ``chat_template_caps``.
    """

    def __init__(self, caps: dict[str, Any] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self
        call_ids = itertools.count(1)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                # llama.cpp's /props: what its chat template renders (given ``caps``), else no such page.
                found = self.path.rstrip("/") == "/props" and caps is not None
                data = json.dumps({"chat_template_caps": caps}).encode() if found else b"{}"
                self.send_response(200 if found else 404)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                anthropic = self.path.rstrip("/").endswith("/messages")
                if anthropic:
                    body = {**body, "messages": _openai_messages(body["messages"]),
                            "tools": [{"function": t} for t in body.get("tools") or []]}
                tools = {t["function"]["name"] for t in body.get("tools") or []}
                last = body["messages"][-1]
                parent = "start_async_task" in tools
                with server._lock:
                    server.requests.append({"path": self.path, "parent": parent, "stream": bool(body.get("stream"))})
                # What the parent has done since it was asked to start (a notice of the finished task may
                # come before its next call when the child is quick): a tool result, and no answer yet.
                asked = max((i for i, m in enumerate(body["messages"])
                             if m["role"] == "user" and "please start" in str(m["content"])), default=-1)
                since = body["messages"][asked + 1:]
                started = any(m["role"] == "tool" for m in since) and not any(
                    m["role"] == "assistant" and not m.get("tool_calls") for m in since)
                if not parent:
                    reply: dict[str, Any] = {"content": CHILD_ANSWER}
                elif last["role"] == "user" and "please start" in str(last["content"]):
                    arguments = {"description": "Look it up.", "subagent_type": "general-purpose"}
                    reply = {"tool_calls": [{"id": f"call_{next(call_ids)}", "type": "function",
                                             "function": {"name": "start_async_task",
                                                          "arguments": json.dumps(arguments)}}]}
                elif started:
                    reply = {"content": STARTED}
                else:
                    reply = {"content": CARRIED_ON}
                time.sleep(LATENCY_S)
                if anthropic:
                    data, kind = (_anthropic_events(reply), "text/event-stream") if body.get("stream") else \
                        (_anthropic_message(reply), "application/json")
                else:
                    data, kind = (_events(reply), "text/event-stream") if body.get("stream") else \
                        (_completion(reply), "application/json")
                try:
                    self.send_response(200)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except ConnectionError:  # the client gave up on this connection (the failure under test)
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.anthropic_url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.url = f"{self.anthropic_url}/v1"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def child_requests(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests if not r["parent"]]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _finish(reply: dict[str, Any]) -> str:
    return "tool_calls" if "tool_calls" in reply else "stop"


def _completion(reply: dict[str, Any]) -> bytes:
    message = {"role": "assistant", "content": reply.get("content"), **({"tool_calls": reply["tool_calls"]}
                                                                       if "tool_calls" in reply else {})}
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
                       "choices": [{"index": 0, "message": message, "finish_reason": _finish(reply)}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}).encode()


def _events(reply: dict[str, Any]) -> bytes:
    delta: dict[str, Any] = {"role": "assistant"}
    if "content" in reply:
        delta["content"] = reply["content"]
    if "tool_calls" in reply:
        delta["tool_calls"] = [{"index": 0, **reply["tool_calls"][0]}]
    chunks = [{"index": 0, "delta": delta, "finish_reason": None},
              {"index": 0, "delta": {}, "finish_reason": _finish(reply)}]
    events = [json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                          "model": "scripted", "choices": [c]}) for c in chunks]
    return "".join(f"data: {e}\n\n" for e in [*events, "[DONE]"]).encode()


def _openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic's messages as OpenAI's: ``tool_result`` blocks as tool messages, ``tool_use`` as tool calls."""
    out: list[dict[str, Any]] = []
    for message in messages:
        blocks = message["content"]
        if isinstance(blocks, str):
            out.append({"role": message["role"], "content": blocks})
            continue
        results = [b for b in blocks if b.get("type") == "tool_result"]
        out.extend({"role": "tool", "content": str(b.get("content"))} for b in results)
        text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        if text or uses or not results:
            out.append({"role": message["role"], "content": text, **({"tool_calls": uses} if uses else {})})
    return out


def _anthropic_blocks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    if "tool_calls" not in reply:
        return [{"type": "text", "text": reply["content"]}]
    return [{"type": "tool_use", "id": call["id"].replace("call_", "toolu_"), "name": call["function"]["name"],
             "input": json.loads(call["function"]["arguments"])} for call in reply["tool_calls"]]


def _anthropic_stop(reply: dict[str, Any]) -> str:
    return "tool_use" if "tool_calls" in reply else "end_turn"


def _anthropic_message(reply: dict[str, Any]) -> bytes:
    return json.dumps({"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted",
                       "content": _anthropic_blocks(reply), "stop_reason": _anthropic_stop(reply),
                       "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 2}}).encode()


def _anthropic_events(reply: dict[str, Any]) -> bytes:
    events: list[dict[str, Any]] = [{"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "scripted", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 0}}}]
    for index, block in enumerate(_anthropic_blocks(reply)):
        if block["type"] == "text":
            start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        events += [{"type": "content_block_start", "index": index, "content_block": start},
                   {"type": "content_block_delta", "index": index, "delta": delta},
                   {"type": "content_block_stop", "index": index}]
    events += [{"type": "message_delta", "delta": {"stop_reason": _anthropic_stop(reply), "stop_sequence": None},
                "usage": {"output_tokens": 2}},
               {"type": "message_stop"}]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
