"""SDK clients for LangGraph Servers: one per server and credentials, shared, closable.

Every agent object that talks to the same server with the same headers
shares one HTTP connection pool, instead of each opening its own and never
closing it. The client is built here, not by ``langgraph_sdk.get_client``:

* headers are exactly the spec's :meth:`~subagents.RemoteSubagentSpec.request_headers`
  -- no API key is ever picked up from the environment;
* the transport does not retry: a dead server fails in milliseconds and the
  :class:`~subagents.background._remote_health.ServerHealth` circuit backs off instead;
  idle connections are let go after 2 s, before the server closes them;
* the TLS context (the CA bundle, 40-90 ms to load) is built once per
  process and certificate settings (``SSL_CERT_FILE``/``SSL_CERT_DIR``), not once per client;
* the socket timeouts are the spec's ``start_timeout_s`` (each request is
  also bounded by its own, shorter deadline).

A pool belongs to one event loop (HTTP connections cannot move between
loops); :func:`shared_client_pool` gives each loop its own. Whoever owns the
loop closes the pool with :meth:`RemoteClientPool.aclose`; a closed pool
opens new clients on next use, so closing is never fatal.

Example (on the background loop)::

    pool = shared_client_pool()
    client = pool.client(spec)          # a langgraph_sdk LangGraphClient
    await pool.aclose()
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import ssl
import weakref
from typing import Any

from subagents.background._remote_health import ServerHealth
from subagents.background._remote_spec import RemoteSubagentSpec

USER_AGENT = "governed-subagents"
MAX_CONNECTIONS = 100
"""Connections per server and credentials; more requests queue for one (bounded by their timeouts)."""

MAX_IDLE_CONNECTIONS = 20
"""Idle connections kept open (httpx's default). httpcore checks every idle
connection each time it hands out one, so keeping all 100 made 50 parallel
starts spend most of their time scanning the pool (2x slower than raw SDK)."""

KEEPALIVE_S = 2.0
"""Idle connections are dropped before common servers drop them (uvicorn: 5 s), so no request is
sent on a connection the server is closing (a ``ReadError`` with no response)."""


class RemoteClientPool:
    """Clients keyed by (url, headers), and the health of each server."""

    def __init__(self, health: ServerHealth | None = None) -> None:
        self._clients: dict[tuple[str, str], Any] = {}
        self.health = health if health is not None else ServerHealth()

    def __len__(self) -> int:
        return len(self._clients)

    def client(self, spec: RemoteSubagentSpec) -> Any:
        """The shared client for ``spec``'s server and headers (raises ``RemoteConfigError``)."""
        headers = spec.request_headers()
        key = (spec.url, _fingerprint(headers))
        client = self._clients.get(key)
        if client is None or client.http.client.is_closed:
            client = self._clients[key] = _new_client(spec, headers)
        return client

    async def aclose(self) -> None:
        """Close every client's connections."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            try:
                await client.aclose()
            except Exception:  # noqa: BLE001 - closing must never fail the caller
                pass


def _new_client(spec: RemoteSubagentSpec, headers: dict[str, str]) -> Any:
    import httpx
    from langgraph_sdk.client import LangGraphClient

    http = httpx.AsyncClient(
        base_url=spec.url,
        transport=httpx.AsyncHTTPTransport(
            verify=_tls_context(*_cert_settings()),
            retries=0,
            limits=httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_IDLE_CONNECTIONS,
                                keepalive_expiry=KEEPALIVE_S),
        ),
        timeout=httpx.Timeout(spec.start_timeout_s, connect=min(5.0, spec.start_timeout_s)),
        headers={"User-Agent": USER_AGENT, **headers},
    )
    return LangGraphClient(http)


def _cert_settings() -> tuple[str | None, str | None, tuple[int, int, int] | None]:
    """``SSL_CERT_FILE``, ``SSL_CERT_DIR`` and the file's stamp: a CA file rewritten in place is reloaded."""
    cert_file, cert_dir = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    try:
        st = os.stat(cert_file) if cert_file else None
    except OSError:
        st = None
    return cert_file, cert_dir, (st.st_mtime_ns, st.st_size, st.st_ino) if st else None


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None, stamp: object = None) -> ssl.SSLContext:
    """httpx's default context for these settings, built from them (not the environment read again)."""
    if cert_file:
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _fingerprint(headers: dict[str, str]) -> str:
    """A digest of the headers, so no key is kept as a dict key in plain text."""
    text = "\n".join(f"{k.lower()}:{v}" for k, v in sorted(headers.items()))
    return hashlib.sha256(text.encode()).hexdigest()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RemoteClientPool] = weakref.WeakKeyDictionary()


def shared_client_pool() -> RemoteClientPool:
    """The pool of the running event loop (created on first use)."""
    loop = asyncio.get_running_loop()
    pool = _pools.get(loop)
    if pool is None:
        pool = _pools[loop] = RemoteClientPool()
    return pool
