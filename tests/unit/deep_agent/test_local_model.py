"""The shipped chat template renders tools and tool calls in the Hermes format, and the server command takes it.

llama.cpp's server renders ``tools`` only through the model's template and
parses calls only in the format that template shows; SmolLM2's renders no
tools. ``python -m deep_agent serve-model --chat-template chatml-tools``
replaces it (as llama-server's ``--jinja --chat-template-file``).
"""

from __future__ import annotations

import importlib.util
import json

import jinja2
import pytest

from deep_agent import _local_model as local_model
from deep_agent._local_model import CHATML_TOOLS, TEMPLATES, ChatTemplateError, chat_template_text

TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Look up a fact.",
                                           "parameters": {"type": "object", "properties": {"key": {"type": "string"}}}}}]


def render(messages: list[dict[str, object]], tools: object = None) -> str:
    """As llama.cpp renders it (its ``tojson`` writes ``", "`` and ``": "`` separators, as ``json.dumps``)."""
    env = jinja2.Environment()
    env.filters["tojson"] = json.dumps
    return env.from_string(CHATML_TOOLS).render(messages=messages, tools=tools, add_generation_prompt=True)


def test_tools_calls_and_results_render_in_the_hermes_format_inside_chatml_turns():
    prompt = render([
        {"role": "system", "content": "Be exact."},
        {"role": "user", "content": "Find alpha."},
        {"role": "assistant", "content": None,
         "tool_calls": [{"type": "function", "function": {"name": "lookup", "arguments": {"key": "alpha"}}}]},
        {"role": "tool", "content": "7741"},
        {"role": "assistant", "content": "It is 7741."},
    ], TOOLS)
    assert prompt.startswith("<|im_start|>system\nBe exact.\n\n")
    assert f"<tools>{json.dumps(TOOLS[0])}</tools>" in prompt.replace("\n", "")
    assert '<|im_start|>assistant\n<tool_call>\n{"name": "lookup", "arguments": {"key": "alpha"}}\n' \
           '</tool_call><|im_end|>\n' in prompt
    assert "<|im_start|>user\n<tool_response>\n7741\n</tool_response><|im_end|>\n" in prompt
    assert prompt.endswith("<|im_start|>assistant\nIt is 7741.<|im_end|>\n<|im_start|>assistant\n")
    assert "<function-name>" not in prompt  # no placeholder a small model could copy


def test_without_tools_it_is_plain_chatml():
    assert render([{"role": "user", "content": "Hi."}]) == "<|im_start|>user\nHi.<|im_end|>\n<|im_start|>assistant\n"


def test_a_name_gives_the_shipped_text_a_path_its_file_and_anything_else_an_error(tmp_path):
    assert chat_template_text("chatml-tools") is TEMPLATES["chatml-tools"]
    own = tmp_path / "own.jinja"
    own.write_text("{{ messages[0].content }}")
    assert chat_template_text(str(own)) == "{{ messages[0].content }}"
    (tmp_path / "empty.jinja").write_text("  \n")
    for bad in ["chatml-tool", str(tmp_path / "empty.jinja")]:
        with pytest.raises(ChatTemplateError, match="--chat-template"):
            chat_template_text(bad)


def test_the_server_command_refuses_an_unknown_template_naming_the_option(capsys):
    """Before: no --chat-template option (argparse exits 2 on the unknown flag, without this message)."""
    with pytest.raises(SystemExit) as exited:
        local_model.main(["--chat-template", "no-such-template"])
    assert exited.value.code == 2
    assert "--chat-template: 'no-such-template' is neither a shipped template (chatml-tools)" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None, reason="xllamacpp (the realmodel extra)")
def test_the_server_is_built_with_the_template_as_llama_servers_jinja_chat_template_file(tmp_path):
    """Before: the parameters the command started llama.cpp with never held a template of ours."""
    weights = tmp_path / "model.gguf"  # the parameters only name it; nothing is loaded
    params = local_model.server_params(port=8080, model_path=weights, chat_template=chat_template_text("chatml-tools"))
    assert params.use_jinja and params.chat_template == CHATML_TOOLS
    assert local_model.server_params(port=8080, model_path=weights).chat_template == ""  # the model's own
