"""Running one hook command: the event as JSON on stdin, bounded by its timeout.

The command runs through the shell in its own process group. Its verdict is
the shell's exit status, taken as soon as the shell exits: output is read for
:data:`EXIT_GRACE` seconds more and then no longer, so a background job that
keeps the hook's stdout open neither delays nor changes the verdict. A
shell still running at its timeout has its process group killed. Only the
first :data:`MAX_OUTPUT_CHARS` of each stream are kept; the rest is read and
dropped, so a hook that prints gigabytes neither stalls nor fills memory.

Whatever happens -- the command is missing, crashes, prints gigabytes or
never ends -- the result is a :class:`HookOutcome`, never an exception, and
the call returns within about ``timeout`` plus twice the grace.
:func:`run_hook` blocks its thread; :func:`arun_hook` runs the command as an
asyncio subprocess and never blocks the event loop. Both drive one
:class:`_Run`, which holds what they share: the output kept, the clock and
the verdict. What an outcome *means* is decided in one place,
:mod:`subagents.definitions._hook_middleware`.

Example::

    outcome = run_hook("./check.sh", {"hook_event_name": "PreToolUse", "tool_name": "Bash"}, 30)
    outcome.exit_code, outcome.stderr       # (2, 'rm -rf is not allowed')
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from typing import IO, Any, cast

MAX_OUTPUT_CHARS = 8000
"""Most characters of a hook's stdout or stderr kept."""

EXIT_GRACE = 0.25
"""Seconds output is still read after the shell exits or is killed.

What a hook wrote before exiting is already in the pipe; this only covers
reading it. Whoever still holds the pipe after that is not waited for.
"""

_KEEP_BYTES = MAX_OUTPUT_CHARS * 4  # UTF-8 needs at most 4 bytes a character
_CHUNK = 1 << 16
_POLL = 0.05  # how often the blocking driver looks for the shell's exit while pipes stay open


@dataclasses.dataclass(frozen=True)
class HookOutcome:
    """How a hook command ended: ``exit_code`` is ``None`` when it timed out or did not start."""

    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None

    def describe(self) -> str:
        """One line for a warning."""
        what = self.problem or f"exited {self.exit_code}"
        detail = f": {self.stderr.strip()[:300]}" if self.stderr.strip() else ""
        return f"hook {self.command[:80]!r} {what}{detail}"


class _Capture:
    """The first bytes of one output stream; later bytes are dropped as they arrive."""

    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, chunk: bytes) -> None:
        room = _KEEP_BYTES - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def text(self) -> str:
        return self.data.decode("utf-8", "replace")[:MAX_OUTPUT_CHARS]


class _Run:
    """One hook run as both drivers see it: output kept, deadline, kill, verdict."""

    def __init__(self, command: str, timeout: float) -> None:
        self.command, self.timeout = command, timeout
        self.deadline = time.monotonic() + timeout
        self.streams = {1: _Capture(), 2: _Capture()}
        self.killed = False

    def left(self) -> float:
        """Seconds until the timeout (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def kill(self, pid: int) -> None:
        """End the shell's process group: its timeout has passed."""
        self.killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            os.killpg(pid, signal.SIGKILL)

    def outcome(self, returncode: int | None) -> HookOutcome:
        """The verdict: the shell's own exit status, unless it was still running at the timeout."""
        out, err = self.streams[1].text(), self.streams[2].text()
        # A shell that exited on its own just before the kill keeps its status: a guard's
        # exit 2 is never turned into a timeout (which would let the call through).
        if returncode is None or (self.killed and returncode == -signal.SIGKILL):
            return HookOutcome(self.command, None, out, err, problem=f"timed out after {self.timeout:g}s")
        return HookOutcome(self.command, returncode, out, err)


def _payload(event: Mapping[str, Any]) -> bytes:
    return json.dumps(event, default=str).encode("utf-8")


def _could_not_start(command: str, exc: Exception) -> HookOutcome:
    return HookOutcome(command, None, problem=f"could not start ({type(exc).__name__}: {exc})")


def _failed(command: str, exc: BaseException) -> HookOutcome:
    return HookOutcome(command, None, problem=f"failed ({type(exc).__name__})")


# -- blocking: one thread, non-blocking pipes, a selector ---------------------------


def run_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """Run ``command`` with ``event`` on stdin; its verdict within about ``timeout`` seconds."""
    try:
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except Exception as exc:  # noqa: BLE001 - a hook that cannot start is a warning
        return _could_not_start(command, exc)
    run = _Run(command, timeout)
    try:
        _pump(proc, run, _payload(event))
        return run.outcome(_reap(proc, run))
    except BaseException as exc:
        run.kill(proc.pid)
        if not isinstance(exc, Exception):
            raise  # Ctrl-C propagates, after the hook is ended
        return _failed(command, exc)
    finally:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                pipe.close()  # type: ignore[union-attr]


def _pump(proc: subprocess.Popen[bytes], run: _Run, payload: bytes) -> None:
    """Feed stdin and keep output until the pipes close, or a grace after the shell ends."""
    pipes: dict[int, IO[bytes]] = {1: proc.stdout, 2: proc.stderr, 0: proc.stdin}  # type: ignore[dict-item]
    pending = memoryview(payload)
    stop: float | None = None  # when reading ends: a grace after the shell exits or is killed
    with selectors.DefaultSelector() as selector:
        for number, pipe in pipes.items():
            os.set_blocking(pipe.fileno(), False)
            selector.register(pipe, selectors.EVENT_WRITE if number == 0 else selectors.EVENT_READ, number)
        while selector.get_map():
            now = time.monotonic()
            if stop is None and (proc.poll() is not None or now >= run.deadline):
                if proc.returncode is None:
                    run.kill(proc.pid)
                stop = now + EXIT_GRACE
            if stop is not None and now >= stop:
                return
            wake = min(_POLL, (stop if stop is not None else run.deadline) - now)
            for key, _ in selector.select(max(0.0, wake)):
                if key.data == 0:
                    pending = _feed(key.fileobj, pending)  # type: ignore[arg-type]
                    done = not pending
                else:
                    chunk = _read(key.fileobj)  # type: ignore[arg-type]
                    if chunk is None:
                        continue
                    run.streams[key.data].feed(chunk)
                    done = not chunk
                if done:
                    selector.unregister(key.fileobj)
                    with contextlib.suppress(OSError):
                        key.fileobj.close()  # type: ignore[union-attr]


def _feed(pipe: IO[bytes], pending: memoryview) -> memoryview:
    """Write what the pipe takes now; nothing is left to write once the hook stops reading."""
    try:
        return pending[os.write(pipe.fileno(), pending[:_CHUNK]):]
    except BlockingIOError:
        return pending
    except OSError:  # the hook closed its stdin (or exited) without reading it all
        return pending[:0]


def _read(pipe: IO[bytes]) -> bytes | None:
    """A chunk, ``b""`` at end of file, or ``None`` when nothing is there after all."""
    try:
        return os.read(pipe.fileno(), _CHUNK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _reap(proc: subprocess.Popen[bytes], run: _Run) -> int | None:
    """The shell's exit status: waited for until the timeout, then killed and waited for briefly."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        return proc.wait(run.left())
    run.kill(proc.pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        return proc.wait(EXIT_GRACE)
    return None


# -- asyncio: a subprocess protocol, so nothing waits for the pipes to close ----------


class _Protocol(asyncio.SubprocessProtocol):
    """Keeps output as it arrives and says when the shell has exited.

    ``asyncio.subprocess.Process.wait`` also waits for the pipes to close,
    which a background job can hold open for as long as it likes.
    """

    def __init__(self, run: _Run, loop: asyncio.AbstractEventLoop) -> None:
        self.run = run
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.run.streams[fd].feed(data if isinstance(data, bytes) else data.encode())

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def arun_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """:func:`run_hook` on the running event loop, without blocking it."""
    loop = asyncio.get_running_loop()
    run = _Run(command, timeout)
    try:
        transport, protocol = await loop.subprocess_shell(
            lambda: _Protocol(run, loop), command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, start_new_session=True)
    except Exception as exc:  # noqa: BLE001
        return _could_not_start(command, exc)
    try:
        stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
        stdin.write(_payload(event))
        stdin.close()  # after the buffer is written: end of file for the hook
        if not await _within(protocol.exited, run.left()):
            run.kill(transport.get_pid())
            await _within(protocol.exited, EXIT_GRACE)
        await _within(protocol.drained, EXIT_GRACE)
        return run.outcome(transport.get_returncode())
    except BaseException as exc:
        run.kill(transport.get_pid())
        if not isinstance(exc, Exception):
            # cancellation propagates, after the hook is ended (and reaped, if it is quick)
            await asyncio.shield(_within(protocol.exited, EXIT_GRACE))
            raise
        return _failed(command, exc)
    finally:
        transport.close()  # closes the pipes a background job may still hold


async def _within(future: asyncio.Future[None], seconds: float) -> bool:
    """Whether ``future`` is done within ``seconds`` (it is not cancelled if not)."""
    if not future.done():
        await asyncio.wait([future], timeout=seconds)
    return future.done()
