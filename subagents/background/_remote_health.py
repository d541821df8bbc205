"""Server health: bounded requests, and a circuit breaker per server url.

A server that hangs or is down must never stall the parent. Every request
to a server goes through :meth:`ServerHealth.call`, which bounds it in time
and counts it: a request that cannot reach the server (refused, reset,
timed out) opens the server's circuit, and while it is open no request is
sent there at all -- :class:`ServerUnavailable` is raised at once, saying
when the next try is due. The interval grows with each failure in a row
(``base_s``, doubled, up to ``max_s``); one answer from the server (any HTTP
status: it answered) closes the circuit again.

Example::

    health = ServerHealth()
    thread = await health.call("http://127.0.0.1:2024", client.threads.get(tid), timeout_s=10)
    health.note("http://127.0.0.1:2024")   # None while the server answers
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

T = TypeVar("T")

BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 120.0


class ServerUnavailable(ConnectionError):
    """A server did not answer (or is skipped while its circuit is open).

    ``url`` names the server, ``reason`` the last failure and ``retry_in_s``
    how long until the next request to it is tried.
    """

    def __init__(self, url: str, reason: str, retry_in_s: float, *, skipped: bool = False) -> None:
        self.url, self.reason, self.retry_in_s, self.skipped = url, reason, retry_in_s, skipped
        what = "not tried: the server at" if skipped else "could not reach the server at"
        super().__init__(f"{what} {url} ({reason}); next try in {retry_in_s:.1f} s")


@dataclasses.dataclass
class _Circuit:
    failures: int = 0
    since: float = 0.0
    reason: str = ""
    open_until: float = 0.0


class ServerHealth:
    """Circuit breakers by server url, and the bounded request that feeds them."""

    def __init__(self, *, base_s: float = BACKOFF_BASE_S, max_s: float = BACKOFF_MAX_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base_s, self.max_s, self._clock = base_s, max_s, clock
        self._circuits: dict[str, _Circuit] = {}

    def retry_in(self, url: str) -> float:
        """Seconds until the server may be tried again (0: now)."""
        circuit = self._circuits.get(url)
        return max(0.0, circuit.open_until - self._clock()) if circuit else 0.0

    def check(self, url: str) -> None:
        """Raise :class:`ServerUnavailable` if the server's circuit is open."""
        wait = self.retry_in(url)
        if wait > 0:
            raise ServerUnavailable(url, self._circuits[url].reason, wait, skipped=True)

    def failed(self, url: str, reason: str) -> ServerUnavailable:
        """Count a failure; return the error to raise."""
        circuit = self._circuits.setdefault(url, _Circuit())
        if circuit.failures == 0:
            circuit.since = time.time()
        circuit.failures += 1
        circuit.reason = reason
        interval = min(self.max_s, self.base_s * 2 ** (circuit.failures - 1))
        circuit.open_until = self._clock() + interval
        return ServerUnavailable(url, reason, interval)

    def answered(self, url: str) -> None:
        """The server answered: close its circuit."""
        self._circuits.pop(url, None)

    def note(self, url: str) -> str | None:
        """A stable line for a task on this server while it is unreachable (``None`` when it is fine).

        It changes only when the outage does (not every turn), so it can live
        in the ledger without rewriting it on each poll.
        """
        circuit = self._circuits.get(url)
        if circuit is None or circuit.failures == 0:
            return None
        since = datetime.fromtimestamp(circuit.since, tz=UTC).strftime("%H:%M:%S UTC")
        return (f"unreachable: the server at {url} has not answered since {since} "
                f"({circuit.reason}); this status is the last one seen, and polling backs off")

    async def call(self, url: str, request: Awaitable[T], *, timeout_s: float) -> T:
        """Await ``request`` to the server at ``url`` within ``timeout_s``.

        Raises :class:`ServerUnavailable` if the circuit is open (the request
        is not sent), the server cannot be reached, or it does not answer in
        time. HTTP errors (the server answered) pass through unchanged.
        """
        try:
            self.check(url)
        except ServerUnavailable:
            _close(request)
            raise
        try:
            async with asyncio.timeout(timeout_s):
                result = await request
        except TimeoutError:
            raise self.failed(url, f"no answer within {timeout_s:g} s") from None
        except Exception as exc:
            if _is_transport_error(exc):
                raise self.failed(url, f"{type(exc).__name__}: {_short(exc)}") from None
            self.answered(url)
            raise
        self.answered(url)
        return result


def _is_transport_error(exc: BaseException) -> bool:
    import httpx

    return isinstance(exc, (httpx.TransportError, OSError))


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or "(no message)"
    return text if len(text) <= 160 else text[:159] + "…"


def _close(request: Awaitable[Any]) -> None:
    close = getattr(request, "close", None)
    if callable(close):
        close()
