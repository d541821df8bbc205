"""How the command line reports what went wrong: one line; a :class:`UsageError` exits 2, anything else 1."""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import TextIO

from deep_agent.cli._terminal import printable
from subagents._errors import SubagentsError, redact_url, safe_text

MAX_MESSAGE_CHARS = 2000

# A failed request's exception class names what went wrong (httpx's and openai's: ConnectTimeout, ConnectError ...).
SERVER_ERRORS = (("Timeout", "the model server at {url} did not answer in time (raise --timeout): {text}"),
                 ("Connect", "cannot reach the model server at {url}: {text}"), ("", "{text} (request to {url})"))


class UsageError(SubagentsError):
    """A command-line argument is wrong (a missing folder, an unreadable file ...): exit 2."""


class ApprovalNeeded(SubagentsError, RuntimeError):
    """A call waits for approval and nobody can answer (stdin is not a terminal)."""


# How llama.cpp's and OpenAI's servers say a request does not fit the model's context window.
CONTEXT_OVERFLOW = ("exceeds the available context size", "maximum context length", "context_length_exceeded")

CONTEXT_HINT = ("the prompt does not fit the model's context window: use a model with a larger one, "
                "or restart `python -m deep_agent serve-model` with a larger --context")


def with_hint(text: str | None) -> str | None:
    """``text`` with what to do about it appended, for the errors a person can fix from the command line."""
    fixable = text and any(mark in text for mark in CONTEXT_OVERFLOW) and CONTEXT_HINT not in text
    return f"{text} ({CONTEXT_HINT})" if fixable else text


def describe_error(exc: BaseException) -> str:
    """One line for ``exc``; the URL tried when a request failed on the way to a server."""
    try:
        text = with_hint(safe_text(exc)) or type(exc).__name__
        url = _url_tried(exc)
        names = {type(link).__name__ for link in _chain(exc)}
        form = next(form for mark, form in SERVER_ERRORS if any(mark in name for name in names))
        text = form.format(url=url, text=text) if url else text
        return printable(" ".join(redact_url(text).split())[:MAX_MESSAGE_CHARS])
    except Exception:  # noqa: BLE001 - the failure path never raises
        return type(exc).__name__


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 20:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _url_tried(exc: BaseException) -> str | None:
    for link in _chain(exc):
        with contextlib.suppress(Exception):  # httpx raises when a request was never set
            if url := getattr(getattr(link, "request", None), "url", None):
                return str(url)
    return None


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Within the block, every warning is one ``deep-agent: warning:`` line on stderr, naming flags, not options."""
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        text = describe_error(message) if isinstance(message, Warning) else printable(" ".join(str(message).split()))
        text = text.replace("force_delegation=True", "--force-delegation")  # the library's option, as its flag
        print(f"deep-agent: warning: {text}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield
