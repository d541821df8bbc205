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

Example::

    with relayed_stderr(console), Live(tree, console=console):
        ...
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator

from rich.console import Console
from rich.text import Text

from deep_agent._terminal_text import printable

STDERR = 2
MAX_LINE = 4096
"""Longer lines are shown in pieces of this many bytes."""


class _Relay:
    """The process's one pipe in place of fd 2, and the thread that empties it."""

    def __init__(self) -> None:
        self.read_end, self.write_end = os.pipe()
        self.terminal = os.dup(STDERR)  # where stderr pointed before: the terminal
        self.console: Console | None = None  # set while a view is up
        self.lock = threading.Lock()
        threading.Thread(target=self._drain, name="stderr-relay", daemon=True).start()

    def _drain(self) -> None:
        pending = b""
        while chunk := os.read(self.read_end, 65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            while len(pending) > MAX_LINE:
                lines.append(pending[:MAX_LINE])
                pending = pending[MAX_LINE:]
            for line in lines:
                self._show(line)

    def _show(self, line: bytes) -> None:
        with self.lock:
            console = self.console
        try:
            if console is not None:
                text = printable(line.decode("utf-8", "replace").rstrip("\r"))
                console.print(Text(text, style="dim"), soft_wrap=True)
            else:
                os.write(self.terminal, line + b"\n")
        except Exception:  # noqa: BLE001 - a line lost is better than a relay that stops draining
            pass

    @contextlib.contextmanager
    def relaying(self, console: Console) -> Iterator[None]:
        sys.stderr.flush()
        os.dup2(self.write_end, STDERR)
        with self.lock:
            self.console = console
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(self.terminal, STDERR)
            with self.lock:
                self.console = None


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
