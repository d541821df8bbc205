"""What a Mercurial repository's ``.hg/hgrc`` (Sapling's ``.sl/config``) names is protected, as a git config's is.

``hg status`` reads ``.hg/hgrc``, the files it ``%include``s, and runs its
``[hooks]`` commands, on the host; ``sl status`` the same from ``.sl/config``.
Before: ``.hg`` (``.sl``) was protected but not what its config names, so a
command added a hook to an included ``../shared.rc`` or rewrote the script a
hook runs.
"""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("config", [".hg/hgrc", ".sl/config"])
def test_an_included_file_and_a_hooks_script_are_never_written(runner, config):
    ws = runner.ws
    (ws / config).parent.mkdir()
    (ws / config).write_text("%include ../shared.rc\n[hooks]\npost-status = sh scripts/post.sh\n")
    (ws / "shared.rc").write_text("[ui]\nusername = me\n")
    (ws / "scripts").mkdir()
    (ws / "scripts" / "post.sh").write_text("true\n")
    runner.chown(ws)
    out = runner.run("echo '[hooks]' >> shared.rc; echo evil > scripts/post.sh; echo made > scripts/other.sh; "
                     "echo done")
    assert "done" in out and (ws / "shared.rc").read_text() == "[ui]\nusername = me\n", out
    assert (ws / "scripts" / "post.sh").read_text() == "true\n", out
    assert (ws / "scripts" / "other.sh").exists(), out  # the rest of the folder stays work
