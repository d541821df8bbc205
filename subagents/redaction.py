"""Url credentials out of every text a model, a record or a log can see.

A remote spec's url may carry a password (``http://svc:PASSWORD@host``); the
errors that name the server, and the HTTP client's own exception texts,
would otherwise put it into the message the model reads, and from there into
checkpointed history, ledger records and transcripts. Every place a url
reaches text goes through :func:`redact_url`.

Example::

    redact_url("could not reach http://svc:hunter2@10.0.0.5:2024/runs")
    # 'could not reach http://svc:***@10.0.0.5:2024/runs'
    redact_url("https://ghp_token@example.com")
    # 'https://***@example.com'
"""

from __future__ import annotations

import re

# Greedy up to the last "@" of the authority: a password may itself hold "@".
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)([^/?#\s]*)@")


def _hide(match: re.Match[str]) -> str:
    user, colon, _secret = match.group(2).partition(":")
    # A user name alone is often a token, so it goes too; with a password the user name stays as a clue.
    return f"{match.group(1)}{user}:***@" if colon else f"{match.group(1)}***@"


def redact_url(text: str) -> str:
    """``text`` with the user information of every url in it replaced by ``***``."""
    return _USERINFO.sub(_hide, text)
