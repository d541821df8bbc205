"""File paths built from ids (threads, tasks, agent names) that stay inside their folder.

Any id -- a string with ``..`` or slashes, an absolute path, a ``uuid.UUID``,
an ``int`` -- becomes one safe path component: kept as it is when it is a
plain name, otherwise replaced by a readable prefix and a hash of the whole.

Example::

    safe_component("../../etc")          # 'id-etc-5d41402abc4b2a76...'
    inside(root, root / "a" / "b.jsonl")  # the resolved path, or ValueError
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,119}")


def safe_component(value: object) -> str:
    """One path component for ``value``: never empty, ``.``/``..``, absolute or nested."""
    text = str(value)
    if _PLAIN.fullmatch(text) and ".." not in text:
        return text
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:40]
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"id-{readable}-{digest}" if readable else f"id-{digest}"


def inside(root: Path, path: Path) -> Path:
    """``path`` resolved, checked to lie under ``root`` (resolved too); else ``ValueError``."""
    resolved_root = root.resolve()
    resolved = path.resolve()
    if resolved != resolved_root and resolved_root not in resolved.parents:
        raise ValueError(f"path {str(path)[:200]!r} leaves its folder {str(resolved_root)!r}")
    return resolved
