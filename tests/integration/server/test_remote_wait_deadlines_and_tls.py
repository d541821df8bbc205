"""Attacks on waiting for remote tasks (deadlines, poll intervals) and on the cached TLS context.

A tiny stand-in server on loopback answers the batched status search (a thread
busy until its end time, then idle) and the run's join.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.fault_servers import RecordingServer

from subagents import wait_for_background
from subagents._registry import SubagentRegistry
from subagents._spec import RemoteSubagentSpec
from subagents.background._tasks import BackgroundTasks


class _StandIn(RecordingServer):
    """The recording fake server, answering as one thread busy until ``end_in`` seconds from now."""

    def __init__(self, end_in: float | None) -> None:
        self.end_at = None if end_in is None else time.monotonic() + end_in
        super().__init__()

    def ended(self) -> bool:
        return self.end_at is not None and time.monotonic() >= self.end_at

    def reply(self, method: str, path: str, body: Any) -> Any:  # type: ignore[override]
        while path.endswith("/join") and not self.ended():
            time.sleep(0.01)
        status = "idle" if self.ended() else "busy"
        if method == "POST":  # the batched status search
            return [{"thread_id": t, "status": status, "values": {}, "interrupts": {}}
                    for t in (body or {}).get("ids") or []]
        return {"thread_id": "th0", "status": status, "values": {}}


@pytest.fixture
def remote_task():
    def make(end_in: float | None):
        server = _StandIn(end_in)
        spec = RemoteSubagentSpec(name="w", description="w", graph_id="w", url=server.url, request_timeout_s=2)
        tasks = BackgroundTasks(SubagentRegistry([]), [spec])
        made.append((server, tasks))
        ledger = {"t0": {"id": "t0", "runner": "remote", "agent_type": "w", "status": "running",
                         "thread_id": "th0", "run_id": "r0", "updated_at": 0}}
        return server, tasks, ledger

    made: list = []
    yield make
    for server, tasks in made:
        tasks.runtime.close()
        server.close()


@pytest.mark.parametrize("timeout_s", [float("inf"), 1e10])
def test_an_unbounded_deadline_waits_for_the_end_and_never_raises(remote_task, timeout_s):
    server, tasks, ledger = remote_task(end_in=0.3)
    assert wait_for_background(ledger, timeout_s=timeout_s, tasks=tasks) is True


@pytest.mark.parametrize("every_s", [0, -1.0, float("nan")])
def test_a_poll_interval_that_would_busy_loop_is_refused_naming_it(remote_task, every_s):
    server, tasks, ledger = remote_task(end_in=None)
    with pytest.raises(ValueError, match="every_s"):
        wait_for_background(ledger, timeout_s=0.5, tasks=tasks, every_s=every_s)
    assert server.requests == []


def test_a_nan_deadline_is_refused_naming_it(remote_task):
    server, tasks, ledger = remote_task(end_in=None)
    with pytest.raises(ValueError, match="timeout_s"):
        wait_for_background(ledger, timeout_s=float("nan"), tasks=tasks)


def _ca_and_server_cert(tmp_path, tag):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def cert(subject, issuer, key, signer, ca):
        now = datetime.datetime.now(datetime.UTC)
        b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
             .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
             .not_valid_after(now + datetime.timedelta(days=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if not ca:
            import ipaddress
            b = b.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                critical=False)
        return b.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"test ca {tag}")])
    ca = cert(ca_name, ca_name, ca_key, ca_key, True)
    leaf = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name, key, ca_key, False)
    pem = serialization.Encoding.PEM
    chain, keyfile = tmp_path / f"server-{tag}.pem", tmp_path / f"server-{tag}.key"
    chain.write_bytes(leaf.public_bytes(pem))
    keyfile.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return ca.public_bytes(pem), chain, keyfile


def test_a_ca_file_rewritten_in_place_is_honoured_not_pinned(tmp_path, monkeypatch):
    """A CA removed from SSL_CERT_FILE stops being trusted by new clients; the new CA is trusted."""
    import asyncio
    import ssl

    from subagents.background._remote import RemoteClientPool

    old_ca, old_chain, old_key = _ca_and_server_cert(tmp_path, "old")
    new_ca, new_chain, new_key = _ca_and_server_cert(tmp_path, "new")
    bundle = tmp_path / "ca.pem"
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    server = _StandIn(end_in=0)
    url = f"https://127.0.0.1:{server._server.server_address[1]}"
    spec = RemoteSubagentSpec(name="w", description="w", graph_id="w", url=url)


    async def reaches() -> bool:
        pool = RemoteClientPool()
        try:
            await pool.client(spec).http.get("/threads/th0")
            return True
        except Exception:  # noqa: BLE001 - a refused certificate
            return False
        finally:
            await pool.aclose()

    contexts = {}
    for tag, chain, key in (("old", old_chain, old_key), ("new", new_chain, new_key)):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(chain, key)
        contexts[tag] = ctx
    plain = server._server.get_request
    server._server.get_request = lambda: (lambda s, a: (current[0].wrap_socket(s, server_side=True), a))(*plain())
    current = [contexts["old"]]
    try:
        bundle.write_bytes(old_ca)
        assert asyncio.run(reaches()) is True
        time.sleep(0.01)
        bundle.write_bytes(new_ca + b"\n")  # rotated in place: the old CA is no longer trusted
        assert asyncio.run(reaches()) is False
        current[0] = contexts["new"]
        assert asyncio.run(reaches()) is True
    finally:
        server.close()
