"""gpu_serve()'s front, run as R runs it (its command, settings on stdin) in front of a real
HTTP/1.1 server that keeps connections alive unless asked not to, as httpuv does."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpukeras.serve import serve_front

TOO_LARGE = json.dumps({"error": "too_large", "message": "at most 1000 bytes"})


class Backend(ThreadingHTTPServer):
    """R's side: answers each request with what it got (its Connection header and body)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[dict] = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the request says Connection: close

    def do_GET(self) -> None:
        self.answer(b"")

    def do_POST(self) -> None:
        self.answer(self.rfile.read(int(self.headers.get("Content-Length", 0))))

    def answer(self, body: bytes) -> None:
        got = {
            "path": self.path,
            "connection": self.headers.get_all("Connection"),
            "body": body.decode(),
        }
        assert isinstance(self.server, Backend)
        self.server.requests.append(got)
        data = json.dumps(got).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Running:
    def __init__(self, process: subprocess.Popen, port: int, backend: Backend) -> None:
        self.process, self.port, self.backend = process, port, backend

    def open_fds(self) -> int:
        return len(list(Path(f"/proc/{self.process.pid}/fd").iterdir()))


def start_front(backend_port: int, **settings: object) -> tuple[subprocess.Popen, int]:
    port = free_port()
    process = subprocess.Popen(
        serve_front.command()["argv"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    given = {
        "host": "127.0.0.1",
        "port": port,
        "backend_port": backend_port,
        "max_bytes": 1000,
        "too_large": TOO_LARGE,
    }
    process.stdin.write((json.dumps({**given, **settings}) + "\n").encode())
    process.stdin.flush()
    assert process.stdout.readline() == b"ready\n"
    return process, port


@pytest.fixture
def front() -> Iterator[Running]:
    backend = Backend()
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    process, port = start_front(backend.server_address[1], head_seconds=1)
    yield Running(process, port, backend)
    process.kill()
    process.wait()
    backend.shutdown()


def exchange(port: int, data: bytes, timeout: float = 10) -> bytes:
    """Sends `data` and reads until the front closes the connection (a test that hangs
    here is a connection the front left open)."""
    received = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
            while chunk := s.recv(65536):
                received += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass  # refused while it still sent: what it read of the answer
    return received


def post(body: bytes, length: int | None = None, extra: str = "") -> bytes:
    size = len(body) if length is None else length
    return (
        f"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\nConnection: keep-alive\r\n{extra}\r\n"
    ).encode() + body


def body_of(answer: bytes) -> dict:
    return json.loads(answer.split(b"\r\n\r\n", 1)[1])


def test_the_body_length_is_the_one_content_length_there_is() -> None:
    assert serve_front.announced_length(b"POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n") == 12
    assert (
        serve_front.announced_length(
            b"POST / HTTP/1.1\r\ncontent-length:12\r\nContent-Length: 12\r\n\r\n"
        )
        == 12
    )
    for unknown in (
        b"Content-Length: 12\r\nContent-Length: 13",
        b"Content-Length: -1",
        b"Content-Length: 1e9",
        b"X: 1",
    ):
        assert serve_front.announced_length(b"POST / HTTP/1.1\r\n" + unknown + b"\r\n\r\n") is None


def test_r_is_asked_to_close_the_connection_whatever_the_client_asked() -> None:
    head = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nX-Connection: 1\r\n\r\n"
    assert (
        serve_front.closing_head(head)
        == b"GET / HTTP/1.1\r\nHost: a\r\nX-Connection: 1\r\nConnection: close\r\n\r\n"
    )


def test_a_body_within_max_bytes_reaches_r_whole_and_no_more_and_every_connection_closes(
    front: Running,
) -> None:
    before = front.open_fds()
    for _ in range(20):
        answer = exchange(front.port, post(b'{"x": 1}'))
        assert answer.startswith(b"HTTP/1.1 200")
        assert body_of(answer) == {"path": "/predict", "connection": ["close"], "body": '{"x": 1}'}
    # bytes after Content-Length are not R's to read
    assert (
        body_of(exchange(front.port, post(b'{"x": 1}' + b"garbage", length=8)))["body"]
        == '{"x": 1}'
    )
    get = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    assert body_of(exchange(front.port, get))["path"] == "/health"
    time.sleep(0.2)
    assert front.open_fds() == before


def test_a_client_that_waits_for_100_continue_gets_it_from_r(front: Running) -> None:
    with socket.create_connection(("127.0.0.1", front.port), timeout=10) as s:
        s.sendall(post(b"", length=8, extra="Expect: 100-continue\r\n"))
        assert s.recv(65536).startswith(b"HTTP/1.1 100")
        s.sendall(b'{"x": 2}')
        received = b""
        while chunk := s.recv(65536):
            received += chunk
    assert body_of(received)["body"] == '{"x": 2}'


def test_a_body_over_max_bytes_is_refused_from_its_head_unread_and_r_never_sees_it(
    front: Running,
) -> None:
    announced = exchange(front.port, post(b"", length=50 * 2**20, extra="Expect: 100-continue\r\n"))
    assert announced.startswith(b"HTTP/1.1 413")
    assert body_of(announced) == json.loads(TOO_LARGE)
    # 50 MB sent outright: the 413, or the connection reset while the client still sends
    sent = threading.Thread(
        target=lambda: exchange(front.port, post(b"[" + b" " * 50 * 2**20 + b"]")), daemon=True
    )
    sent.start()
    sent.join(30)
    assert not sent.is_alive()
    assert front.backend.requests == []
    status = Path(f"/proc/{front.process.pid}/status").read_text()
    peak_kib = int(
        next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]
    )
    assert peak_kib < 60 * 1024


def test_long_or_slow_headers_and_r_away_are_answered_or_closed(front: Running) -> None:
    huge = b"GET /health HTTP/1.1\r\nX: " + b"a" * (serve_front.MAX_HEAD_BYTES + 10) + b"\r\n\r\n"
    answer = exchange(front.port, huge)
    assert answer.startswith(b"HTTP/1.1 431") and body_of(answer)["error"] == "headers_too_large"
    # a head that never ends is closed after head_seconds
    began = time.monotonic()
    assert exchange(front.port, b"GET /health HTTP/1.1\r\n") == b""
    assert 0.9 < time.monotonic() - began < 5
    process, port = start_front(free_port())
    try:
        away = exchange(port, post(b"{}"))
        assert away.startswith(b"HTTP/1.1 503") and body_of(away)["error"] == "unavailable"
    finally:
        process.kill()
        process.wait()


def test_the_front_ends_when_its_stdin_closes_as_when_r_ends(front: Running) -> None:
    assert front.process.stdin is not None
    front.process.stdin.close()
    assert front.process.wait(timeout=10) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", front.port), timeout=2)
