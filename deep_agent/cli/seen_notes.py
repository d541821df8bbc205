"""Start-up notes about the agent folders: shown once per change of those folders, not on every run.

``deep-agent run`` notes what it makes of your agent files (a Claude model
alias run on the run's model, a tool no built-in provides, a misplaced
folder). Said on every run they become noise that hides the note that is
new, so the hash of the notes and of the agent files they came from is kept
per project folder in the config directory, next to the folder-trust
answers (``seen-notes.json``), and the notes are shown again only when one of
them changes. ``run --quiet`` shows no start-up note at all.

Example::

    if notes_unseen(project, notes, files):   # True once, then False until a file or note changes
        for note in notes:
            print("note:", note)
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from deep_agent.cli.folder_trust import TrustRecord, config_dir, fingerprint

NOTES_FILE = "seen-notes.json"


def notes_unseen(folder: Path, notes: Sequence[str], files: Iterable[Path], *, config: Path | None = None) -> bool:
    """True when ``notes`` about ``folder``'s agent files have not been shown since they or the files changed.

    Records them as seen. A config folder that cannot be read or written
    shows the notes (a note shown twice beats one never shown).
    """
    if not notes:
        return False
    digest = hashlib.sha256(("\0".join(notes) + "\0" + fingerprint(files)).encode()).hexdigest()
    record = TrustRecord(config or config_dir(), NOTES_FILE)
    try:
        if record.is_trusted(folder, digest):
            return False
        record.trust(folder, digest)
    except (OSError, ValueError):
        pass
    return True
