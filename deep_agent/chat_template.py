"""A chat template that renders tools, for models whose own template does not (or that have none).

llama.cpp's server renders a request's ``tools`` only through the model's
chat template, and parses tool calls only in a format that template shows.
SmolLM2's template renders no tools; Gemma 3 270M's base GGUF has no
template at all: the server then drops ``tools``, parses no call, and says
so on ``/props`` (``chat_template_caps.supports_tool_calls: false``).

``chatml-tools`` is ChatML (``<|im_start|>role ... <|im_end|>``, SmolLM2's
own turn format) with tools in the Hermes format that llama.cpp recognises
(as it does for Qwen 2.5 and Hermes 2 Pro): the tools' JSON schemas listed
in the system turn inside ``<tools></tools>``, each call written by the
model as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, each
result given back in a user turn inside ``<tool_response></tool_response>``.
With it the server parses the model's calls into ``tool_calls``, and
``tool_choice`` (``"required"``, a named tool) constrains the reply by
grammar.

Serve a model with it::

    python -m deep_agent.local_model --port 8080 --chat-template chatml-tools

or give llama.cpp's own server the same text: ``llama-server --jinja
--chat-template-file chatml-tools.jinja`` (``python -c "from
deep_agent.chat_template import TEMPLATES; print(TEMPLATES['chatml-tools'])"
> chatml-tools.jinja``).
"""

from __future__ import annotations

from pathlib import Path

from subagents.errors import SubagentsError

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
"""ChatML with Hermes-format tools (see the module docstring)."""

TEMPLATES: dict[str, str] = {"chatml-tools": CHATML_TOOLS}
"""The chat templates shipped, by the name ``--chat-template`` takes."""


class ChatTemplateError(SubagentsError, ValueError):
    """A ``--chat-template`` that is neither a shipped name nor a readable template file."""


def chat_template_text(value: str) -> str:
    """The Jinja text of a shipped template's name, or of a template file at that path.

    Example::

        chat_template_text("chatml-tools")      # the shipped ChatML + Hermes tools template
        chat_template_text("my-template.jinja")  # a file of your own
    """
    if value in TEMPLATES:
        return TEMPLATES[value]
    path = Path(value)
    if not path.is_file():
        raise ChatTemplateError(
            f"--chat-template: {value!r} is neither a shipped template ({', '.join(sorted(TEMPLATES))}) "
            "nor a template file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ChatTemplateError(f"--chat-template: cannot read {value!r}: {exc}") from None
    if not text.strip():
        raise ChatTemplateError(f"--chat-template: {value!r} is empty")
    return text
