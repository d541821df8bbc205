"""Starting bubblewrap: its seccomp filter, and pasta's network joined once it runs; and a launcher around it.

A hook's command or an MCP server goes through this file run as a program, with the command's stdio and status::

    python -I _confined.py RECORD [--pasta PASTA] ARGV-FILE SHA256

``ARGV-FILE`` holds bubblewrap's argv (:func:`argv_file`: a deep tree's binds are more than a command line holds).
A start that never ran its command ends by :data:`DID_NOT_START`. Only the standard library, run by its path
(``-I``): no package of the workspace is imported on the way.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import resource
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Outbound only: no port forwarded either way, the gateway not mapped to the host's loopback.
PASTA_ARGS = ("--config-net", "--quiet", "-t", "none", "-u", "none", "-T", "none", "-U", "none", "--no-map-gw")

if TYPE_CHECKING or __name__ != "__main__":  # imported by the program: one of the library's errors
    from subagents._errors import SubagentsError
else:  # the launcher: the standard library alone
    class SubagentsError(Exception):
        pass


class SpawnFailed(SubagentsError, RuntimeError):
    """bubblewrap or pasta (:attr:`program`) failed to start."""

    def __init__(self, message: str, program: str) -> None:
        super().__init__(message)
        self.program = program


def fd_options(sync_fds: tuple[int, int | None] | None, seccomp_fd: int | None) -> list[str]:
    """bubblewrap's ``--info-fd`` (its child's pid), ``--block-fd`` (the command waits for network), ``--seccomp``."""
    info, block = sync_fds or (None, None)
    return [word for flag, fd in (("--info-fd", info), ("--block-fd", block), ("--seccomp", seccomp_fd))
            if fd is not None for word in (flag, str(fd))]


Build = Callable[[tuple[int, int | None] | None, int | None], list[str]]  # (sync_fds, seccomp_fd) -> argv


def _dies_with_parent(parent: int) -> Callable[[], None]:
    """bubblewrap's ``--die-with-parent`` is set once it runs: a parent killed before (a hook's timeout) left it
    waiting for ever. Set before it starts, a parent gone checked: no window (the launcher's alone: one thread)."""
    libc = ctypes.CDLL(None)  # loaded before the fork: the child only calls it

    def set_it() -> None:
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(1)

    return set_it


@contextlib.contextmanager
def spawned(build: Build, pasta: str | None, record: str | None = None, keep: tuple[int, ...] = (),
            **popen: Any) -> Iterator[subprocess.Popen[bytes]]:
    """bubblewrap started from ``build``; with ``pasta``, its network given before the command starts. ``record``:
    a folder for the sandbox's and pasta's pids (:func:`end_recorded`); ``keep``: descriptors the command inherits."""
    with contextlib.nullcontext() if (program := seccomp_filter()) is None else _readable(program) as seccomp:
        fds = (*keep, *(() if seccomp is None else (seccomp,)))
        if pasta is None and record is None:
            with _sources_opened(build(None, seccomp)) as (argv, sources):
                process = subprocess.Popen(argv, pass_fds=(*fds, *sources), **popen)
            with process:
                yield process
            return
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe() if pasta is not None else (None, None)
        try:
            with _sources_opened(build((info_w, block_r), seccomp)) as (argv, sources):
                process = subprocess.Popen(argv, pass_fds=(info_w, *(() if block_r is None else (block_r,)), *fds,
                                                           *sources), **popen)
        except BaseException:
            os.close(info_r)
            if block_w is not None:
                os.close(block_w)
            raise
        finally:
            os.close(info_w)
            if block_r is not None:
                os.close(block_r)
        with process, open(info_r, "rb") as info:
            try:
                try:  # read to its end: bubblewrap closes it before the command is let go
                    child = int(json.loads(text := info.read())["child-pid"])
                except (ValueError, KeyError, TypeError):
                    raise SpawnFailed(f"bwrap did not start: {text[:200]!r}", "bwrap") from None
                joined = _connect(pasta, child, record) if pasta is not None else None
            except BaseException:
                process.kill()
                if block_w is not None:
                    os.close(block_w)
                raise
            if joined is None:
                yield process
                return
            with open(block_w, "wb") as block:  # type: ignore[arg-type]
                try:
                    block.write(b"1")
                    block.flush()
                    yield process
                finally:  # pasta outlives the namespace it served: it ends with the command
                    with contextlib.suppress(OSError):
                        signal.pidfd_send_signal(joined, signal.SIGTERM)
                    os.close(joined)


BIND_FD = {"--bind": "--bind-fd", "--ro-bind": "--ro-bind-fd"}  # bubblewrap 0.8's (--disable-userns needs it too)
MAX_ARGS = 9000  # bubblewrap's own cap on its arguments, those it reads from --args counted


@contextlib.contextmanager
def _sources_opened(argv: list[str]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """``argv`` as bubblewrap ``--args`` a descriptor of its options, each bind's source a descriptor opened one name
    at a time (by path, a folder swapped for a symlink to the home had the home bound writable), open while held;
    :class:`SpawnFailed` for a symlink, a missing source, past :data:`MAX_ARGS` (unbound, it would be the command's)."""
    binds = sum(w in BIND_FD for w in argv)
    if len(argv) + 1 > MAX_ARGS:  # its own, and "--args FD" for them
        raise SpawnFailed(f"the workspace has more protected paths and folders on their way than bubblewrap can "
                          f"bind ({binds} binds; it takes {MAX_ARGS} arguments)", "bwrap")
    # A descriptor a bind, held until bubblewrap runs (a normal user's ``ulimit -n`` is 1,024): the soft limit
    # raised up to the hard one (past it, _opened fails, naming why).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = len(os.listdir("/proc/self/fd")) + binds + 64
    if soft != resource.RLIM_INFINITY and needed > soft:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed if hard == resource.RLIM_INFINITY else min(hard, needed),
                                                        hard))
    end = argv.index("--") if "--" in argv else len(argv)
    words: list[str] = []
    sources: list[int] = []
    opened: dict[str, int] = {}  # source -> its descriptor, each used once: bubblewrap closes it once bound
    try:
        rest = iter(argv[1:end])
        for word in rest:
            if word in BIND_FD:
                source, dest = next(rest), next(rest)
                opened[source] = _opened(source, opened)
                sources.append(opened[source])
                words += [BIND_FD[word], str(sources[-1]), dest]
            else:
                words.append(word)
        with _readable(b"".join(os.fsencode(w) + b"\0" for w in words)) as options:
            yield [argv[0], "--args", str(options), *argv[end:]], (options, *sources)
    finally:
        for fd in sources:
            os.close(fd)


def _opened(path: str, opened: dict[str, int]) -> int:
    """``path``, absolute, opened (``O_PATH``) one name at a time, none a symlink: from its folder if ``opened``
    (a deep tree's thousand binds, each from ``/``, were a million steps), else from ``/``."""
    parent, last = os.path.split(path)
    start = opened.get(parent)
    fd = os.dup(start) if start is not None else os.open("/", os.O_PATH | os.O_CLOEXEC)
    try:
        for name in filter(None, (last if start is not None else path).split("/")):
            step = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = step
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise SpawnFailed(f"a path the sandbox binds is now a symlink: {path}", "bwrap")
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise SpawnFailed(f"a path the sandbox binds cannot be opened ({exc}): {path}", "bwrap") from None
        raise
    return fd


PASTA_PID = "pasta.pid"

STARTED_FD = 200
"""Where the launcher's command (a hook, a server) says it started inside the sandbox (:data:`STARTED`): a
bubblewrap that failed on its way (a mount, a ``chdir``) exits 1, as a command may; only the byte tells them apart."""
STARTED = f"printf x >&{STARTED_FD} 2>/dev/null; exec {STARTED_FD}>&-; "


def end_recorded(record: str) -> None:
    """End the launcher's sandbox (every process still bubblewrap's, named by :func:`tag`) and the pasta
    :func:`spawned` wrote to ``record``, if still the one started: a launcher killed outright could not (bubblewrap
    reads the end of ``--block-fd`` as leave to go on; pasta outlives it). Killed before bubblewrap let its child
    go on, its child (no pid told yet) waited for ever for it: bubblewrap ends with the launcher (a death signal)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        _end(int(pid), lambda program: program == os.fsencode(tag(record)), signal.SIGKILL)
    with contextlib.suppress(OSError, ValueError):
        _end(int(Path(record, PASTA_PID).read_text()), lambda program: os.path.basename(program) == b"pasta",
             signal.SIGTERM)


def tag(record: str) -> str:
    """The launcher's bubblewrap's ``argv[0]``: what its processes (its own, its child until the command runs, the
    sandbox's first process) show in ``/proc/PID/cmdline``, one launcher's alone."""
    return os.path.join(record, "bwrap")


def _end(pid: int, program: Callable[[bytes], bool], how: int) -> None:
    """``how`` sent to ``pid`` if its ``argv[0]`` is ``program``'s, read once it is held (not a pid since reused)."""
    with contextlib.suppress(OSError):
        process = os.pidfd_open(pid)
        try:
            if program(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]):
                signal.pidfd_send_signal(process, how)
        finally:
            os.close(process)


def _connect(pasta: str, pid: int, record: str | None) -> int:
    """Give the namespace of bubblewrap's child ``pid`` pasta's network; a pidfd of pasta (its caller ends it)."""
    # --runas keeps our uid (as root pasta would switch to nobody, who cannot join). It joins the user
    # namespace owning the network one, not the child's: --disable-userns moves the child into a nested one.
    try:
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            owner = fcntl.ioctl(net, NS_GET_USERNS)  # the user namespace owning it
        finally:
            os.close(net)
        try:
            with tempfile.TemporaryDirectory() as folder:
                pid_file = os.path.join(record or folder, PASTA_PID)
                done = subprocess.run([pasta, *PASTA_ARGS, "--runas", str(os.getuid()), "--pid", pid_file,
                                       "--userns", f"/proc/self/fd/{owner}", str(pid)], pass_fds=(owner,),
                                      stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
                if done.returncode == 0:
                    return os.pidfd_open(int(Path(pid_file).read_text()))
        finally:
            os.close(owner)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise SpawnFailed(f"pasta could not give Bash its network: {exc}", "pasta") from None
    said = done.stderr.decode("utf-8", "replace").strip()[-300:]
    raise SpawnFailed(f"pasta could not give Bash its network (exit {done.returncode}): {said}", "pasta")


NS_GET_USERNS = 0xB701  # nsfs ioctl: a descriptor of the user namespace owning a namespace
_CALLS = {"x86_64": (0xC000003E, (248, 249, 250), 41), "aarch64": (0xC00000B7, (217, 218, 219), 198)}
"""Machine -> its seccomp architecture, the numbers of add_key, request_key and keyctl, and that of socket."""
IO_URING = (425, 426, 427)  # io_uring_setup, _enter and _register: the same on every architecture (Linux 5.1)
SOCKET_FAMILIES = (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK)
"""The families a command may make a socket of: the command's own network namespace holds what they reach."""
MODE_CALLS = {"x86_64": ((90, 1), (91, 1), (268, 2), (452, 2), (2, 2), (257, 3), (85, 1), (133, 1), (259, 2)),
              "aarch64": ((52, 1), (53, 2), (452, 2), (56, 3), (33, 2))}
"""Machine -> (call, index of its mode argument) of chmod, fchmod, fchmodat, fchmodat2, open, openat, creat, mknod
and mknodat (those it has): a mode with the set-user-ID or set-group-ID bit is refused."""
OPENAT2 = 437  # openat2: its mode is in a struct seccomp cannot read; ENOSYS, so a program falls back to openat


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The seccomp program bubblewrap installs (``None`` on a machine not listed): the kernel keyring calls (no
    namespace: a command read the session's keys), io_uring (sockets ``socket()`` never sees), a socket of any family
    but :data:`SOCKET_FAMILIES` (a unix socket reaches whoever listens at its path, a vsock the host's ports;
    ``getaddrinfo`` asks netlink), a set-user-ID or set-group-ID mode (:data:`MODE_CALLS`), and a call through another
    architecture's interface (``int 0x80`` on x86_64) fail with ``EPERM``."""
    calls = _CALLS.get(machine or os.uname().machine)
    if calls is None:
        return None
    arch, keyring, socket_call = calls
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|JGE|JSET|K, BPF_RET|K
    refused = [(jeq, n) for n in (*keyring, *IO_URING)] + ([(jge, 0x40000000)] if arch == 0xC000003E else [])
    # Steps as (code, true, false, k), a jump's target named: "allow", "deny" or the next step (0).
    steps: list[tuple[int, int | str, int | str, int]] = [(ld, 0, 0, 4), (jeq, 0, "deny", arch), (ld, 0, 0, 0)]
    steps += [(op, "deny", 0, k) for op, k in refused]  # x32 calls, another arch: refused
    steps += [(jeq, "nosys", 0, OPENAT2)]
    # A mode with S_ISUID or S_ISGID (the low word of its argument): a program the command leaves set-user-ID
    # would run as its owner (root, where the program runs as root) for any user who can reach the workspace.
    for call, index in MODE_CALLS[machine or os.uname().machine]:
        steps += [(jeq, 0, 2, call), (ld, 0, 0, 16 + 8 * index), (jset, "deny", "allow", stat.S_ISUID | stat.S_ISGID)]
    # socket(): its first argument (the low word of args[0], at 16) is the family.
    steps += [(jeq, 0, "allow", socket_call), (ld, 0, 0, 16)]
    steps += [(jeq, "allow", 0, family) for family in SOCKET_FAMILIES]
    # A socket of no family above falls through to the first: refused.
    steps += [(ret, 0, 0, 0x00050000 | errno.EPERM), (ret, 0, 0, 0x00050000 | errno.ENOSYS),
              (ret, 0, 0, 0x7FFF0000)]  # SECCOMP_RET_ERRNO, _ALLOW
    at = {"deny": len(steps) - 3, "nosys": len(steps) - 2, "allow": len(steps) - 1}
    return b"".join(struct.pack("=HBBI", code, *(at[t] - i - 1 if isinstance(t, str) else t for t in (jt, jf)), k)
                    for i, (code, jt, jf, k) in enumerate(steps))


@contextlib.contextmanager
def _readable(data: bytes) -> Iterator[int]:
    """A descriptor reading ``data`` from its start (a memory file: it holds any size)."""
    fd = os.memfd_create("bwrap", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as file:
            file.write(data)
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


def argv_file(folder: str, argv: list[str]) -> list[str]:
    """``argv`` written to a file in ``folder``; the launcher's arguments naming it, its SHA-256 with it: a
    file a command could reach (a temporary folder in the workspace) is read as written or not at all."""
    data = b"\0".join(map(os.fsencode, argv))
    Path(folder, "argv").write_bytes(data)
    return [str(Path(folder, "argv")), hashlib.sha256(data).hexdigest()]


ENV_NAMES = "env"  # in a launch's folder: the variables its command gets, by name
DID_NOT_START = signal.SIGUSR2
"""The signal the launcher ends by when its command never started (``subagents.definitions._on_host``'s): a
command's own end, by a signal too, is an exit status (bubblewrap's ``128 + n``), and no command reaches the
launcher outside its namespace; so no hook can pass for one that never ran, nor a failed start for a hook."""


def main(args: list[str]) -> int:
    """Run the argv :func:`argv_file` wrote: the command's status, or :data:`DID_NOT_START` if it never ran."""
    record, pasta, (path, digest) = args[0], (args[2] if args[1:2] == ["--pasta"] else None), args[-2:]
    started: list[subprocess.Popen[bytes]] = []
    ended: list[int] = []

    def end(signum: int, _frame: object) -> None:
        ended.append(signum)  # before bubblewrap is started: ended as soon as it is
        if started:
            started[0].terminate()  # bubblewrap's end ends the sandbox (--die-with-parent), then pasta's

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, end)
    said, told = os.pipe()
    os.dup2(told, STARTED_FD)
    os.close(told)
    try:
        data = Path(path).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise SpawnFailed(f"its argv file was changed: {path}", "bwrap")
        bwrap = list(map(os.fsdecode, data.split(b"\0")))
        # Exactly the variables its caller chose: an MCP client adds its own (SHELL, USER) under a server's.
        chosen = set(Path(record, ENV_NAMES).read_text().split("\0"))
        for name in set(os.environ) - chosen:
            del os.environ[name]
        with spawned(lambda sync, seccomp: [tag(record), *fd_options(sync, seccomp), *bwrap[1:]], pasta, record,
                     keep=(STARTED_FD,), executable=bwrap[0], preexec_fn=_dies_with_parent(os.getpid())) as process:
            os.close(STARTED_FD)
            started.append(process)
            if ended:
                process.terminate()
            code = process.wait()
        os.set_blocking(said, False)
        with contextlib.suppress(BlockingIOError):
            if os.read(said, 1):
                return code if code >= 0 else 128 - code
        raise SpawnFailed(f"bwrap ended ({code}) before its command started", "bwrap")
    except Exception as exc:  # noqa: BLE001 - whatever stopped it before its command started: it never ran
        print(f"the sandbox did not start: {exc}", file=sys.stderr)
    signal.signal(DID_NOT_START, signal.SIG_DFL)
    os.kill(os.getpid(), DID_NOT_START)
    return 1  # never reached: the signal ends it


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
