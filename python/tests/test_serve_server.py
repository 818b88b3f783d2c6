"""gpu_serve()'s server, run as R runs it (its command, settings on stdin) in front of a
real HTTP/1.1 server on a Unix socket standing for R's, and sent requests over real
HTTP on raw sockets: its limits, its framing, and what it forwards."""

from __future__ import annotations

import json
import socket
import socketserver
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from gpukeras.serve import server

TOO_LARGE = json.dumps({"error": "too_large", "message": "at most 1000 bytes"})
MAX_BYTES = 1000


class Backend(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """R's side: answers each request with what it got; POST /predict with a body
    that is not JSON gets a 400, as R refuses it."""

    daemon_threads = True

    def __init__(self, path: str) -> None:
        super().__init__(path, Handler)
        self.requests: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def address_string(self) -> str:
        return "r"

    def do_GET(self) -> None:
        self.answer(b"")

    def do_POST(self) -> None:
        self.answer(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def answer(self, body: bytes) -> None:
        got = {"path": self.path, "headers": dict(self.headers), "body": body.decode()}
        assert isinstance(self.server, Backend)
        self.server.requests.append(got)
        data = json.dumps(got).encode()
        status = 400 if self.path == "/predict" and body == b"not json" else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    def __init__(self, port: int, backend: Backend, process: subprocess.Popen) -> None:
        self.port = port
        self.backend = backend
        self.process = process

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def exchange(self, data: bytes, wait: float = 10) -> bytes:
        """What the service sends back for ``data`` until it closes the connection (or
        ``wait`` seconds pass)."""
        with self.connect() as sock:
            sock.sendall(data)
            return read_all(sock, wait)


def read_all(sock: socket.socket, wait: float) -> bytes:
    sock.settimeout(wait)
    out = b""
    try:
        while chunk := sock.recv(65536):
            out += chunk
    except TimeoutError:
        pass
    return out


def status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


def body(answer: bytes) -> dict:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    path = str(tmp_path / "r.sock")
    backend = Backend(path)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    port = free_port()
    process = subprocess.Popen(
        server.command()["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    settings = {
        "host": "127.0.0.1",
        "port": port,
        "backend": path,
        "max_bytes": MAX_BYTES,
        "too_large": TOO_LARGE,
        "body_seconds": 2,
        "head_seconds": 2,
        "keep_alive_seconds": 1,
        "max_connections": 50,
        "max_head_bytes": 8192,
        "refusal_delay": 0.3,
    }
    process.stdin.write(json.dumps(settings) + "\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "ready"
    yield Service(port, backend, process)
    process.kill()
    process.wait()
    backend.shutdown()
    backend.server_close()


HEAD = b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def test_requests_go_to_r_whole_and_answers_come_back_on_a_kept_alive_connection(
    service: Service,
) -> None:
    with service.connect() as sock:
        # two requests pipelined: both answered, in order
        sock.sendall(
            HEAD + b"Content-Length: 2\r\n\r\n[]GET /health?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        )
        sock.settimeout(5)
        file = sock.makefile("rb")
        answers = []
        for _ in range(2):
            line = file.readline()
            headers = {}
            while (header := file.readline()) != b"\r\n":
                name, value = header.decode().split(":", 1)
                headers[name.lower()] = value.strip()
            answers.append((line, headers, json.loads(file.read(int(headers["content-length"])))))
    assert [status(line) for line, _, _ in answers] == [200, 200]
    first, second = answers[0][2], answers[1][2]
    assert first["path"] == "/predict" and first["body"] == "[]"
    assert first["headers"]["content-type"] == "application/json"
    assert second["path"] == "/health?x=1"
    assert "connection" not in answers[0][1]  # kept alive, though R closed its own


def test_a_body_over_max_bytes_is_refused_from_its_length_unread(service: Service) -> None:
    began = time.monotonic()
    answer = service.exchange(HEAD + b"Content-Length: 52428800\r\nExpect: 100-continue\r\n\r\n")
    assert time.monotonic() - began < 1
    assert status(answer) == 413
    assert b"100 Continue" not in answer
    assert body(answer)["error"] == "too_large"
    assert service.backend.requests == []


def test_a_chunked_body_is_taken_within_max_bytes_and_refused_once_past_it(
    service: Service,
) -> None:
    chunked = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    answer = service.exchange(chunked + b"2\r\n[]\r\n0\r\n\r\n", wait=2)
    assert status(answer) == 200
    assert body(answer)["body"] == "[]"
    with service.connect() as sock:
        sock.sendall(chunked)
        for _ in range(3):
            sock.sendall(b"190\r\n" + b" " * 400 + b"\r\n")  # 1,200 bytes of 400
        answer = read_all(sock, 5)
    assert status(answer) == 413
    assert len(service.backend.requests) == 1


def test_a_body_that_does_not_arrive_in_time_gets_a_408_and_its_connection_closed(
    service: Service,
) -> None:
    began = time.monotonic()
    answer = service.exchange(HEAD + b"Content-Length: 500\r\n\r\n[[[", wait=10)
    assert 1.5 < time.monotonic() - began < 5
    assert status(answer) == 408
    assert body(answer)["error"] == "request_timeout"


def test_a_connection_without_a_whole_head_in_time_is_closed(service: Service) -> None:
    began = time.monotonic()
    assert service.exchange(b"GET /health HTTP/1.1\r\nHost: 1", wait=10) == b""
    assert time.monotonic() - began < 5


def test_an_idle_kept_alive_connection_is_closed(service: Service) -> None:
    with service.connect() as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        began = time.monotonic()
        answer = read_all(sock, 10)
    assert status(answer) == 200
    assert 0.5 < time.monotonic() - began < 5


def test_held_connections_leave_health_answering_at_once(service: Service) -> None:
    """40 connections (under max_connections, 50) hold an unfinished body each: /health
    answers at once meanwhile, and R saw none of them."""
    held = [service.connect() for _ in range(40)]
    for sock in held:
        sock.sendall(HEAD + b"Content-Length: 500\r\n\r\n[[[")
    time.sleep(0.3)
    for _ in range(5):
        began = time.monotonic()
        answer = service.exchange(b"GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        assert status(answer) == 200
        assert time.monotonic() - began < 0.5
    assert [request["path"] for request in service.backend.requests] == ["/health"] * 5
    for sock in held:
        sock.close()


def test_past_max_connections_a_request_gets_a_503(service: Service) -> None:
    held = []
    for _ in range(49):
        held.append(service.connect())
        held[-1].sendall(HEAD + b"Content-Length: 500\r\n\r\n[")
    time.sleep(0.3)
    assert status(service.exchange(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n", wait=2)) == 503
    for sock in held:
        sock.close()
    time.sleep(0.3)
    assert status(service.exchange(b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n", wait=2)) == 200


@pytest.mark.parametrize("whole", [True, False])
def test_headers_over_the_limit_get_a_431(service: Service, whole: bool) -> None:
    head = b"GET /health HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 9000
    answer = service.exchange(head + b"\r\n\r\n" if whole else head, wait=3)
    assert status(answer) == 431
    assert body(answer)["error"] == "headers_too_large"
    assert service.backend.requests == []


def test_upgrade_is_not_honoured(service: Service) -> None:
    answer = service.exchange(
        b"GET /health HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        wait=2,
    )
    assert status(answer) == 200
    forwarded = service.backend.requests[0]["headers"]
    assert "Upgrade" not in forwarded and "Connection" not in forwarded


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 2\r\nContent-Length: 3\r\n",
        b"Content-Length: +2\r\n",
        b"Content-Length: -2\r\n",
        b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n",
        b"Transfer-Encoding : chunked\r\n",
    ],
)
def test_malformed_framing_gets_a_400(service: Service, framing: bytes) -> None:
    answer = service.exchange(HEAD + framing + b"\r\n[]", wait=3)
    assert status(answer) == 400
    assert body(answer)["error"] == "bad_request"
    assert service.backend.requests == []


def test_a_bare_line_feed_ends_the_head_for_the_server_and_r_alike(service: Service) -> None:
    """A bare LF before ``Content-Length`` ends the head, as h11 reads it: the request has
    no body, and what follows is a request of its own, not valid."""
    answer = service.exchange(HEAD + b"\nContent-Length: 2\r\n\r\n[]", wait=3)
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"HTTP/1.1 400 Bad Request" in answer
    assert [request["body"] for request in service.backend.requests] == [""]


def test_a_body_r_refuses_is_answered_late(service: Service) -> None:
    began = time.monotonic()
    answer = service.exchange(HEAD + b"Content-Length: 8\r\nConnection: close\r\n\r\nnot json")
    assert status(answer) == 400
    assert time.monotonic() - began >= 0.3


def test_the_server_ends_when_its_stdin_closes(service: Service) -> None:
    assert service.process.stdin is not None
    service.process.stdin.close()
    assert service.process.wait(10) == 0
