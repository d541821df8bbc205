"""Remote background tasks: runs on a LangGraph Server, polled in batches, and orphans adopted.

Each task gets one server thread (its metadata names the parent thread, the agent type, the task and the tool call)
and a run on it; ``thread_id`` and ``run_id`` are in the ledger record, so a restarted parent loses nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import json
import math
import os
import ssl
import sys
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from subagents._errors import RemoteAnswerError, RemoteConfigError, RemoteStartError, ServerUnavailable, brief
from subagents._metering import token_count
from subagents._outcome import task_id_for
from subagents._runner import TASK_ID_METADATA_KEY
from subagents._spec import RemoteSubagentSpec
from subagents.background._ledger import AsyncTaskRecord, is_count, now
from subagents.definitions._permissions import pending_interrupts, resume_for

if TYPE_CHECKING:
    import httpx


# Server health: every request bounded in time, and a circuit breaker per url. Failures (no answer, or a gateway's
# :data:`OUTAGE_STATUSES`) open it only in a row with no answer for ``base_s`` (one dead instance behind a balancer
# fails every other request); then nothing is sent until the next try. The interval doubles per outage, not per
# request (a burst in flight fails as one step), up to ``max_s``; any answer closes it.

T = TypeVar("T")

BACKOFF_BASE_S = 2.0
BACKOFF_MAX_S = 120.0
OUTAGE_STATUSES = frozenset({500, 502, 503, 504})
"""HTTP answers that count as the server being down (a gateway's, not the server's own verdict)."""

FAILURES_TO_OPEN = 3
"""Failed requests in a row, with no answer between, that open a server's circuit."""

SEQUENTIAL_FAILURES_TO_OPEN = 5
"""Failed requests in a row, each sent after the last one failed, that open a circuit without waiting ``base_s``."""


@dataclasses.dataclass
class _Circuit:
    failures: int = 0  # failed requests since the server last answered
    sequential: int = 0  # of them, those sent after the one before had failed (not a concurrent burst)
    failed_at: float = -math.inf  # when the last failure came back: a request sent before it was concurrent
    opened: int = 0  # times the circuit opened since then: each doubles the wait
    since: float = 0.0
    reason: str = ""
    open_until: float = 0.0
    opened_at: float = 0.0


class ServerHealth:
    """Circuit breakers by server url, and the bounded request that feeds them."""

    def __init__(self, *, base_s: float = BACKOFF_BASE_S, max_s: float = BACKOFF_MAX_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.base_s, self.max_s, self._clock = base_s, max_s, clock
        self._circuits: dict[str, _Circuit] = {}
        self._answered_at: dict[str, float] = {}

    def retry_in(self, url: str) -> float:
        """Seconds until the server may be tried again (0: now)."""
        circuit = self._circuits.get(url)
        return max(0.0, circuit.open_until - self._clock()) if circuit else 0.0

    def check(self, url: str) -> None:
        """Raise :class:`ServerUnavailable` if the server's circuit is open."""
        if (wait := self.retry_in(url)) > 0:
            raise ServerUnavailable(url, self._circuits[url].reason, wait, skipped=True)

    def failed(self, url: str, reason: str, *, sent_at: float | None = None) -> ServerUnavailable:
        """Count a failure; return the error to raise (sent before the circuit last opened: the same step)."""
        circuit = self._circuits.setdefault(url, _Circuit())
        circuit.reason = reason
        now_ = self._clock()
        if circuit.opened and sent_at is not None and sent_at < circuit.opened_at:
            return ServerUnavailable(url, reason, max(0.0, circuit.open_until - now_))
        if circuit.failures == 0:
            circuit.since = time.time()
        circuit.failures += 1
        circuit.sequential += sent_at is None or sent_at > circuit.failed_at
        circuit.failed_at = now_
        if circuit.sequential < SEQUENTIAL_FAILURES_TO_OPEN and (
                circuit.failures < FAILURES_TO_OPEN or self._answered_at.get(url, -math.inf) > now_ - self.base_s):
            return ServerUnavailable(url, reason, 0.0)  # some requests fail, others are answered: not down
        circuit.opened += 1
        interval = min(self.max_s, self.base_s * 2 ** (circuit.opened - 1))
        circuit.opened_at, circuit.open_until = now_, now_ + interval
        return ServerUnavailable(url, reason, interval)

    def answered(self, url: str) -> None:
        """The server answered: close its circuit."""
        self._circuits.pop(url, None)
        self._answered_at[url] = self._clock()

    def note(self, url: str) -> str | None:
        """A line for a task on this server while it is unreachable; stable per outage (not rewritten per poll)."""
        circuit = self._circuits.get(url)
        if circuit is None or circuit.failures == 0:
            return None
        since = datetime.fromtimestamp(circuit.since, tz=UTC).strftime("%H:%M:%S UTC")
        return (f"unreachable: the server at {url} has not answered since {since} "
                f"({circuit.reason}); this status is the last one seen, and polling backs off")

    async def call(self, url: str, request: Awaitable[T], *, timeout_s: float) -> T:
        """Await ``request`` to the server at ``url`` within ``timeout_s``; :class:`ServerUnavailable` if the circuit
        is open (nothing is sent) or the request fails as above; other HTTP errors (the server answered) pass."""
        try:
            self.check(url)
        except ServerUnavailable:
            if callable(close := getattr(request, "close", None)):
                close()  # never sent: not left behind unawaited
            raise
        sent = self._clock()
        try:
            async with asyncio.timeout(timeout_s):
                result = await request
        except TimeoutError:
            raise self.failed(url, f"no answer within {timeout_s:g} s", sent_at=sent) from None
        except Exception as exc:
            import httpx

            if isinstance(exc, (httpx.TransportError, OSError)):
                raise self.failed(url, _reason(exc), sent_at=sent) from None
            if (code := status_code(exc)) in OUTAGE_STATUSES:
                raise self.failed(url, f"HTTP {code}", sent_at=sent) from None
            self.answered(url)
            raise
        self.answered(url)
        return result


# How a server's runs and threads read as task fields: a run that ends ``success`` (or ``interrupted``, on aegra)
# with interrupts on its thread waits for approval; ``interrupted`` without is cancelled; an unknown one is ``lost``.

def run_id_of(run: Any) -> str:
    """The ``run_id`` of a run a server answered with; :class:`RemoteAnswerError` saying so when it has none."""
    run_id = run.get("run_id") if isinstance(run, Mapping) else None
    if not isinstance(run_id, str) or not run_id:
        raise RemoteAnswerError(f"the server answered with a run that has no run_id: {brief(run)}")
    return run_id


def run_status(status: str | None) -> str:  # a just-created run's task status
    return "running" if status == "running" else "pending"


def fields_from(run: Mapping[str, Any], thread: Mapping[str, Any], *, server: str = "the server") -> dict[str, Any]:
    """The task's fields from its run and thread; a finished run whose values cannot be read is an ``error``."""
    if run.get("status") == "success" and not interrupts_of(thread) and thread.get("values") is None:
        return {"run_id": run_id_of(run), "status": "error", "finished_at": now(), "approval_request": None,
                "error": f"{server} finished the run but did not show its answer (no values on thread "
                f"{thread.get('thread_id') or '?'} or its state); the answer may still be on the server"}
    return {"run_id": run_id_of(run), **_fields_of(run.get("status"), thread, interrupts_of(thread))}


def _fields_of(status: Any, thread: Mapping[str, Any], interrupts: list[Any]) -> dict[str, Any]:
    """The task's fields once its run is read ``status``, its thread holding ``interrupts``."""
    values = thread.get("values") or {}
    fields: dict[str, Any] = usage(values)
    if status in ("pending", "running"):
        fields["status"] = status
        return fields
    if status in ("success", "interrupted") and interrupts:
        fields.update(status="waiting_for_approval", approval_request=pending_interrupts(interrupts))
        return fields
    fields.update(finished_at=now(), approval_request=None)
    if status == "success":
        fields.update(status="completed", result=answer(values))
    elif status == "interrupted":
        fields["status"] = "cancelled"
    elif status == "timeout":
        fields.update(status="error", error="the run timed out on the server")
    else:
        problem = thread.get("error") or {}
        message = problem.get("message") if isinstance(problem, Mapping) else problem
        kind = problem.get("error") if isinstance(problem, Mapping) else None
        text = f"{kind}: {message}" if kind and message else (str(message or "") or f"the run ended {status!r}")
        fields.update(status="error", error=text)
    return fields


ENDED_THREAD_STATUSES = frozenset({"idle", "interrupted"})  # their values say how it ended (an error needs its run)


def fields_from_thread(thread: Mapping[str, Any]) -> dict[str, Any] | None:
    """The task's fields from its thread alone, or ``None`` if it cannot tell."""
    status = thread.get("status")
    if status not in ENDED_THREAD_STATUSES:
        return None
    if thread.get("values") is None and not interrupts_of(thread):
        return None  # values are optional on a thread object (aegra has none): its state endpoint tells
    # An idle thread's last run succeeded; only an interrupted one waits (its interrupts) or was cancelled.
    return _fields_of("success" if status == "idle" else "interrupted", thread,
                      interrupts_of(thread) if status == "interrupted" else [])


def fields_from_join(run_id: str, body: Any) -> dict[str, Any] | None:
    """A finished task's fields from its run's join body alone (a structured response, or a last AI message with no
    tool calls), or ``None``: the run must be read (an error, interrupt or partial values say too little)."""
    if not isinstance(body, Mapping) or "__error__" in body or "__interrupt__" in body:
        return None
    messages = body.get("messages")
    last = messages[-1] if isinstance(messages, list) and messages else None
    finished = body.get("structured_response") is not None or (
        isinstance(last, Mapping) and last.get("type") in ("ai", "AIMessageChunk") and not last.get("tool_calls")
        and not last.get("invalid_tool_calls"))
    if not finished:
        return None
    return {"run_id": run_id, **usage(body), "status": "completed", "result": answer(body), "finished_at": now(),
            "approval_request": None}


def with_state(thread: Mapping[str, Any], state: Any) -> dict[str, Any]:
    """``thread`` with the values and interrupts of its state (a thread object's ``values`` is optional)."""
    merged = dict(thread)
    if not isinstance(state, Mapping):
        return merged
    if merged.get("values") is None:
        merged["values"] = state.get("values")
    if not interrupts_of(merged):
        found = state.get("interrupts") or [i for t in state.get("tasks") or [] if isinstance(t, Mapping)
                                            for i in t.get("interrupts") or []]
        if found:
            merged["interrupts"] = found
    return merged


def interrupts_of(thread: Mapping[str, Any]) -> list[Any]:
    """The thread's pending interrupts: the server keeps them by task id (a flat list is read too)."""
    found = thread.get("interrupts") or {}
    groups = found.values() if isinstance(found, Mapping) else [found]
    return [i for items in groups if isinstance(items, list) for i in items]


def _text(content: Any) -> str:
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    # A text block's text, a block that is text: a server's data, so checked.
    return "".join((b["text"] if isinstance(b.get("text"), str) else "") if isinstance(b, Mapping)
                   else b if isinstance(b, str) else _json(b)
                   for b in content if not isinstance(b, Mapping) or b.get("type") in (None, "text"))


def _json(value: Any) -> str:
    try:  # a value nested deeper than the recursion limit is named, not raised
        return json.dumps(value, default=str)
    except (RecursionError, ValueError, TypeError) as exc:
        return f"(an answer that cannot be shown as JSON: {type(exc).__name__})"


def answer(values: Mapping[str, Any]) -> str:
    """The child's answer: its structured response as JSON, else its last non-empty AI text (a state that
    is not a mapping, an entrypoint's text, is the answer)."""
    if not isinstance(values, Mapping):
        return values if isinstance(values, str) else _json(values)
    structured = values.get("structured_response")
    if structured is not None:
        return _json(structured)
    messages = values.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, Mapping) and message.get("type") in ("ai", "AIMessageChunk"):
            text = _text(message.get("content")).strip()
            if text:
                return text
    return ""


MAX_USAGE = 2**53 - 1  # the largest usage count read from a server: any checkpointer (and JSON) holds it exactly


def usage(values: Any) -> dict[str, int]:
    """Model calls and tokens of the child's AI messages (a server's data: each read by ``token_count``, capped)."""
    calls = inp = out = 0
    messages = values.get("messages") if isinstance(values, Mapping) else None
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, Mapping) and message.get("type") == "ai":
            calls += 1
            meta = message.get("usage_metadata")
            if isinstance(meta, Mapping):
                inp += token_count(meta.get("input_tokens"))
                out += token_count(meta.get("output_tokens"))
    return {"model_calls": min(calls, MAX_USAGE), "input_tokens": min(inp, MAX_USAGE),
            "output_tokens": min(out, MAX_USAGE)}


def answers_for_open_tool_calls(thread: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Tool results for calls a stopped run left unanswered (models reject open calls)."""
    values = thread.get("values")
    messages = values.get("messages") if isinstance(values, Mapping) else None
    messages = messages if isinstance(messages, list) else []
    answered = {m.get("tool_call_id") for m in messages if isinstance(m, Mapping) and m.get("type") == "tool"}
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("type") == "ai":
            return [
                {"role": "tool", "tool_call_id": call["id"], "name": call.get("name"),
                 "content": "Not run: the caller stopped this step to send a new instruction."}
                for call in message.get("tool_calls") or []
                if call.get("id") not in answered
            ]
    return []


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error, if it has one."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) or getattr(exc, "status_code", None)


# SDK clients: one per server and credentials, one pool per loop. Built here, not by ``langgraph_sdk.get_client``:
# headers are exactly the spec's (no API key from the environment), the transport does not retry (the circuit backs
# off instead), and the TLS context (40-90 ms to load) is built once per certificate settings.

USER_AGENT = "governed-subagents"
MAX_CONNECTIONS = 100  # per server and credentials; more requests queue (bounded by their timeouts)
MAX_IDLE_CONNECTIONS = 20  # httpx's default: httpcore scans them all at each hand-out (100 was 2x slower)
KEEPALIVE_S = 2.0  # idle ones dropped before common servers drop them (uvicorn: 5 s), never reused as they close


class RemoteClientPool:
    """Clients keyed by (url, headers), and the health of each server."""

    def __init__(self, health: ServerHealth | None = None) -> None:
        self._clients: dict[tuple[str, str], Any] = {}
        self.health = health if health is not None else ServerHealth()
        self.without_id_search: set[str] = set()  # urls that refused a search by ids (aegra): polled by metadata

    def client(self, spec: RemoteSubagentSpec) -> Any:
        """The shared client for ``spec``'s server and headers (raises ``RemoteConfigError``)."""
        import httpx

        headers = spec.request_headers()
        key = (spec.server, _fingerprint(headers))
        client = self._clients.get(key)
        if client is not None and not client.http.client.is_closed:
            return client
        if spec.url is None:  # the SDK would wait for an app that never comes
            if (client := in_process_client(spec.start_timeout_s, headers)) is None:
                raise RemoteConfigError(
                    f"remote subagent {spec.name!r} has no url, so it runs on the LangGraph Server its parent runs "
                    "on (langgraph dev, the LangGraph Platform or aegra), and this parent does not run on one; "
                    "give the spec the url of a server")
        else:
            # SSL_CERT_FILE, SSL_CERT_DIR and the file's stamp: a CA file rewritten in place is reloaded.
            cert_file, cert_dir = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
            try:
                st = os.stat(cert_file) if cert_file else None
            except OSError:
                st = None
            tls = _tls_context(cert_file, cert_dir, (st.st_mtime_ns, st.st_size, st.st_ino) if st else None)
            limits = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_IDLE_CONNECTIONS,
                                  keepalive_expiry=KEEPALIVE_S)
            transport = httpx.AsyncHTTPTransport(verify=tls, retries=0, limits=limits)
            client = _sdk_client(spec.url, transport, spec.start_timeout_s, {"User-Agent": USER_AGENT, **headers})
        self._clients[key] = client
        return client

    async def aclose(self) -> None:
        """Close every client's connections."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            with contextlib.suppress(Exception):  # closing must never fail the caller
                await client.aclose()


def _sdk_client(base_url: str, transport: Any, timeout_s: float, headers: Mapping[str, str]) -> Any:
    import httpx
    from langgraph_sdk.client import LangGraphClient

    return LangGraphClient(httpx.AsyncClient(base_url=base_url, transport=transport, headers=headers,
                                             timeout=httpx.Timeout(timeout_s, connect=min(5.0, timeout_s))))


SERVER_MODULE = "langgraph_api.server"  # loaded in a process that is a LangGraph Server (langgraph dev, Platform)
AEGRA_APP_MODULE = "aegra_api.main"  # aegra's documented entry point (uvicorn aegra_api.main:app)


def in_process_client(timeout_s: float, headers: Mapping[str, str] | None = None) -> Any:
    """A client of the LangGraph Server this process runs, reached in-process; ``None`` when it runs none."""
    headers = {"User-Agent": USER_AGENT, **(headers or {})}
    if SERVER_MODULE in sys.modules:
        from langgraph_sdk import get_client

        return get_client(url=None, api_key=None, headers=headers,
                          timeout=(min(5.0, timeout_s), timeout_s, timeout_s, timeout_s))
    aegra_app = getattr(sys.modules.get(AEGRA_APP_MODULE), "app", None)
    if aegra_app is None:
        return None
    import httpx

    inner = httpx.ASGITransport(app=aegra_app)

    class OnServingLoop(httpx.AsyncBaseTransport):  # each call moved to the server's loop, its answer read whole
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            loop = serving_loop()
            if loop is None or loop is asyncio.get_running_loop():
                return await inner.handle_async_request(request)
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
                inner.handle_async_request(request), loop))

        async def aclose(self) -> None:
            await inner.aclose()

    return _sdk_client("http://aegra.in-process", OnServingLoop(), timeout_s, headers)


# An in-process server app (aegra) holds connections bound to the loop it serves on, so each request to it is
# handed back to the loop the parent's graph last awaited the runtime from: the server's.

_loop: asyncio.AbstractEventLoop | None = None


def note_caller_loop() -> None:  # the running loop (if any) is the one the parent's graph runs on
    global _loop
    with contextlib.suppress(RuntimeError):  # called from no loop: nothing to remember
        _loop = asyncio.get_running_loop()


def serving_loop() -> asyncio.AbstractEventLoop | None:  # the loop last noted, while it still runs
    loop = _loop
    return loop if loop is not None and loop.is_running() and not loop.is_closed() else None


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None, stamp: object = None) -> ssl.SSLContext:
    if cert_file:  # httpx's default context for these settings (not the environment read again)
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _fingerprint(headers: dict[str, str]) -> str:  # so no key is kept as a dict key in plain text
    text = "\n".join(f"{k.lower()}:{v}" for k, v in sorted(headers.items()))
    return hashlib.sha256(text.encode()).hexdigest()


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RemoteClientPool] = weakref.WeakKeyDictionary()


def shared_client_pool() -> RemoteClientPool:
    """The pool of the running event loop (created on first use)."""
    loop = asyncio.get_running_loop()
    if loop not in _pools:
        _pools[loop] = RemoteClientPool()
    return _pools[loop]


# The remote runner. Starts are idempotent: a task's thread id is derived from its id and attempt and created with
# ``if_exists="do_nothing"``, so a repeated start adopts the run it made before. Every request is bounded and goes
# through the circuit breaker; a turn's refresh is bounded by ``refresh_budget_s``. Steering cancels the current
# run, answers the tool calls it left open and starts a new run on the same thread; a follow-up is a new run too.

__all__ = ["RemoteStartError", "RemoteSubagentSpec", "RemoteTaskRunner", "task_thread_id"]

DEFAULT_REFRESH_BUDGET_S = 3.0  # bound on refreshing every remote task before one parent model call

START_ID_METADATA_KEY = "subagent_start_id"
_THREAD_NAMESPACE = uuid.UUID("3f4c2b8e-6a51-4f0e-9d1c-7b2a5e8f0c13")


def task_thread_id(task_id: str, attempt: int) -> str:
    """The server thread id of one attempt of a task (stable, so a start can be repeated)."""
    return str(uuid.uuid5(_THREAD_NAMESPACE, f"{task_id}/{attempt}"))


class RemoteTaskRunner:
    """Starts, checks, steers, follows up and cancels tasks on LangGraph Servers (on the background loop).

    Args:
        specs: the remote subagents.
        pool: the clients and server health; default: the running loop's :func:`shared_client_pool`.
        refresh_budget_s: bound on one :meth:`refresh_many` (a parent turn's poll).
    """

    def __init__(self, specs: Sequence[RemoteSubagentSpec], *, pool: RemoteClientPool | None = None,
                 refresh_budget_s: float = DEFAULT_REFRESH_BUDGET_S) -> None:
        self.specs = {s.name: s for s in specs}
        self.refresh_budget_s = refresh_budget_s
        self.client_pool = pool  # None: the running loop's shared one
        # Starts not yet answered, by (parent thread, tool call): orphan adoption waits for them.
        self._in_flight: dict[tuple[str, str], asyncio.Future[tuple[str, Any]]] = {}

    @property
    def pool(self) -> RemoteClientPool:
        return self.client_pool if self.client_pool is not None else shared_client_pool()

    async def request(self, spec: RemoteSubagentSpec, request: Awaitable[T], *, poll: bool = False) -> T:
        """Await one request to ``spec``'s server, bounded and through its circuit breaker."""
        timeout = spec.request_timeout_s if poll else spec.start_timeout_s
        return await self.pool.health.call(spec.server, request, timeout_s=timeout)

    async def start(self, task_id: str, agent_type: str, description: str, *,
                    parent_thread_id: str | None, tool_call_id: str | None,
                    attempt: int = 1) -> dict[str, Any]:
        """Create (or find again) the task's thread and first run; return the record's new fields."""
        spec = self.specs[agent_type]
        about = {"parent_thread_id": parent_thread_id, "agent_type": agent_type, "tool_call_id": tool_call_id,
                 TASK_ID_METADATA_KEY: task_id, "attempt": attempt}
        # Run to its answer even if this caller is cancelled (a run-create sent may be made whether or not its answer
        # is read); listed for wait_for_starts until answered.
        job = asyncio.ensure_future(self._start(spec, task_thread_id(task_id, attempt), about, description))
        if isinstance(parent_thread_id, str) and isinstance(tool_call_id, str):
            self._in_flight[key := (parent_thread_id, tool_call_id)] = job
            job.add_done_callback(functools.partial(self._landed, key))
        try:
            thread_id, run = await asyncio.shield(job)
            run_id_of(run)
        except (ServerUnavailable, RemoteConfigError, RemoteStartError):
            raise
        except Exception as exc:  # noqa: BLE001 - named with the server below
            raise RemoteStartError(spec.server, _reason(exc)) from None
        return _new_run(run, thread_id=thread_id, parent_thread_id=parent_thread_id, owner=None, attempt=attempt,
                        turns=1, started_at=now())

    def _landed(self, key: tuple[str, str], job: asyncio.Future[tuple[str, Any]]) -> None:
        if self._in_flight.get(key) is job:
            del self._in_flight[key]
        if not job.cancelled():
            job.exception()  # read: a start whose caller left is not an unhandled error

    async def wait_for_starts(self, parent_thread_id: str, call_ids: Iterable[str]) -> None:
        """Return once none of these tool calls' starts is in flight in this process (bound it from outside)."""
        loop = asyncio.get_running_loop()
        jobs = [job for call in call_ids if (job := self._in_flight.get((parent_thread_id, call))) is not None
                and job.get_loop() is loop]
        if jobs:
            await asyncio.wait(jobs)

    async def _start(self, spec: RemoteSubagentSpec, thread_id: str, about: Mapping[str, Any],
                     description: str) -> tuple[str, Any]:
        client = self.pool.client(spec)
        start_id = uuid.uuid4().hex
        metadata = {**spec.metadata, **about, START_ID_METADATA_KEY: start_id}
        thread = await self.request(spec, client.threads.create(
            thread_id=thread_id, metadata=metadata, if_exists="do_nothing"))
        made_here = (thread.get("metadata") or {}).get(START_ID_METADATA_KEY) == start_id
        if not made_here and (run := await self.latest_run(spec, thread_id)) is not None:
            return thread_id, run  # started before (a repeated step): adopt that run
        try:
            run = await self._run(spec, thread_id, about, strategy="reject",
                                  input={"messages": [{"role": "user", "content": description}]})
        except ServerUnavailable:
            raise
        except Exception as exc:
            if status_code(exc) == 409 and (run := await self.latest_run(spec, thread_id)) is not None:
                return thread_id, run  # a concurrent start of the same task won
            if made_here and (status_code(exc) or 0) in range(400, 500):
                with contextlib.suppress(Exception):  # leave no empty thread; the start's error is the one told
                    await self.request(spec, self.pool.client(spec).threads.delete(thread_id))
            raise RemoteStartError(spec.server, _reason(exc)) from None
        return thread_id, run

    async def latest_run(self, spec: RemoteSubagentSpec, thread_id: str) -> Any:
        """The thread's most recent run, or ``None``."""
        runs = await self.request(spec, self.pool.client(spec).runs.list(thread_id, limit=1), poll=True)
        return runs[0] if isinstance(runs, list) and runs else None

    async def landed_late(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """The run a ``lost`` task's start made after all (it reached the server late), as record fields;
        ``None`` if its derived thread has none. A retry adopts it rather than run the task twice."""
        spec = self.specs.get(record["agent_type"])
        if spec is None or record.get("status") != "lost" or record.get("run_id"):
            return None
        attempt = record.get("attempt") or 1
        thread_id = record.get("thread_id") or task_thread_id(record["id"], attempt if is_count(attempt) else 1)
        try:
            run = await self.latest_run(spec, thread_id)
        except ServerUnavailable:
            raise
        except Exception as exc:
            if status_code(exc) == 404:
                return None
            raise RemoteStartError(spec.server, _reason(exc)) from None
        return None if run is None else _new_run(run, thread_id=thread_id, started_at=now())

    async def refresh(self, record: Mapping[str, Any], *, ended: bool = False) -> tuple[dict[str, Any], str | None]:
        """The record's current fields from the server, and a note if it could not be read (``ended``: by a join)."""
        spec = self.specs.get(record["agent_type"])
        if spec is None:
            return {}, f"no remote subagent named {record['agent_type']!r} is configured here"
        try:
            fields, note = await (self._read_ended if ended else self._read)(spec, record), None
        except ServerUnavailable as exc:
            fields, note = {}, self.pool.health.note(spec.server) or str(exc)
        except Exception as exc:  # noqa: BLE001 - reported as a note, never raised into the parent
            fields, note = {}, f"the server at {spec.server} could not report this task: {_reason(exc)}"
        if self.deadline_due(spec, record, fields, note, ended=ended):
            return await self.end_at_deadline(spec, record, fields, note), None
        return fields, note

    def deadline_due(self, spec: RemoteSubagentSpec, record: Mapping[str, Any], fields: Mapping[str, Any],
                     note: str | None, *, ended: bool = False) -> bool:
        """Whether a read (``fields``, or a failed read's ``note``) ends the task at its deadline; a failed read only
        once the circuit's longest backoff past it (its run may have ended with its answer)."""
        if not past_deadline(spec, record, fields, ended=ended and note is None):
            return False
        return note is None or now() - float(record["started_at"]) >= (spec.timeout_s or 0) + self.pool.health.max_s

    async def end_at_deadline(self, spec: RemoteSubagentSpec, record: Mapping[str, Any], fields: Mapping[str, Any],
                              note: str | None = None) -> dict[str, Any]:
        """The fields that end a task past ``spec.timeout_s`` (``{}``: asked again later): a run still going is
        cancelled, one that ended first is read; ``note``: it could not be read, its outcome is unknown."""
        def ended(error: str) -> dict[str, Any]:
            return {"status": "error", "error": error, "finished_at": now(), "note": None, "announced": False}

        if note is not None:
            return ended(f"unreachable at its deadline (timeout_s={spec.timeout_s:g} s): {note}; its run's outcome "
                         "is unknown")
        error = f"timed out: not finished within timeout_s={spec.timeout_s:g} s of its start"
        if fields.get("status") == "cancelled":
            return {**fields, **ended(error + "; its run was cancelled on the server")}
        try:
            run = await self._retried(spec, lambda: self.pool.client(spec).runs.cancel(record["thread_id"],
                                                                                       record["run_id"]))
            # aegra answers the cancel of a run that had ended with that run, unchanged
            ended_first = isinstance(run, Mapping) and run.get("status") in ("success", "error", "timeout")
        except Exception as exc:  # noqa: BLE001 - the task ends either way; the error says what the server missed
            if isinstance(exc, ServerUnavailable):
                return {}  # the run may end with its answer meanwhile: asked again by the next poll
            if status_code(exc) != 409:
                how = ("its run is unknown to the server" if status_code(exc) == 404 else
                       f"the server at {spec.server} could not be told to cancel its run ({_reason(exc)})")
                return ended(f"{error}; {how}")
            ended_first = True
        if not ended_first:
            return ended(error + "; its run was cancelled on the server")
        try:
            return await self._read_ended(spec, record)
        except Exception:  # noqa: BLE001 - the answer is on the server: the next poll reads it
            return {}

    async def _retried(self, spec: RemoteSubagentSpec, request: Callable[[], Awaitable[T]], *,
                       poll: bool = False) -> T:
        """``request()`` sent again at once while it fails and the circuit stays closed, up to
        :data:`FAILURES_TO_OPEN` tries (a dead instance behind a balancer)."""
        tries = FAILURES_TO_OPEN
        while True:
            tries -= 1
            try:
                return await self.request(spec, request(), poll=poll)
            except ServerUnavailable as exc:
                if exc.skipped or not tries:
                    raise

    async def _read(self, spec: RemoteSubagentSpec, record: Mapping[str, Any]) -> dict[str, Any]:
        client = self.pool.client(spec)
        try:
            # each request tried again at once if it fails (see _retried): the run may have ended with its answer
            run = await self._retried(spec, lambda: client.runs.get(record["thread_id"], record["run_id"]), poll=True)
            thread = await self._retried(spec, lambda: client.threads.get(record["thread_id"]), poll=True)
            if thread.get("values") is None and run.get("status") not in ("pending", "running"):
                thread = await self._with_state(spec, thread, record["thread_id"], poll=True)
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            return _gone(spec, record)
        return fields_from(run, thread, server=f"the server at {spec.server}")

    async def _read_ended(self, spec: RemoteSubagentSpec, record: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`_read` for a task whose thread has ended: one join; what that cannot settle reads run and state."""
        thread_id, run_id = record["thread_id"], record["run_id"]
        try:  # the run ended: its answer is there, and a read that fails is tried again at once
            body = await self._retried(spec, lambda: self._join_request(spec, thread_id, run_id), poll=True)
        except Exception as exc:
            if status_code(exc) != 404:
                raise
            return _gone(spec, record)
        fields = fields_from_join(run_id, body)
        if fields is not None:
            return fields
        client = self.pool.client(spec)
        answers: tuple[Any, ...] = await asyncio.gather(
            self._retried(spec, lambda: client.runs.get(thread_id, run_id), poll=True),
            self._retried(spec, lambda: client.threads.get_state(thread_id), poll=True), return_exceptions=True)
        for answer in answers:
            if isinstance(answer, BaseException):
                if isinstance(answer, ServerUnavailable) or status_code(answer) != 404:
                    raise answer
                return _gone(spec, record)
        run, state = answers
        error = body.get("__error__") if isinstance(body, Mapping) else None  # {"error": kind, "message": text}
        thread = {"thread_id": thread_id, **({"error": dict(error)} if isinstance(error, Mapping) and error else {})}
        return fields_from(run, with_state(thread, state), server=f"the server at {spec.server}")

    def _join_request(self, spec: RemoteSubagentSpec, thread_id: str, run_id: str) -> Awaitable[Any]:
        # The join's own route, asked once: the SDK's runs.join reconnects, and warns, when it fails.
        path = "/threads/{}/runs/{}/join".format(*(quote(str(i), safe="") for i in (thread_id, run_id)))
        return self.pool.client(spec).http.get(path)  # type: ignore[no-any-return]

    async def _with_state(self, spec: RemoteSubagentSpec, thread: Mapping[str, Any], thread_id: str, *,
                          poll: bool = False) -> dict[str, Any]:
        """``thread`` with its values read from the state endpoint (see :func:`with_state`)."""
        state = await self._retried(spec, lambda: self.pool.client(spec).threads.get_state(thread_id), poll=poll)
        return with_state(thread, state)

    async def join(self, record: Mapping[str, Any]) -> dict[str, Any] | None:
        """Wait for the record's run to end (a long-poll); its fields if that settles it, else ``None``. Raises on
        any fault, not counted for the circuit (a wait then polls)."""
        spec = self.specs[record["agent_type"]]
        self.pool.health.check(spec.server)  # an open circuit: not sent, the wait polls (and is refused) instead
        body = await self._join_request(spec, record["thread_id"], record["run_id"])
        return fields_from_join(record["run_id"], body)

    def reads_by_join(self, record: Mapping[str, Any]) -> bool:
        """Whether a wait joins this live task's run (a server polled by metadata, within the deadline)."""
        spec = self.specs.get(record.get("agent_type"))  # type: ignore[arg-type]
        return spec is not None and spec.server in self.pool.without_id_search and not past_deadline(spec, record, {})

    async def refresh_many(self, records: Sequence[Mapping[str, Any]]
                           ) -> dict[str, tuple[dict[str, Any], str | None]]:
        """``{task id: (fields, note)}`` within ``refresh_budget_s``: a task not reached waits for the next turn; a
        server that did not answer at all counts a failure and its tasks get a note."""
        out: dict[str, tuple[dict[str, Any], str | None]] = {}
        answered: set[str] = set()
        ended: set[str] = set()  # threads a search saw ended: their answers are there to read
        groups: dict[tuple[str, str], tuple[RemoteSubagentSpec, list[Mapping[str, Any]]]] = {}
        for record in records:
            spec = self.specs.get(record["agent_type"])
            if spec is None:
                out[record["id"]] = ({}, f"no remote subagent named {record['agent_type']!r} is configured here")
                continue
            groups.setdefault(caller_of(spec), (spec, []))[1].append(record)
        jobs = {key: asyncio.ensure_future(_refresh_server(self, spec, recs, out, answered, ended))
                for key, (spec, recs) in groups.items()}
        try:
            if jobs:
                await asyncio.wait(jobs.values(), timeout=self.refresh_budget_s)
        except asyncio.CancelledError:  # a caller's own deadline came first: leave no request behind
            for job in jobs.values():
                job.cancel()
            raise
        for key, job in jobs.items():
            url = key[0]
            if not job.done():
                job.cancel()
            elif not job.cancelled() and job.exception() is not None:
                answered.discard(url)
            left = [r for r in groups[key][1] if r["id"] not in out]
            if not left:
                continue
            if url in answered:  # a slow answer, not a dead server: the rest waits for the next turn
                out.update({r["id"]: ({}, r.get("note")) for r in left})
                continue
            failure = self.pool.health.failed(url, f"no answer within the {self.refresh_budget_s:g} s poll budget")
            note = self.pool.health.note(url) or str(failure)
            out.update({r["id"]: ({}, note) for r in left})
        expired = [(spec, r) for r in records if (spec := self.specs.get(r["agent_type"])) is not None
                   and self.deadline_due(spec, r, *out.get(r["id"], ({}, None)), ended=r.get("thread_id") in ended)]

        async def end(spec: RemoteSubagentSpec, record: Mapping[str, Any]) -> None:
            out[record["id"]] = (await self.end_at_deadline(spec, record, *out.get(record["id"], ({}, None))), None)

        if ends := [asyncio.ensure_future(end(spec, r)) for spec, r in expired]:
            await asyncio.wait(ends, timeout=self.refresh_budget_s)
        for job in ends:
            job.cancel()  # a cancel the server did not answer in time is asked again next turn
        return out

    async def steer(self, record: Mapping[str, Any], message: str) -> tuple[dict[str, Any], str]:
        """Steer a running task, answer a waiting one, or follow up a finished one."""
        spec = self.specs[record["agent_type"]]
        client = self.pool.client(spec)
        thread_id = record["thread_id"]
        status = record["status"]
        about = {TASK_ID_METADATA_KEY: record["id"], "agent_type": record["agent_type"]}
        if status == "waiting_for_approval":
            resume = resume_for(message, record.get("approval_request") or [])
            run = await self._run(spec, thread_id, about, command={"resume": resume})
            what = "answered: the task resumes"
        else:
            if status in ("pending", "running"):
                await self._cancel_quietly(spec, thread_id, record["run_id"])
                what = "the current run was stopped and restarted with the new instruction"
            else:
                what = "sent as a follow-up on the same thread"
            thread = await self.request(spec, client.threads.get(thread_id))
            if thread.get("values") is None:
                thread = await self._with_state(spec, thread, thread_id)
            messages = [*answers_for_open_tool_calls(thread), {"role": "user", "content": message}]
            run = await self._run(spec, thread_id, about, input={"messages": messages})
        turns = int(record.get("turns") or 1) + (0 if status == "waiting_for_approval" else 1)
        # A follow-up is new work: timeout_s counts from it.
        restarted = {"started_at": now()} if status not in ("pending", "running", "waiting_for_approval") else {}
        return _new_run(run, turns=turns, **restarted), what

    async def cancel(self, record: Mapping[str, Any]) -> dict[str, Any]:
        """Cancel the task's run on the server."""
        spec = self.specs[record["agent_type"]]
        await self._cancel_quietly(spec, record["thread_id"], record["run_id"])
        return {"status": "cancelled", "finished_at": now(), "approval_request": None, "note": None}

    async def _run(self, spec: RemoteSubagentSpec, thread_id: str, about: Mapping[str, Any], *,
                   strategy: str = "interrupt", **payload: Any) -> Any:
        return await self.request(spec, self.pool.client(spec).runs.create(
            thread_id, spec.graph_id, metadata=dict(about), config=dict(spec.config) if spec.config else None,
            multitask_strategy=strategy, webhook=spec.webhook, **payload))

    async def _cancel_quietly(self, spec: RemoteSubagentSpec, thread_id: str, run_id: str) -> None:
        """Cancel a run and wait for it to stop; a run that already ended is fine."""
        try:
            await self.request(spec, self.pool.client(spec).runs.cancel(thread_id, run_id, wait=True))
        except Exception as exc:  # noqa: BLE001 - an ended run cannot be cancelled, which is fine
            if status_code(exc) not in (404, 409):
                raise


def _new_run(run: Any, **fields: Any) -> dict[str, Any]:
    """The fields of a task whose run ``run`` has just been made: what the last one ended with is cleared."""
    return {"status": run_status(run.get("status")), "run_id": run_id_of(run), "finished_at": None, "result": None,
            "error": None, "approval_request": None, "note": None, "announced": False, **fields}


def _gone(spec: RemoteSubagentSpec, record: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a task whose thread its server no longer knows."""
    return {"status": "lost", "finished_at": now(),
            "error": f"the server at {spec.server} no longer knows thread {record['thread_id']} (was it reset?); "
                     "call retry_async_task to run it again"}


def _reason(exc: BaseException) -> str:
    code = status_code(exc)
    text = " ".join(str(exc).split()) or "(no message)"
    text = text if len(text) <= 300 else text[:299] + "…"
    return f"HTTP {code}: {text}" if code else f"{type(exc).__name__}: {text}"


# Polling in batches, per server: one ``threads.search(ids=...)`` for the statuses, one for the values of those that
# ended, the rest read one by one. A server without search by ids (aegra) is searched by parent metadata.

_SEARCH_PAGE = 1000
_DETAIL_CONCURRENCY = 16


def past_deadline(spec: RemoteSubagentSpec, record: Mapping[str, Any], fields: Mapping[str, Any], *,
                  ended: bool = False) -> bool:
    """Whether a live task has outlived its spec's ``timeout_s`` unanswered (``cancelled`` read past it is the
    deadline's own cancel; ``ended`` with no status read: its answer is to be read, not given up)."""
    started = record.get("started_at")
    if spec.timeout_s is None or isinstance(started, bool) or not isinstance(started, (int, float)) \
            or not math.isfinite(started) or (ended and "status" not in fields):  # a record's field: anyone's
        return False
    return (record.get("status") in ("pending", "running")
            and fields.get("status", record.get("status")) in ("pending", "running", "cancelled")
            and now() - float(started) >= spec.timeout_s)


def caller_of(spec: RemoteSubagentSpec) -> tuple[str, str]:
    """The server url and a digest of the spec's headers (a key may see only its own threads)."""
    try:
        return spec.server, _fingerprint(spec.request_headers())
    except Exception:  # noqa: BLE001 - a key that cannot be read: its own group, failing on its own
        return spec.server, f"unreadable:{spec.name}"


async def _refresh_server(runner: RemoteTaskRunner, spec: RemoteSubagentSpec, records: list[Mapping[str, Any]],
                          out: dict[str, tuple[dict[str, Any], str | None]], answered: set[str],
                          seen_ended: set[str]) -> None:
    """Fill ``out`` for ``records``; ``seen_ended`` gets the threads the search saw ended."""
    try:
        states, ended = await _thread_states(runner, spec, records)
        answered.add(spec.server)
        seen_ended.update(ended, (t for t, row in states.items() if row.get("status") in ENDED_THREAD_STATUSES))
    except ServerUnavailable as exc:
        note = runner.pool.health.note(spec.server) or str(exc)
        out.update({r["id"]: ({}, note) for r in records})
        return
    except Exception:  # noqa: BLE001 - a server without any batched search: read each task
        states, ended = {}, set()
    stale = []
    for record in records:
        known = _KNOWN.get((str((states.get(record["thread_id"]) or {}).get("status")), record.get("status")))
        if known is not None:
            out[record["id"]] = (dict(known), None)
        else:
            stale.append(record)
    ended_rows = [r["thread_id"] for r in stale if (states.get(r["thread_id"]) or {}).get("status")
                  in ENDED_THREAD_STATUSES]
    if ended_rows and spec.server not in runner.pool.without_id_search:
        try:
            rows = await _thread_rows(runner, spec, ended_rows, ["thread_id", "status", "values", "interrupts"])
        except Exception:  # noqa: BLE001 - read them one by one below (retried: a dead instance behind a balancer)
            rows = {}
        for record in stale:
            # A row it cannot read (a server's data) is read one by one: only that task is told why.
            with contextlib.suppress(Exception):
                if (fields := fields_from_thread(rows[record["thread_id"]])) is not None:
                    out[record["id"]] = (fields, None)
    gate = asyncio.Semaphore(_DETAIL_CONCURRENCY)

    async def one(record: Mapping[str, Any]) -> None:
        async with gate:
            out[record["id"]] = await runner.refresh(record, ended=record["thread_id"] in ended)

    await asyncio.gather(*(one(r) for r in stale if r["id"] not in out))


async def _thread_states(runner: RemoteTaskRunner, spec: RemoteSubagentSpec, records: Sequence[Mapping[str, Any]]
                         ) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Live tasks' thread rows and the ended threads: one search by ids, or by metadata where refused (aegra)."""
    if spec.server not in runner.pool.without_id_search:
        try:
            return await _thread_rows(runner, spec, [r["thread_id"] for r in records], ["thread_id", "status"]), set()
        except Exception as exc:
            if status_code(exc) not in (400, 422):
                raise
            runner.pool.without_id_search.add(spec.server)
    return await _states_by_parent(runner, spec, records)


async def _states_by_parent(runner: RemoteTaskRunner, spec: RemoteSubagentSpec, records: Sequence[Mapping[str, Any]]
                            ) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """Thread rows by one metadata search per parent for busy and waiting threads; a live one not among them ended."""
    parents: dict[str, set[str]] = {}
    for record in records:
        parent = record.get("parent_thread_id")
        if isinstance(parent, str) and parent:
            parents.setdefault(parent, set()).add(record["thread_id"])
    waiting = any(r.get("status") == "waiting_for_approval" for r in records)
    searches = [(parent, status) for parent in parents for status in ("busy", "interrupted")
                if status == "busy" or waiting]
    found = await asyncio.gather(*(_parent_threads(runner, spec, parent, status=status) for parent, status in searches))
    states: dict[str, dict[str, Any]] = {}
    for (_, status), (rows, complete) in zip(searches, found, strict=True):
        if not complete:  # more than it reads: none can be told ended
            raise RemoteAnswerError(f"more than {_SEARCH_PAGES * _SEARCH_PAGE} {status} threads of one parent")
        states.update({row["thread_id"]: {"thread_id": row["thread_id"], "status": row.get("status")}
                       for row in rows if isinstance(row, Mapping) and isinstance(row.get("thread_id"), str)})
    ended = {thread for threads in parents.values() for thread in threads if thread not in states}
    return states, ended


async def _thread_rows(runner: RemoteTaskRunner, spec: RemoteSubagentSpec, thread_ids: list[str],
                       select: list[str]) -> dict[str, dict[str, Any]]:
    client = runner.pool.client(spec)
    rows: dict[str, dict[str, Any]] = {}
    for i in range(0, len(thread_ids), _SEARCH_PAGE):
        page = thread_ids[i:i + _SEARCH_PAGE]
        found = await runner.request(spec, client.threads.search(ids=page, select=select, limit=len(page)),
                                   poll=True)
        rows.update({row["thread_id"]: row for row in found})
    return rows


# What a batched (thread status, task status) alone tells (``{}``: nothing changed); any other needs a full read.
_KNOWN: dict[tuple[str, Any], dict[str, Any]] = {
    ("busy", "running"): {}, ("interrupted", "waiting_for_approval"): {}, ("busy", "pending"): {"status": "running"},
}


class OrphanSearch:
    """Which unrecorded remote starts are still to be looked for: each once per process, once asked."""

    def __init__(self, remote_names: Collection[str], start_tool: str) -> None:
        self.remote_names, self.start_tool = remote_names, start_tool
        self._looked_for: set[tuple[str, str]] = set()

    def due(self, messages: Iterable[Any], ledger: Mapping[str, Mapping[str, Any]],
            parent_thread_id: str | None, *, failed: Collection[str] = ()
            ) -> tuple[str, dict[str, tuple[str, str]]] | None:
        """``(parent thread id, missing starts)`` to pass to :func:`adopt_orphans`, or ``None``: the remote starts
        (``{tool call id: (subagent_type, description)}``) with no ledger record, but ``failed``."""
        if not self.remote_names or not parent_thread_id:
            return None
        recorded = {r.get("tool_call_id") for r in ledger.values()} | set(failed)
        fresh: dict[str, tuple[str, str]] = {}
        for message in messages:
            for call in getattr(message, "tool_calls", None) or ():
                args = call.get("args") or {}
                kind = args.get("subagent_type")
                if (call.get("name") == self.start_tool and kind in self.remote_names and call.get("id") not in
                        recorded and (parent_thread_id, call["id"]) not in self._looked_for):
                    fresh[call["id"]] = (str(kind), str(args.get("description") or ""))
        self._looked_for.update((parent_thread_id, k) for k in fresh)
        return (parent_thread_id, fresh) if fresh else None

    def forget(self, parent_thread_id: str, call_ids: Iterable[str]) -> None:
        """Look for these starts again on a later turn: their server was not asked (down, or out of time)."""
        self._looked_for.difference_update((parent_thread_id, c) for c in call_ids)


async def adopt_orphans(runner: RemoteTaskRunner, parent_thread_id: str,
                        missing: Mapping[str, tuple[str, str]], *, left_open: Collection[str] = (),
                        search: OrphanSearch | None = None) -> dict[str, dict[str, Any]]:
    """Ledger records for the server threads of the ``missing`` starts (orphans: their parent died while starting
    them). ``left_open``: calls a stopped run left unanswered, ``lost`` if their server holds no thread of them.
    Never raises, takes at most ``refresh_budget_s``; starts not asked are handed back to ``search``."""
    records: dict[str, dict[str, Any]] = {}
    settled: set[str] = set()
    with contextlib.suppress(Exception):  # best effort: out of time, or a server's answer it cannot read
        async with asyncio.timeout(runner.refresh_budget_s):
            # A start of this process still waiting for its answer is not an orphan yet: what it makes is found on
            # the server once it lands (out of time, it is looked for again on a later turn).
            await runner.wait_for_starts(parent_thread_id, missing)
            await _adopt_into(records, runner, parent_thread_id, missing, left_open=left_open, settled=settled)
    if search is not None:
        search.forget(parent_thread_id, (c for c in missing if c not in settled))
    return records


_SEARCH_PAGES = 20  # pages read per parent; a parent with more is not declared empty of any


async def _parent_threads(runner: RemoteTaskRunner, spec: RemoteSubagentSpec, parent_thread_id: str, *,
                          select: list[str] | None = None, **filters: Any) -> tuple[list[Any], bool]:
    """The server's threads of ``parent_thread_id``, and whether that is all (aegra refuses ``select``)."""
    rows: list[Any] = []
    for page in range(_SEARCH_PAGES):
        search = functools.partial(runner.pool.client(spec).threads.search,
                                   metadata={"parent_thread_id": parent_thread_id}, limit=_SEARCH_PAGE,
                                   offset=page * _SEARCH_PAGE, **filters)
        try:
            found = await runner.request(spec, search(select=select) if select else search(), poll=True)
        except Exception as exc:
            if select is None or status_code(exc) not in (400, 422):
                raise
            select = None
            found = await runner.request(spec, search(), poll=True)
        found = found if isinstance(found, list) else []
        rows.extend(found)
        if len(found) < _SEARCH_PAGE:
            return rows, True
    return rows, False


async def _adopt_into(records: dict[str, dict[str, Any]], runner: RemoteTaskRunner, parent_thread_id: str,
                      missing: Mapping[str, tuple[str, str]], *, left_open: Collection[str] = (),
                      settled: set[str] | None = None) -> None:
    settled = set() if settled is None else settled
    groups: dict[tuple[str, str], tuple[RemoteSubagentSpec, list[str]]] = {}
    for wanted, (kind, _) in missing.items():
        if kind in runner.specs:
            groups.setdefault(caller_of(runner.specs[kind]), (runner.specs[kind], []))[1].append(wanted)
        else:
            settled.add(wanted)  # no server to ask here
    for spec, call_ids in groups.values():
        try:
            rows, complete = await _parent_threads(runner, spec, parent_thread_id, select=["thread_id", "metadata"])
        except Exception:  # noqa: BLE001 - adoption is best effort: asked again on a later turn
            continue
        seen: set[str] = set()
        failed: set[str] = set()
        for row in rows:
            meta = row.get("metadata") if isinstance(row, Mapping) else None
            if not isinstance(meta, Mapping):
                continue
            call_id = meta.get("tool_call_id")
            task_id = meta.get(TASK_ID_METADATA_KEY)
            if (not isinstance(call_id, str) or call_id not in call_ids or not isinstance(task_id, str)
                    or not task_id or missing[call_id][0] != meta.get("agent_type")):
                continue
            attempt = meta.get("attempt") or 1
            if not is_count(attempt):  # a server's metadata, written by anyone: not a count to carry on
                continue
            seen.add(call_id)
            if task_id in records and records[task_id]["attempt"] >= attempt:
                continue
            try:
                run = await runner.latest_run(spec, row["thread_id"])
                if run is not None:
                    records[task_id] = _record(
                        task_id, missing[call_id], call_id, status=run_status(run.get("status")), started_at=now(),
                        thread_id=row["thread_id"], run_id=run_id_of(run), attempt=attempt,
                        parent_thread_id=parent_thread_id)
                else:  # the parent stopped between creating the thread and starting its run: never silently lost
                    records[task_id] = _lost(task_id, missing[call_id], call_id, "the parent stopped after creating "
                                             "this task's thread and before starting its run",
                                             thread_id=row["thread_id"], attempt=attempt)
            except Exception:  # noqa: BLE001 - adoption is best effort (a server's answer it cannot read)
                failed.add(call_id)
        for wanted in call_ids:
            if wanted in failed:
                continue
            if wanted not in seen and wanted in left_open and complete:
                lost_id = task_id_for(parent_thread_id, "", wanted)
                records.setdefault(lost_id, _lost(lost_id, missing[wanted], wanted, "the run stopped before this "
                                                  f"start reached its server (the server at {spec.server} has no "
                                                  "thread of it)"))
            settled.add(wanted)


def _lost(task_id: str, call: tuple[str, str], call_id: str, error: str, **fields: Any) -> dict[str, Any]:
    return _record(task_id, call, call_id, status="lost", error=f"{error}; retry_async_task starts it", **fields)


def _record(task_id: str, call: tuple[str, str], call_id: str, **fields: Any) -> dict[str, Any]:
    agent_type, description = call
    return AsyncTaskRecord(id=task_id, agent_type=agent_type, runner="remote", description=description,
                           tool_call_id=call_id, created_at=now(), **fields).model_dump()
