"""Loopback servers that misbehave on purpose: a header recorder, and a proxy that hangs or drops.

* :class:`RecordingServer` answers just enough of the Agent Protocol for a
  task to start and be checked, and records every request's headers and the
  client port it came from (one port per TCP connection). Set its
  ``fail_with`` to an HTTP status (e.g. 502) to answer every request with it,
  as a load balancer in front of a restarting server does.
* :class:`FaultProxy` forwards to a real server until told to ``hang()``
  (accept connections and never answer), go ``down()`` (nothing listens:
  connections are refused) or ``bad_gateway()`` (answer every request 502
  itself, as a load balancer does while the servers behind it restart),
  and back ``up()``. It counts the HTTP requests it forwards, and those it
  answered 502.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_REQUEST_LINE = re.compile(rb"(?:GET|POST|PUT|PATCH|DELETE) /[^ ]* HTTP/1\.[01]\r\n")


class RecordingServer:
    """A fake LangGraph Server on loopback that records what clients send."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_with: int | None = None
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"null") if length else None
                headers = {k.lower(): v for k, v in self.headers.items()}
                recorder.requests.append({"method": self.command, "path": self.path, "headers": headers,
                                          "body": body, "client_port": self.client_address[1]})
                failing = recorder.fail_with
                payload = ({"detail": "bad gateway"} if failing is not None
                           else recorder.reply_to(self.command, self.path, body, headers))
                data = json.dumps(payload).encode()
                self.send_response(failing or recorder.status_for(self.command, self.path, body))
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = _answer

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def reply_to(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        """The answer to one request (a subclass may answer by the caller's headers)."""
        return self.reply(method, path, body)

    def status_for(self, method: str, path: str, body: Any) -> int:
        """The HTTP status of the answer (a subclass may refuse some requests)."""
        return 200

    @staticmethod
    def reply(method: str, path: str, body: Any) -> Any:
        if path.startswith("/threads/search"):
            return []
        if method == "POST" and path == "/threads":
            return {"thread_id": body.get("thread_id") or str(uuid.uuid4()), "metadata": body.get("metadata"),
                    "status": "idle", "values": {}}
        if method == "POST" and path.endswith("/runs"):
            return {"run_id": str(uuid.uuid4()), "status": "pending"}
        if method == "GET" and "/runs/" in path:
            return {"run_id": path.rsplit("/", 1)[-1], "status": "running"}
        if method == "GET" and path.endswith("/runs") or "/runs?" in path:
            return []
        return {"thread_id": path.split("/")[2] if path.count("/") >= 2 else "", "status": "busy",
                "values": {}, "metadata": {}}

    def header_values(self, name: str) -> list[str | None]:
        return [r["headers"].get(name.lower()) for r in self.requests]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class FaultProxy:
    """A TCP proxy on loopback in front of ``upstream`` (``host, port``) that can hang or go down.

    Given more upstreams it is a plain round-robin balancer: each request goes to the next one (on a
    connection of its own, closed after the answer), and one that refuses it is answered 502 (no health
    checks, no retry on another).
    """

    def __init__(self, upstream_url: str, *more_upstreams: str) -> None:
        self.upstreams = [(host, int(port)) for host, port in
                          (u.removeprefix("http://").split(":") for u in (upstream_url, *more_upstreams))]
        self.upstream = self.upstreams[0]
        self._turn = 0
        self.mode = "forward"
        self.requests = 0
        self.lines: list[bytes] = []
        """The request lines forwarded (``b"GET /threads/... HTTP/1.1"``), in order."""
        self.refuse: bytes | None = None
        """Cut any connection whose request contains these bytes (e.g. ``b"/join "``); counted in ``refused``."""
        self.refused = 0
        self.bad_gateways = 0
        """Requests answered 502 by the proxy itself (none of them reached the server)."""
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.port = 0
        self.up()
        self.url = f"http://127.0.0.1:{self.port}"

    def up(self) -> None:
        """Listen again (on the same port) and forward."""
        self.mode = "forward"
        if self._listener is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self.port))
            listener.listen(256)
            self.port = listener.getsockname()[1]
            self._listener = listener
            threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def hang(self) -> None:
        """Accept every new connection and never answer; cut the open ones (they hang on reconnect)."""
        self.mode = "hang"
        self._drop_connections()

    def bad_gateway(self) -> None:
        """Answer every request 502 without forwarding it; cut the open connections."""
        self.mode = "502"
        self._drop_connections()

    def down(self) -> None:
        """Stop listening: new connections are refused, open ones are cut."""
        self.mode = "down"
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; close alone does not
            except OSError:
                pass
            listener.close()
        self._drop_connections()

    def close(self) -> None:
        self.down()

    def _drop_connections(self) -> None:
        with self._lock:
            conns, self._open = self._open, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self._lock:
                self._open.append(client)
            if self.mode == "hang":
                continue  # accepted, never answered
            if self.mode == "502":
                threading.Thread(target=self._answer_502, args=(client,), daemon=True).start()
                continue
            if len(self.upstreams) > 1:
                threading.Thread(target=self._balance, args=(client,), daemon=True).start()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._open.append(server)
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    @staticmethod
    def _read_request(client: socket.socket) -> tuple[bytes, bytes] | None:
        """One request's head and body (by its content-length), or ``None`` if the client left."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        missing = (int(length.group(1)) if length else 0) - len(body)
        while missing > 0 and (chunk := client.recv(min(missing, 65536))):
            body += chunk
            missing -= len(chunk)
        return head, body

    def _balance(self, client: socket.socket) -> None:
        """Hand one request to the next upstream, its answer back, then close (a 502 if it refuses)."""
        try:
            request = self._read_request(client)
            if request is None:
                return
            head, body = request
            with self._lock:
                self._turn += 1
                upstream = self.upstreams[self._turn % len(self.upstreams)]
            try:
                server = socket.create_connection(upstream, timeout=5)
            except OSError:
                self._answer_502(client, request)
                return
            head = re.sub(rb"(?im)^connection:[^\r\n]*\r\n", b"", head + b"\r\n") + b"connection: close"
            with self._lock:
                self.requests += 1
                self.lines.append(head.split(b"\r\n", 1)[0])
            with server:
                server.settimeout(None)
                server.sendall(head + b"\r\n\r\n" + body)
                while data := server.recv(65536):
                    client.sendall(data)
        except OSError:
            pass
        finally:
            client.close()

    def _answer_502(self, client: socket.socket, request: tuple[bytes, bytes] | None = None) -> None:
        """Read one request (unless given) and answer it 502; the connection closes after it."""
        try:
            if request is None and self._read_request(client) is None:
                return
            payload = b'{"detail": "bad gateway"}'
            client.sendall(b"HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\n"
                           b"content-length: " + str(len(payload)).encode() + b"\r\nconnection: close\r\n\r\n"
                           + payload)
            with self._lock:
                self.bad_gateways += 1
        except OSError:
            pass
        finally:
            client.close()

    def _pump(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        try:
            while data := source.recv(65536):
                if upstream:
                    with self._lock:
                        found = _REQUEST_LINE.findall(data)
                        self.requests += len(found)
                        self.lines.extend(line.strip() for line in found)
                        if self.refuse is not None and self.refuse in data:
                            self.refused += 1
                            break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
