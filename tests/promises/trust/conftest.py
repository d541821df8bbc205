"""The sandbox's users: each sandbox check runs as root and as an unprivileged user, in the same run."""

from __future__ import annotations

import gc
import os
import pwd
import shutil
import subprocess
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import Sandbox


class Runner:
    """Runs commands in the sandbox as one user, in a workspace that user owns."""

    def __init__(self, who: str, workspace: Path, popen: dict[str, Any]) -> None:
        self.who, self.ws, self.popen = who, workspace, popen
        self.set_aside: list[Path] = []  # what the commands made that was set aside

    def run(self, command: str, *, network: bool = False, protected: Protected | None = None,
            pass_env: tuple[str, ...] = ()) -> str:
        sandbox = Sandbox.find(network=network, pass_env=pass_env)
        assert sandbox is not None
        with sandbox.running(self.ws, command, protected, set_aside=self.set_aside, cwd=self.ws,
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             **self.popen) as process:
            out, _ = process.communicate(timeout=60)
        return str(out.decode("utf-8", "replace"))

    def in_a_process(self, body: Callable[[], str]) -> str:
        """What ``body`` returns, run in a forked process of this user (root ignores the write bits), in the
        workspace; its traceback fails the test."""
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            # What the worker made stays out of the child's garbage collection: a background runtime's portal
            # collected here would wait forever for its loop thread, which a forked child does not have.
            gc.freeze()
            code = 1
            try:
                os.close(read)
                if "user" in self.popen:
                    os.setgid(self.popen["group"])
                    os.setuid(self.popen["user"])
                os.chdir(self.ws)
                os.write(write, body().encode())
                code = 0
            except BaseException:
                os.write(write, traceback.format_exc().encode())
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            said = pipe.read().decode()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, said
        return said

    def chown(self, *paths: Path) -> None:
        if "user" in self.popen:
            for path in paths:
                for folder, dirs, files in os.walk(path):
                    for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                        os.lchown(name, self.popen["user"], self.popen["group"])


@pytest.fixture(params=["root", "unprivileged"])
def runner(request: pytest.FixtureRequest) -> Iterator[Runner]:
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (Debian's bubblewrap package)")
    popen: dict[str, Any] = {}
    if request.param == "root" and os.getuid() != 0:
        pytest.skip("the tests run unprivileged: the root case needs the tests to run as root")
    if request.param == "unprivileged" and os.getuid() == 0:
        nobody = pwd.getpwnam("nobody")
        popen = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    # Under /tmp, reachable by that user (pytest's own tmp_path is private to the user running the tests).
    workspace = Path(tempfile.mkdtemp(prefix="sandbox-ws-"))
    workspace.chmod(0o755)
    made = Runner(request.param, workspace, popen)
    made.chown(workspace)
    yield made
    shutil.rmtree(workspace, ignore_errors=True)
