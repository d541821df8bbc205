"""Bash runs in one sandbox profile, whatever the uid: the same checks as root and as an unprivileged user.

Before: bwrap started by root kept almost every capability (a command could
``umount -l /tmp`` and remount ``/`` read-write); the host's ``/proc`` showed
the agent's environment (its provider key) and reached every hidden folder;
secrets by other names (``DATABASE_URL``, ``GH_PAT``) reached the command;
``--allow-network`` shared the host's loopback services; a ``setsid`` job
outlived the run; and only ``.git/hooks`` and ``.git/config`` were
read-only. Each check below runs as root and as an unprivileged user
(``nobody``, on a workspace it owns), in the same run.
"""

from __future__ import annotations

import contextlib
import gc
import os
import pwd
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.processes import until_nothing_works_in

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import SET_ASIDE, Sandbox, set_aside_new_repositories

if shutil.which("bwrap") is None:
    if os.environ.get("CI"):
        raise RuntimeError("bwrap is not installed: install Debian's bubblewrap package (.ci/run does)")
    pytest.skip("bwrap is not installed (Debian's bubblewrap package)", allow_module_level=True)


def test_root_inside_has_no_capabilities_and_cannot_unmount_or_remount(runner):
    out = runner.run("grep CapEff /proc/self/status; umount -l /tmp; mount -o remount,rw /; "
                     "touch /etc/planted-by-sandbox; echo done")
    assert "CapEff:\t0000000000000000" in out, out
    assert "done" in out and not Path("/etc/planted-by-sandbox").exists()
    assert "must be superuser" in out or "permission denied" in out.lower(), out


def test_no_capability_comes_back_through_a_nested_user_namespace(runner):
    # Before: as a normal user, `unshare -Ur` made the command root of a user namespace of its own,
    # with every capability in it (CapEff 1ff...), and mounting in a mount namespace it owned.
    out = runner.run("unshare -Urm sh -c 'grep CapEff /proc/self/status; mount -t tmpfs none /mnt && "
                     "echo mounted'; echo done")
    assert "done" in out and "mounted" not in out, out
    assert "CapEff" not in out or "CapEff:\t0000000000000000" in out, out


def test_proc_shows_only_the_sandboxes_processes_and_no_host_environment(runner, monkeypatch):
    monkeypatch.setenv("HOST_ONLY_SECRET", "the-agents-provider-key")
    out = runner.run(f"ls /proc | grep -cE '^[0-9]+$'; cat /proc/{os.getpid()}/environ; "
                     f"ls /proc/{os.getpid()}/root/; cat /proc/*/environ | tr '\\0' '\\n'; echo done")
    assert int(out.splitlines()[0]) <= 5, out  # bwrap's init, bash and its pipeline
    assert "the-agents-provider-key" not in out and "done" in out, out


def test_secrets_by_any_name_are_absent_and_only_allowlisted_or_named_variables_pass(runner, monkeypatch):
    secrets = {"DATABASE_URL": "postgres://u:pw@db/x", "GH_PAT": "ghp_x", "SIGNING_PASSPHRASE": "pp",
               "NPM_AUTH": "npm-x", "MY_PROVIDER_KEY_VAR": "sk-x", "OPENAI_API_KEY": "sk-y",
               "LC_API_TOKEN": "sk-z"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    monkeypatch.setenv("ASKED_FOR", "passed-on-request")
    out = runner.run("env", pass_env=("ASKED_FOR",))
    assert not [name for name in secrets if name in out], out
    assert "LANG=C.UTF-8" in out and "LC_TIME=C.UTF-8" in out and "ASKED_FOR=passed-on-request" in out, out


def test_the_kernel_keyring_of_the_starting_session_is_unreachable(runner):
    """A key in the session keyring of the program (a private one, joined in a child process)."""
    import json
    import platform
    import sys

    from deep_agent.tools._confined import seccomp_filter

    if seccomp_filter(platform.machine()) is None:
        pytest.skip(f"no keyring filter for {platform.machine()}")
    add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[platform.machine()]
    program = f"""
import ctypes, json, subprocess, sys
from deep_agent.tools._sandbox import Sandbox
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall({keyctl}, 1, b"sandbox-test-session")  # KEYCTL_JOIN_SESSION_KEYRING
key = libc.syscall({add_key}, b"user", b"sandbox-test-token", b"keyring-secret", 14, -3)
command = ("python3 -c 'import ctypes; b = ctypes.create_string_buffer(64); "
           "ctypes.CDLL(None).syscall({keyctl}, 11, %d, b, 64); print(b.value)'; cat /proc/keys; echo done" % key)
with Sandbox.find().running(sys.argv[1], command, cwd=sys.argv[1], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, **json.loads(sys.argv[2])) as process:
    print(key, process.communicate(timeout=60)[0].decode())
"""
    said = subprocess.run([sys.executable, "-c", program, str(runner.ws), json.dumps(runner.popen)],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    assert int(said.split()[0]) > 0, said  # the key was added outside
    assert "done" in said and "keyring-secret" not in said and "sandbox-test" not in said, said


def _repository(ws: Path) -> None:
    """A checkout with what can run code later: git's common dir, a submodule's and a nested repo's git dirs,
    a hook script; no .claude, no .mcp.json, no tools/ yet."""
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".git" / "commondir").write_text(".\n")
    (ws / ".git" / "modules" / "lib").mkdir(parents=True)
    (ws / ".git" / "modules" / "lib" / "config").write_text("[core]\n")
    (ws / "lib").mkdir()
    (ws / "lib" / ".git").write_text("gitdir: ../.git/modules/lib\n")
    (ws / "vendor" / "x" / ".git").mkdir(parents=True)
    (ws / "vendor" / "x" / ".git" / "config").write_text("[core]\n")
    (ws / "scripts").mkdir()
    (ws / "scripts" / "guard.sh").write_text("exit 0\n")


def test_protected_paths_are_unwritable_and_missing_ones_uncreatable(runner):
    ws = runner.ws
    _repository(ws)
    runner.chown(ws)
    protected = Protected.of(ws, agent_files=["scripts/guard.sh", "tools/missing.sh"])
    before = {p: p.read_text() for p in (ws / ".git/config", ws / ".git/commondir",
                                         ws / ".git/modules/lib/config", ws / "vendor/x/.git/config",
                                         ws / "scripts/guard.sh", ws / "lib/.git")}
    out = runner.run(
        "echo '[core] fsmonitor = touch pwned' >> .git/config; echo /elsewhere > .git/commondir;"
        " echo '[core] fsmonitor = touch pwned' >> .git/modules/lib/config; mkdir -p .git/hooks/x;"
        " echo x >> vendor/x/.git/config; echo 'touch pwned' > scripts/guard.sh; echo 'gitdir: evil' > lib/.git;"
        " mkdir -p tools; echo 'touch pwned' > tools/missing.sh; mkdir -p .claude/agents; echo '{}' > .mcp.json;"
        " mv .git .git-old; rm -rf scripts; echo fine > ordinary.txt; echo done",
        protected=protected)
    assert "done" in out and "Read-only file system" in out, out
    assert {p: p.read_text() for p in before} == before
    assert (ws / "ordinary.txt").read_text() == "fine\n"
    # A missing script a hook runs is set aside once made (its folder may stay: it runs nothing).
    for planted in ("tools/missing.sh", ".claude", ".mcp.json", ".git-old", ".git/hooks/x", "pwned"):
        assert not (ws / planted).exists(), f"{planted} was created (or its placeholder left behind)"


def test_a_file_standing_where_a_missing_protected_paths_folder_would_be_cannot_be_replaced(runner):
    # Before: Write("tools") made a file where the missing tools/x.sh's folder would be, so no placeholder
    # could be made there and nothing was bound: `rm tools; mkdir tools; echo ... > tools/x.sh` wrote the
    # script the hook runs on the host. It is set aside now, whatever stood on its way.
    ws = runner.ws
    protected = Protected.of(ws, agent_files=["tools/x.sh"])
    tools = {t.name: t for t in builtin_tools(Workspace(ws, protected=protected), bash=None)}
    assert tools["Write"].invoke({"file_path": "tools", "content": "in the way\n"}).startswith("Created")
    runner.chown(ws)
    out = runner.run("rm -f tools; mkdir tools; echo 'touch pwned' > tools/x.sh; echo done", protected=protected)
    assert "done" in out and not (ws / "tools" / "x.sh").exists(), out


def test_a_symlink_on_the_way_to_a_protected_path_is_kept_as_it_is(runner):
    # Before: with `scripts -> tools/scripts` in the checkout and a hook running `sh scripts/guard.sh`,
    # only tools/scripts/guard.sh was protected: `rm scripts; mkdir scripts; echo ... > scripts/guard.sh`
    # put another script where the hook looks, and the hook ran it on the host.
    ws = runner.ws
    (ws / "tools" / "scripts").mkdir(parents=True)
    (ws / "tools" / "scripts" / "guard.sh").write_text("exit 0\n")
    (ws / "scripts").symlink_to("tools/scripts")
    runner.chown(ws)
    protected = Protected.of(ws, agent_files=[(ws / "scripts" / "guard.sh").resolve()])
    out = runner.run("rm scripts || mv scripts elsewhere; mkdir -p scripts; echo 'touch pwned' > scripts/guard.sh;"
                     " echo done", protected=protected)
    assert "done" in out, out
    assert os.readlink(ws / "scripts") == "tools/scripts", out
    assert (ws / "scripts" / "guard.sh").read_text() == "exit 0\n", out


def test_a_folder_holding_a_protected_path_cannot_be_renamed_and_replaced(runner):
    # Refused while the command runs, not only set aside after it: with the protected paths alone bound, `sub`
    # renamed and made again was what the host's git found by name meanwhile, and the walk after it let it be
    # (a folder where there was one; its .git "known"), while the real .git, in sub_old, was set aside.
    ws = runner.ws
    (ws / "scripts").mkdir()
    (ws / "scripts" / "check.sh").write_text("echo fine\n")
    subprocess.run(["git", "init", "-q", str(ws / "sub")], check=True)
    runner.chown(ws)
    protected = Protected.of(ws, agent_files=["scripts/check.sh"])
    out = runner.run("mv scripts scripts_old; mkdir -p scripts; echo 'touch pwned' > scripts/check.sh;"
                     " mv sub sub_old; git init -q sub; git -C sub config core.fsmonitor 'touch pwned';"
                     " echo new > scripts/other.txt; echo done", protected=protected)
    assert "done" in out and "busy" in out, out
    assert (ws / "scripts" / "check.sh").read_text() == "echo fine\n"
    assert "fsmonitor" not in (ws / "sub" / ".git" / "config").read_text()
    assert not (ws / "scripts_old").exists() and not (ws / "sub_old").exists()
    assert (ws / "scripts" / "other.txt").read_text() == "new\n"  # the folder itself stays writable


def test_a_git_repository_a_command_makes_is_set_aside_before_git_on_the_host_can_run_its_config(runner):
    ws = runner.ws
    subprocess.run(["git", "init", "-q", str(ws / "kept")], check=True)
    (ws / "src").mkdir()
    runner.chown(ws)
    protected = Protected.of(ws)
    set_aside: list[Path] = []
    sandbox = Sandbox.find()
    assert sandbox is not None
    command = ("cd src && git init -q . && git config core.fsmonitor 'touch ../pwned; false' && cd .. &&"
               " git init -q --bare plain && git -C plain config core.fsmonitor 'touch ../pwned; false';"
               " echo 'gitdir: ../plain' > lib.git; mkdir -p lib; mv lib.git lib/.git; echo done")
    with sandbox.running(ws, command, protected, set_aside=set_aside, cwd=ws, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **runner.popen) as process:
        out, _ = process.communicate(timeout=60)
    assert b"done" in out, out
    assert sorted(p.relative_to(ws).as_posix() for p in set_aside) == [
        "lib/.git.made-by-agent", "plain/HEAD.made-by-agent", "src/.git.made-by-agent",
        "src/.git.made-by-agent/HEAD.made-by-agent"]  # no git directory left, even inside
    for folder in ("src", "plain", "lib"):
        subprocess.run(["git", "status"], cwd=ws / folder, capture_output=True, check=False)
    assert not (ws / "pwned").exists()
    assert (ws / "kept" / ".git").is_dir() and (ws / "src" / ".git.made-by-agent" / "config").is_file()


def test_a_repository_hidden_in_a_folder_made_unreadable_is_set_aside_too(runner):
    """As a normal user the walk after a command could not list a folder the command made unreadable
    (chmod 0311): its new repository stayed, and the user's next git status there ran its config."""
    ws = runner.ws
    protected = Protected.of(ws)
    assert protected.paths  # the set as a run computes it before the command (the sandbox binds it)
    made = ("mkdir -p deep/sub && git init -q deep/sub && git -C deep/sub config core.fsmonitor "
            "'touch ../../pwned; false' && chmod 0311 deep/sub deep")
    subprocess.run(["sh", "-c", made], cwd=ws, check=True, **runner.popen)  # what a command left
    # The walk runs as whoever runs the agent, the user the command ran as: a child process as that user.
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        gc.freeze()  # the worker's objects: never collected here (a portal would wait for a thread not forked)
        try:
            if "user" in runner.popen:
                os.setgroups([])
                os.setgid(runner.popen["group"])
                os.setuid(runner.popen["user"])
            moved = set_aside_new_repositories(ws, protected)
            os.write(write, "\n".join(p.relative_to(ws).as_posix() for p in moved).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        moved = pipe.read().splitlines()
    os.waitpid(pid, 0)
    assert "deep/sub/.git.made-by-agent" in moved, moved
    subprocess.run(["git", "status"], cwd=ws / "deep" / "sub", capture_output=True, check=False, **runner.popen)
    assert not (ws / "pwned").exists()


def test_names_a_command_takes_cannot_keep_its_repository_from_being_set_aside(runner):
    # Before: with .git.made-by-agent and -2 ... -999 taken, the new sub/.git could not be renamed: it stayed
    # (the answer only warned the model), and the user's git status in sub ran its core.fsmonitor.
    out = runner.run("mkdir sub && cd sub && touch .git.made-by-agent $(seq -f '.git.made-by-agent-%g' 2 999) &&"
                     " git init -q . && git config core.fsmonitor 'touch ../pwned; false' && echo done")
    assert "done" in out, out
    assert not os.path.lexists(runner.ws / "sub" / ".git"), runner.set_aside
    assert all(SET_ASIDE in p.name for p in runner.set_aside), runner.set_aside
    subprocess.run(["git", "status"], cwd=runner.ws / "sub", capture_output=True, check=False, **runner.popen)
    assert not (runner.ws / "pwned").exists()


def test_a_repository_in_what_replaced_a_kept_symlink_is_set_aside_too(runner):
    # Before: tools -> scripts (a hook runs sh scripts/guard.sh) replaced by a folder holding a new repository:
    # the walk passed it over as protected, the folder was renamed whole, and tools.made-by-agent/.git stayed live.
    ws = runner.ws
    (ws / "scripts").mkdir()
    (ws / "scripts" / "guard.sh").write_text("exit 0\n")
    (ws / "tools").symlink_to("scripts")
    runner.chown(ws)
    out = runner.run("rm tools && git init -q tools && git -C tools config core.fsmonitor 'touch ../pwned; false'"
                     " && echo done", protected=Protected.of(ws, agent_files=["scripts/guard.sh"]))
    assert "done" in out and os.readlink(ws / "tools") == "scripts", out
    aside = ws / ("tools" + SET_ASIDE)
    assert os.listdir(aside) == [".git" + SET_ASIDE], runner.set_aside
    subprocess.run(["git", "status"], cwd=aside, capture_output=True, check=False, **runner.popen)
    assert not (ws / "pwned").exists()


def test_what_cannot_be_renamed_aside_is_removed_not_left_in_place(runner):
    # Before: a kept symlink with a 250-letter name has no longer name to take: what replaced it (a folder holding
    # a new repository) stayed where the hook looks, the link was not put back, and the answer only warned.
    ws = runner.ws
    (ws / "scripts").mkdir()
    (ws / "scripts" / "guard.sh").write_text("exit 0\n")
    link = "l" * 250
    (ws / link).symlink_to("scripts")
    runner.chown(ws)
    out = runner.run(f"rm {link} && git init -q {link} && git -C {link} config core.fsmonitor 'touch ../pwned'"
                     " && echo done", protected=Protected.of(ws, agent_files=["scripts/guard.sh"]))
    assert "done" in out, out
    assert sorted(os.listdir(ws)) == [link, "scripts"] and os.readlink(ws / link) == "scripts", runner.set_aside


def test_a_missing_path_a_git_config_names_cannot_be_made_while_a_command_runs(runner):
    # Before: include.path = ../.gitconfig.local, missing, was only set aside once the command ended: a command
    # wrote it and waited, and a hook's git status on the host meanwhile ran the core.fsmonitor it set.
    ws = runner.ws
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "config", "--file", str(ws / ".git" / "config"), "include.path", "../.gitconfig.local"],
                   check=True)
    os.mkfifo(ws / "go")
    runner.chown(ws)
    sandbox = Sandbox.find()
    assert sandbox is not None
    command = "printf '[core]\\n\\tfsmonitor = touch pwned; false #\\n' > .gitconfig.local; read x < go; echo done"
    with sandbox.running(ws, command, Protected.of(ws), cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, **runner.popen) as process:
        with open(ws / "go", "w") as go:  # open once the command waits to read it: after its write
            status = subprocess.run(["git", "status", "--short"], cwd=ws, capture_output=True, text=True,
                                    check=False, **runner.popen)  # a hook of another tool call, on the host
            go.write("go\n")
        out, _ = process.communicate(timeout=60)
    assert b"done" in out and not (ws / "pwned").exists(), status.stderr
    assert b"Read-only file system" in out and status.returncode == 0, (out, status.stderr)
    assert not os.path.lexists(ws / ".gitconfig.local")  # the placeholder is gone


def test_the_bash_tool_says_which_repositories_it_set_aside(tmp_path):
    (bash,) = [t for t in builtin_tools(Workspace(tmp_path)) if t.name == "Bash"]
    answer = bash.invoke({"command": "mkdir sub && git init -q sub && echo made", "timeout": 20_000})
    assert "made" in answer and "set aside when it ended" in answer, answer
    assert "sub/.git (now .git.made-by-agent): a git directory" in answer, answer
    assert "sub/.git.made-by-agent/HEAD (now HEAD.made-by-agent): a git directory" in answer, answer
    assert not (tmp_path / "sub" / ".git").exists()
    assert "set aside" not in bash.invoke({"command": "echo again", "timeout": 20_000})  # nothing twice


def test_a_git_directory_missing_when_the_command_starts_cannot_be_created(runner):
    out = runner.run("mkdir -p .git/hooks && echo 'touch pwned' > .git/hooks/pre-commit; git init -q .; echo done")
    assert "done" in out
    assert not (runner.ws / ".git").exists(), out


def test_a_setsid_job_ends_with_the_command(runner):
    out = runner.run("(setsid sh -c 'sleep 1; touch late' > /dev/null 2>&1 &); echo started")
    assert out.strip() == "started"
    until_nothing_works_in(runner.ws)  # a job that outlived the command touches its file first
    assert not (runner.ws / "late").exists()


RW_OTHERS = stat.S_IROTH | stat.S_IWOTH


def _listeners() -> tuple[int, str, list[socket.socket]]:
    """A TCP service on the host's loopback and an abstract unix socket, both accepting."""
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    name = f"sandbox-test-{os.getpid()}-{time.monotonic_ns()}"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\0" + name)
    unix.listen()
    for server in (tcp, unix):
        threading.Thread(target=lambda s=server: s.accept(), daemon=True).start()
    return tcp.getsockname()[1], name, [tcp, unix]


PROBE = """python3 -c '
import socket, subprocess, sys
port, name = int(sys.argv[1]), sys.argv[2]
route = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
gateway = route.split()[2] if route.startswith("default") else None
for host in ["127.0.0.1", *([gateway] if gateway else [])]:
    try:
        socket.create_connection((host, port), 2); print("reached", host)
    except OSError:
        print("blocked", host)
try:
    u = socket.socket(socket.AF_UNIX); u.settimeout(2); u.connect("\\0" + name); print("reached unix")
except OSError:
    print("blocked unix")
print("route:", "default" if gateway else "none")
' """


@pytest.mark.server  # talks to services it starts on loopback
@pytest.mark.parametrize("network", [False, True], ids=["no-network", "allow-network"])
def test_host_loopback_services_and_abstract_sockets_are_unreachable(runner, network):
    if network and shutil.which("pasta") is None:
        pytest.skip("pasta is not installed (Debian's passt package, which .ci/run installs)")
    tun = Path("/dev/net/tun")
    if network and runner.popen and not (tun.exists() and tun.stat().st_mode & RW_OTHERS == RW_OTHERS):
        pytest.skip("this machine's /dev/net/tun is not usable by an unprivileged user, and pasta needs it")
    port, name, servers = _listeners()
    try:
        out = runner.run(f"{PROBE} {port} {name}", network=network)
    finally:
        for server in servers:
            server.close()
    assert "reached" not in out and "blocked 127.0.0.1" in out and "blocked unix" in out, out
    assert ("route: default" in out) == network, out  # with the flag: an outbound route of its own


def _pastas() -> set[int]:
    """The pasta processes of this user, by pid."""
    found = set()
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError):
            if entry.isdigit() and os.stat(f"/proc/{entry}").st_uid == os.getuid():
                if Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")[0].endswith(b"pasta"):
                    found.add(int(entry))
    return found


def test_the_network_helper_ends_with_the_command():
    # Before: pasta, which gives a command its network, stayed on the host after the command and its
    # namespace were gone, one process for every networked command of a run.
    if shutil.which("pasta") is None:
        pytest.skip("pasta is not installed (Debian's passt package, which .ci/run installs)")
    before = _pastas()
    workspace = Path(tempfile.mkdtemp(prefix="sandbox-ws-"))
    try:
        with Sandbox.find(network=True).running(workspace, "echo ran", cwd=workspace,
                                                stdout=subprocess.PIPE) as process:
            assert process.communicate(timeout=60)[0] == b"ran\n"
            assert _pastas() - before, "the command ran without its network helper"
        left = _pastas() - before
        for _ in range(3000):  # its SIGTERM is sent as the command ends; wait for it to be gone
            if not left:
                break
            time.sleep(0.01)
            left &= _pastas()
        assert not left, f"pasta outlived the command: {left}"
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


@pytest.mark.server  # a unix socket server it starts
@pytest.mark.parametrize("network", [False, True], ids=["no-network", "allow-network"])
@pytest.mark.parametrize("bound", ["by its path", "by a relative name", "before its folder moved"])
def test_a_host_service_on_a_unix_socket_is_unreachable_wherever_it_was_bound(runner, network, bound):
    # Each socket the host had bound to a visible path was covered with /dev/null: one bound by a relative
    # name (listed without its folder) or whose folder was renamed since (listed under the old path) was not.
    if network and shutil.which("pasta") is None:
        pytest.skip("pasta is not installed (Debian's passt package, which .ci/run installs)")
    tun = Path("/dev/net/tun")
    if network and runner.popen and not (tun.exists() and tun.stat().st_mode & RW_OTHERS == RW_OTHERS):
        pytest.skip("this machine's /dev/net/tun is not usable by an unprivileged user, and pasta needs it")
    folder = runner.ws / ("service" if bound != "before its folder moved" else "old")
    folder.mkdir()
    folder.chmod(0o777)
    server = socket.socket(socket.AF_UNIX)
    if bound == "by a relative name":
        here = os.getcwd()
        os.chdir(folder)
        try:
            server.bind("service.sock")
        finally:
            os.chdir(here)
    else:
        server.bind(str(folder / "service.sock"))
    if bound == "before its folder moved":
        folder = folder.rename(runner.ws / "service")
    (folder / "service.sock").chmod(0o777)
    server.listen(1)
    server.settimeout(0.1)
    probe = ("import socket; s = socket.socket(socket.AF_UNIX); s.connect('service/service.sock'); print('reached')")
    try:
        out = runner.run(f'python3 -c "{probe}"; python3 -c "import socket; socket.socketpair(); print(\'paired\')"'
                         "; echo done", network=network)
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()
    assert "done" in out and "reached" not in out and "PermissionError" in out and "paired" in out, out


def test_only_internet_and_netlink_sockets_are_made_and_io_uring_is_refused(runner):
    # Before: io_uring's IORING_OP_SOCKET made the unix socket socket() was refused, and connect() reached a host
    # service's socket file; AF_VSOCK was neither filtered nor namespaced (the host's vsock ports).
    probe = """
import ctypes, errno, os, socket
for name in ("AF_UNIX", "AF_VSOCK", "AF_PACKET", "AF_INET", "AF_INET6", "AF_NETLINK"):
    try:
        socket.socket(getattr(socket, name), socket.SOCK_RAW if name == "AF_NETLINK" else socket.SOCK_DGRAM).close()
        print(name, "made")
    except OSError as exc:
        print(name, errno.errorcode[exc.errno])
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)
print("io_uring_setup", libc.syscall(425, 1, params), errno.errorcode.get(ctypes.get_errno()))
"""
    (runner.ws / "probe.py").write_text(probe)
    runner.chown(runner.ws / "probe.py")
    out = runner.run("python3 probe.py; echo done")
    assert "done" in out, out
    said = dict(line.split(" ", 1) for line in out.splitlines()[:-1])
    assert said == {"AF_UNIX": "EPERM", "AF_VSOCK": "EPERM", "AF_PACKET": "EPERM", "AF_INET": "made",
                    "AF_INET6": "made", "AF_NETLINK": "made", "io_uring_setup": "-1 EPERM"}, out


def test_the_bash_tool_runs_in_the_sandbox_by_default(tmp_path):
    (bash,) = [t for t in builtin_tools(tmp_path) if t.name == "Bash"]
    out = bash.invoke({"command": "grep CapEff /proc/self/status; echo x > .git/config", "timeout": 20_000})
    assert "CapEff:\t0000000000000000" in out and "Read-only file system" in out, out


def test_a_timeout_still_ends_a_sandboxed_command(tmp_path):
    (bash,) = [t for t in builtin_tools(tmp_path) if t.name == "Bash"]
    assert "[command killed after 0.5s timeout]" in bash.invoke({"command": "sleep 30", "timeout": 500})


def test_the_workspace_is_writable_and_nothing_beside_it(tmp_path):
    workspace = tmp_path / "project"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("the neighbour's secret")
    (bash,) = [t for t in builtin_tools(workspace) if t.name == "Bash"]
    out = bash.invoke({"command": "echo kept > inside.txt; echo x > ../escaped.txt; cat ../secret.txt; "
                                  f"ls -A {Path.home()} | wc -l; echo done", "timeout": 20_000})
    assert (workspace / "inside.txt").read_text() == "kept\n" and not (tmp_path / "escaped.txt").exists()
    assert "the neighbour's secret" not in out and "done" in out, out


def test_without_bubblewrap_there_is_no_bash_unless_unconfined_is_asked_for(monkeypatch, tmp_path):
    import argparse

    from deep_agent.cli._run import bash_setting

    args = argparse.Namespace(unsafe_bash=False, allow_network=False)
    bash, note = bash_setting(args)
    assert isinstance(bash, Sandbox) and note is None
    monkeypatch.setattr(shutil, "which", lambda name, path=None: None)
    assert "Bash" not in [t.name for t in builtin_tools(tmp_path)]
    bash, note = bash_setting(args)
    assert bash is None and "Bash is off" in note and "--unsafe-bash" in note
    assert "Bash" in [t.name for t in builtin_tools(tmp_path, bash="unconfined")]
    bash, note = bash_setting(argparse.Namespace(unsafe_bash=True, allow_network=False))
    assert bash == "unconfined" and "unconfined" in note


def test_a_workspace_that_is_or_holds_the_home_folder_is_refused_unless_allowed(tmp_path, monkeypatch, capsys):
    from deep_agent.cli._app import main
    from deep_agent.tools._workspace import HomeWorkspace

    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    for refused in (home, tmp_path):
        with pytest.raises(HomeWorkspace, match="allow-home-workspace"):
            Workspace(refused)
    assert Workspace(home / "project").root == (home / "project").resolve()
    assert Workspace(home, allow_home=True).root == home.resolve()
    assert main(["run", "hello", "--workspace", str(home), "--state-dir", str(tmp_path / "state")]) == 2
    assert "--allow-home-workspace" in capsys.readouterr().err


def test_the_account_home_folder_is_refused_whatever_home_says(tmp_path, monkeypatch):
    # Before: only $HOME was compared; run with HOME pointing elsewhere (sudo -E, a script's HOME=/tmp/x),
    # the account's own home folder, dotfiles and all, was accepted as the workspace.
    from deep_agent.tools._workspace import HomeWorkspace

    account_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    if not account_home.is_dir():
        pytest.skip(f"this account's home folder {account_home} does not exist")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(HomeWorkspace, match="allow-home-workspace"):
        Workspace(account_home)


def test_the_account_home_folder_is_hidden_whatever_home_says(runner, monkeypatch):
    # Before: only $HOME's folder was emptied; with HOME pointing elsewhere, the account's own home
    # (a CI user's /var/lib/ci, its .ssh) stayed readable inside.
    # Beside the tests, not in /tmp (which the sandbox empties anyway).
    account_home = Path(tempfile.mkdtemp(prefix=".sandbox-account-home-", dir=Path(__file__).resolve().parent))
    (account_home / ".ssh").mkdir()
    (account_home / ".ssh" / "id_ed25519").write_text("the-private-key\n")
    runner.chown(account_home)
    account_home.chmod(0o755)
    monkeypatch.setattr(pwd, "getpwuid", lambda uid: SimpleNamespace(pw_dir=str(account_home)))
    monkeypatch.setenv("HOME", str(runner.ws))
    try:
        out = runner.run(f"cat {account_home}/.ssh/id_ed25519; echo done")
    finally:
        shutil.rmtree(account_home, ignore_errors=True)
    assert "done" in out and "the-private-key" not in out, out
    # A system account's home may be / or /usr/sbin: it stays, with the programs commands need.
    for system_home in ("/", str(Path(shutil.which("bash") or "/usr/bin/bash").parent)):
        monkeypatch.setattr(pwd, "getpwuid", lambda uid, home=system_home: SimpleNamespace(pw_dir=home))
        assert runner.run("echo fine").strip() == "fine", system_home


def test_the_command_line_passes_only_the_variables_named_with_pass_env(monkeypatch, tmp_path):
    from deep_agent.cli._app import parse
    from deep_agent.cli._run import bash_setting

    monkeypatch.setenv("ASKED_FOR", "passed-on-request")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:pw@db/x")
    args = parse(["run", "hello", "--pass-env", "ASKED_FOR", "--workspace", str(tmp_path)])
    sandbox, _ = bash_setting(args)
    (bash,) = [t for t in builtin_tools(tmp_path, bash=sandbox) if t.name == "Bash"]
    out = bash.invoke({"command": "env", "timeout": 20_000})
    assert "ASKED_FOR=passed-on-request" in out and "DATABASE_URL" not in out, out


def _seccomp_verdict(program: bytes, arch: int, nr: int, *arguments: int) -> int:
    """What the seccomp program returns for a call (the few BPF steps it uses: load, jeq, jge, jset, ret)."""
    import struct

    steps = [struct.unpack("=HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = {0: nr, 4: arch, **{16 + 8 * i: a for i, a in enumerate((*arguments, 0, 0, 0, 0, 0, 0)[:6])}}
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = steps[pc]
        if code == 0x20:
            acc, pc = data[k], pc + 1
        elif code in (0x15, 0x35, 0x45):
            hit = acc == k if code == 0x15 else acc >= k if code == 0x35 else bool(acc & k)
            pc += 1 + (jt if hit else jf)
        else:
            assert code == 0x06
            return k


@pytest.mark.parametrize("machine, native, keyring_calls, socket_call, other_arch, other_keyring_calls", [
    ("x86_64", 0xC000003E, (248, 249, 250), 41, 0x40000003, (286, 287, 288)),  # int 0x80's i386 numbers
    ("aarch64", 0xC00000B7, (217, 218, 219), 198, 0x40000028, (309, 310, 311)),  # 32-bit ARM's
])
def test_the_keyring_calls_io_uring_and_sockets_but_the_network_ones_are_refused_through_every_interface(
        machine, native, keyring_calls, socket_call, other_arch, other_keyring_calls):
    from deep_agent.tools._confined import seccomp_filter

    program = seccomp_filter(machine)
    assert program is not None
    allow, eperm = 0x7FFF0000, 0x00050000 | 1
    assert [_seccomp_verdict(program, native, nr) for nr in keyring_calls] == [eperm] * 3
    assert _seccomp_verdict(program, native, 0) == allow  # read (x86_64) / io_setup: ordinary calls run
    assert [_seccomp_verdict(program, other_arch, nr) for nr in other_keyring_calls] == [eperm] * 3
    assert [_seccomp_verdict(program, native, nr) for nr in (425, 426, 427)] == [eperm] * 3  # io_uring's
    families = (socket.AF_UNIX, socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_VSOCK, 17, 38)
    assert [_seccomp_verdict(program, native, socket_call, f) for f in families] == [
        eperm, allow, allow, allow, eperm, eperm, eperm]  # AF_PACKET, AF_ALG: refused as any other


@pytest.mark.parametrize("machine, native, mode_calls", [
    ("x86_64", 0xC000003E, {"chmod": (90, 1), "fchmod": (91, 1), "fchmodat": (268, 2), "fchmodat2": (452, 2),
                            "open": (2, 2), "openat": (257, 3), "creat": (85, 1), "mknod": (133, 1),
                            "mknodat": (259, 2)}),
    ("aarch64", 0xC00000B7, {"fchmod": (52, 1), "fchmodat": (53, 2), "fchmodat2": (452, 2), "openat": (56, 3),
                             "mknodat": (33, 2)}),
])
def test_no_call_gives_a_file_the_set_user_or_group_id_bit(machine, native, mode_calls):
    # Before: `cp /bin/sh helper && chmod 4755 helper` in the sandbox left, as root, a set-user-ID root shell in
    # the workspace for any local user (`helper -p -c id`: euid=0).
    from deep_agent.tools._confined import seccomp_filter

    program = seccomp_filter(machine)
    assert program is not None
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    for name, (nr, index) in mode_calls.items():
        for mode, verdict in ((0o4755, eperm), (0o2755, eperm), (0o6777, eperm), (0o755, allow), (0o1777, allow)):
            arguments = [0] * 6
            arguments[index] = mode
            assert _seccomp_verdict(program, native, nr, *arguments) == verdict, (name, oct(mode))
    assert _seccomp_verdict(program, native, 437) == enosys  # openat2: its mode is out of seccomp's sight


def test_a_command_cannot_leave_a_set_user_id_program(runner):
    probe = """
import errno, os, shutil, stat
shutil.copy("/bin/sh", "helper")
for how, do in (("chmod", lambda: os.chmod("helper", 0o4755)), ("setgid", lambda: os.chmod("helper", 0o2755)),
                ("create", lambda: os.close(os.open("made", os.O_CREAT | os.O_WRONLY, 0o4755))),
                ("plain", lambda: os.chmod("helper", 0o755))):
    try:
        do()
        print(how, "done")
    except OSError as exc:
        print(how, errno.errorcode[exc.errno])
print("bits", oct(os.stat("helper").st_mode & 0o7777))
"""
    (runner.ws / "probe.py").write_text(probe)
    runner.chown(runner.ws / "probe.py")
    out = runner.run("python3 probe.py; echo done")
    assert "done" in out, out
    said = dict(line.split(" ", 1) for line in out.splitlines()[:-1])
    assert said == {"chmod": "EPERM", "setgid": "EPERM", "create": "EPERM", "plain": "done", "bits": "0o755"}, out
    assert not (runner.ws / "helper").stat().st_mode & (stat.S_ISUID | stat.S_ISGID)


def test_a_repository_whose_folder_a_command_made_unwritable_is_still_set_aside():
    """``git init s && chmod 555 s``: the folder is the user's own; it gets its write bit back for the rename.

    Root ignores the write bit, so as root the set-aside runs in a child process that became ``nobody``.
    """

    # Under /tmp, reachable by that user (pytest's own tmp_path is private to the user running the tests).
    ws = Path(tempfile.mkdtemp(prefix="sandbox-ws-"))
    ws.chmod(0o755)
    (ws / "s").mkdir()
    subprocess.run(["git", "init", "-q", str(ws / "s")], check=True)
    protected = Protected.of(ws)
    protected.paths  # noqa: B018 - the walk of the run's start, before the command made its repository
    (ws / "s" / ".git").rename(ws / "s" / ".git-new")  # unknown at the start: made "by the command"
    (ws / "s" / ".git-new").rename(ws / "s" / ".git")
    protected = Protected(fixed=dict(protected.fixed), root=None)
    if os.getuid() == 0:
        nobody = pwd.getpwnam("nobody")
        for folder, dirs, files in os.walk(ws):
            for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                os.lchown(name, nobody.pw_uid, nobody.pw_gid)
    (ws / "s").chmod(0o555)
    pid = os.fork()
    if pid == 0:  # the child: as the repository's owner, set it aside
        gc.freeze()
        code = 1
        try:
            if os.getuid() == 0:
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            moved = set_aside_new_repositories(ws, protected)
            code = 0 if [p.name for p in moved] == [".git" + SET_ASIDE, "HEAD" + SET_ASIDE] else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    try:
        assert os.waitstatus_to_exitcode(status) == 0
        assert (ws / "s" / (".git" + SET_ASIDE)).is_dir() and not (ws / "s" / ".git").exists()
    finally:
        (ws / "s").chmod(0o755)
        shutil.rmtree(ws, ignore_errors=True)
