"""Start-up notes about the agent folders: shown once per change of those folders, not on every run.

Said on every run they become noise that hides the new one: a hash of the notes and of their agent files
is kept per folder beside the trust answers.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from deep_agent.cli.folder_trust import TrustRecord, config_dir, fingerprint

NOTES_FILE = "seen-notes.json"


def notes_unseen(folder: Path, notes: Sequence[str], files: Iterable[Path], *, config: Path | None = None) -> bool:
    """True when ``notes`` about ``folder``'s agent files have not been shown since they or the files changed;
    records them as seen (an unusable config folder shows them: twice beats never)."""
    if not notes:
        return False
    digest = hashlib.sha256(("\0".join(notes) + "\0" + fingerprint(files)).encode()).hexdigest()
    record = TrustRecord(config or config_dir(), NOTES_FILE)
    with contextlib.suppress(OSError, ValueError):
        if record.is_trusted(folder, digest):
            return False
        record.trust(folder, digest)
    return True
