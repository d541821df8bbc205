"""While the live view is up, what anything writes to the terminal's stderr is shown above it.

rich's ``Live`` redraws its lines in place, so a line another process writes
straight to the terminal (an MCP server's start-up banner on stderr, a
library's warning) lands inside the tree: it is overwritten, or leaves half a
line and a stale copy of the tree behind. :func:`relayed_stderr` points file
descriptor 2 at a pipe while it is entered; a thread reads the pipe and
prints each line through the console, escaped and dim, above the live tree.

A process started meanwhile keeps the pipe as its stderr after the view
ends (a server a task connected to): the thread goes on reading for the
life of the process and writes what comes later to the real stderr, so such
a process never blocks on a full pipe. One pipe and one thread serve every
view of the process. When stderr is not a terminal (redirected to a file),
nothing is relayed: the file gets what it always got.

Nothing written is lost on the way: the lines of one read are printed
together (a burst of thousands costs a few redraws, not thousands), a line
without its newline is shown once the pipe has been quiet for
:data:`QUIET_S`, and leaving a view, like leaving the process, waits
(bounded) until everything written before it has been shown. While a view
is up, ``faulthandler`` (``PYTHONFAULTHANDLER``) writes to the terminal
itself, so a crash's report does not die in the pipe with the process.

Example::

    with relayed_stderr(console), Live(tree, console=console):
        ...
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import select
import sys
import threading
from collections.abc import Iterator

from rich.console import Console
from rich.text import Text

from deep_agent._terminal_text import printable

STDERR = 2
MAX_LINE = 4096
"""Longer lines are shown in pieces of this many bytes."""
QUIET_S = 0.2
"""How long the pipe stays quiet before a line without its newline is shown as it is."""
FLUSH_WAIT_S = 2.0
"""How long leaving a view (or the process) waits for what was written before it to be shown."""
_FLUSH = b"\x00\x1fstderr-relay-flush\x1f\x00"
"""Written into the pipe to learn when everything before it has been read (one write: never split)."""


class _Relay:
    """The process's one pipe in place of fd 2, and the thread that empties it."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.terminal = os.dup(STDERR)  # where stderr pointed before: the terminal
        self.console: Console | None = None  # set while a view is up
        self.lock = threading.Lock()
        self.flushed = threading.Event()
        self.flush_lock = threading.Lock()
        threading.Thread(target=self._drain, name="stderr-relay", daemon=True).start()
        atexit.register(self.flush)  # lines a server wrote after the last view, still in the pipe

    def _drain(self) -> None:
        pending = b""
        while True:
            ready, _, _ = select.select([self.read_end], [], [], QUIET_S if pending else None)
            if not ready:  # quiet: a line without its newline is shown as it is
                self._show([pending])
                pending = b""
                continue
            chunk = os.read(self.read_end, 65536)
            if not chunk:
                return
            *lines, pending = (pending + chunk).split(b"\n")
            while len(pending) > MAX_LINE:
                lines.append(pending[:MAX_LINE])
                pending = pending[MAX_LINE:]
            shown: list[bytes] = []
            for line in lines:
                if line.endswith(_FLUSH):  # everything written before this mark has now been read
                    shown.extend([line[:-len(_FLUSH)]] if line != _FLUSH else [])
                    self._show(shown)
                    shown = []
                    self.flushed.set()
                else:
                    shown.append(line)
            self._show(shown)

    def _show(self, lines: list[bytes]) -> None:
        if not lines:
            return
        with self.lock:
            console = self.console
        try:
            if console is not None:
                text = "\n".join(printable(line.decode("utf-8", "replace").rstrip("\r")) for line in lines)
                console.print(Text(text, style="dim"), soft_wrap=True)
            else:
                data = memoryview(b"".join(line + b"\n" for line in lines))
                while data:
                    data = data[os.write(self.terminal, data):]
        except Exception:  # noqa: BLE001 - lines lost are better than a relay that stops draining
            pass

    def flush(self) -> None:
        """Wait (at most :data:`FLUSH_WAIT_S`) until what was written to the pipe so far has been shown."""
        with self.flush_lock:
            self.flushed.clear()
            try:  # a pipe that stays full (a relay that cannot keep up) must not hold the caller
                if select.select([], [self.write_end], [], FLUSH_WAIT_S)[1]:
                    os.write(self.write_end, _FLUSH + b"\n")
                    self.flushed.wait(FLUSH_WAIT_S)
            except (OSError, ValueError):
                pass

    @contextlib.contextmanager
    def relaying(self, console: Console) -> Iterator[None]:
        _flush_stderr()
        faults = faulthandler.is_enabled()
        if faults:  # a crash report written into the pipe would die with the process
            faulthandler.enable(file=self.terminal, all_threads=True)
        os.dup2(self.write_end, STDERR)
        with self.lock:
            self.console = console
        try:
            yield
        finally:
            _flush_stderr()
            self.flush()  # printed through the console while it is still the view's
            os.dup2(self.terminal, STDERR)
            with self.lock:
                self.console = None
            if faults:
                with contextlib.suppress(Exception):  # no usable sys.stderr: leave it pointing at the terminal
                    faulthandler.enable(file=sys.stderr, all_threads=True)


def _flush_stderr() -> None:
    """Python's buffered stderr written out before fd 2 changes hands (a closed or missing one is skipped)."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()


_relay: _Relay | None = None
_relay_lock = threading.Lock()


@contextlib.contextmanager
def relayed_stderr(console: Console) -> Iterator[None]:
    """While entered, lines written to fd 2 are printed through ``console`` (when both are terminals)."""
    global _relay
    try:
        usable = console.is_terminal and os.isatty(STDERR)
    except (OSError, ValueError):
        usable = False
    if not usable:
        yield
        return
    with _relay_lock:
        if _relay is None:
            _relay = _Relay()
        relay = _relay
    with relay.relaying(console):
        yield
