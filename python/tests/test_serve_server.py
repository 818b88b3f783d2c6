"""gpu_serve()'s server, run as R runs it (its command, settings on stdin) on a model saved
with its encoding as gpu_save() saves it, and sent requests over real HTTP on raw
sockets: its limits, its framing, and its answers."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from gpukeras.serve import server
from test_serve_service import saved_model

MAX_BYTES = 1000
ROW = b'[{"income": 1.5, "region": "east"}]'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    def __init__(self, port: int, process: subprocess.Popen) -> None:
        self.port = port
        self.process = process

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def exchange(self, data: bytes, wait: float = 10) -> bytes:
        """What the service sends back for ``data`` until it closes the connection (or
        ``wait`` seconds pass)."""
        with self.connect() as sock:
            sock.sendall(data)
            return read_all(sock, wait)


# The server's limits, every one of which it is given (R's gpu_serve_limits() sends them all).
LIMITS = {
    "body_seconds": 2,
    "head_seconds": 2,
    "keep_alive_seconds": 1,
    "max_connections": 50,
    "max_head_bytes": 8192,
    "refusal_delay": 0.3,
}


def in_process_settings(model: str) -> dict:
    """Settings for ``server.server()`` in this process, on a free port."""
    return {"host": "127.0.0.1", "port": free_port(), "model": model, "max_rows": 50, **LIMITS}


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


def start(model: str) -> Service:
    """The server on a free port for the model saved at ``model``, once it is ready."""
    port = free_port()
    process = subprocess.Popen(
        server.command()["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    settings = {
        "host": "127.0.0.1",
        "port": port,
        "model": model,
        "max_rows": 50,
        "max_bytes": MAX_BYTES,
        "allowed_hosts": ["a"],
        **LIMITS,
        "batch_window": 0.002,  # gpu_serve()'s default: small bodies read on the event loop
    }
    process.stdin.write(json.dumps(settings) + "\n")
    process.stdin.flush()
    assert process.stdout.readline().strip() == "ready"
    return Service(port, process)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    return saved_model(tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="module")
def service(model_file: str) -> Iterator[Service]:
    served = start(model_file)
    yield served
    served.process.kill()
    served.process.wait()


HEAD = b"POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def test_requests_are_answered_in_order_on_a_kept_alive_connection(service: Service) -> None:
    with service.connect() as sock:
        # two requests pipelined: both answered, in order
        sock.sendall(
            HEAD
            + b"Content-Length: %d\r\n\r\n" % len(ROW)
            + ROW
            + b"GET /health?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
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
    assert list(first["predictions"][0]) == ["high", "low"]
    assert answers[0][1]["content-type"] == "application/json"
    assert second == {"status": "ok"}
    assert "connection" not in answers[0][1]  # kept alive


def test_concurrent_small_requests_are_answered_each_with_its_own_rows(service: Service) -> None:
    """Bodies read on the event loop and predicted together by the batcher's thread: each
    answer is its own request's, as that request alone gets it; a refusal its own too."""

    def post(row: bytes) -> bytes:
        return service.exchange(HEAD + b"Content-Length: %d\r\n\r\n" % len(row) + row)

    rows = [
        b'[{"income": %d.5, "region": "%s"}]' % (i, [b"east", b"west"][i % 2]) for i in range(8)
    ]
    rows[3] = b'[{"income": "x", "region": "east"}]'
    alone = [post(row) for row in rows]
    together: list[bytes] = [b""] * len(rows)
    ready = threading.Barrier(len(rows))

    def ask(i: int) -> None:
        ready.wait()
        together[i] = post(rows[i])

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(rows))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status(answer) for answer in together] == [400 if i == 3 else 200 for i in range(8)]
    for one, other in zip(alone, together):
        first, second = body(one), body(other)
        if "predictions" not in first:
            assert first == second
            continue
        (a,), (b,) = first["predictions"], second["predictions"]
        assert a.keys() == b.keys()
        assert all(abs(a[key] - b[key]) <= 1e-6 for key in a)


def test_a_body_over_max_bytes_is_refused_from_its_length_unread(service: Service) -> None:
    began = time.monotonic()
    answer = service.exchange(HEAD + b"Content-Length: 52428800\r\nExpect: 100-continue\r\n\r\n")
    assert time.monotonic() - began < 1
    assert status(answer) == 413
    assert b"100 Continue" not in answer
    assert body(answer)["error"] == "too_large"
    assert "1000 bytes, max_bytes" in body(answer)["message"]


def test_a_chunked_body_is_taken_within_max_bytes_and_refused_once_past_it(
    service: Service,
) -> None:
    chunked = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    answer = service.exchange(chunked + b"%x\r\n%s\r\n0\r\n\r\n" % (len(ROW), ROW), wait=2)
    assert status(answer) == 200
    assert len(body(answer)["predictions"]) == 1
    with service.connect() as sock:
        sock.sendall(chunked)
        for _ in range(3):
            sock.sendall(b"190\r\n" + b" " * 400 + b"\r\n")  # 1,200 bytes of 400
        answer = read_all(sock, 5)
    assert status(answer) == 413


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
    answers at once meanwhile."""
    held = [service.connect() for _ in range(40)]
    for sock in held:
        sock.sendall(HEAD + b"Content-Length: 500\r\n\r\n[[[")
    time.sleep(0.3)
    for _ in range(5):
        began = time.monotonic()
        answer = service.exchange(b"GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        assert status(answer) == 200
        assert time.monotonic() - began < 0.5
    for sock in held:
        sock.close()


def test_past_max_connections_a_request_gets_a_503(service: Service) -> None:
    held = []
    for _ in range(49):
        held.append(service.connect())
        held[-1].sendall(HEAD + b"Content-Length: 500\r\n\r\n[")
    # the server counts the held connections as its loop accepts them: later on a busy machine
    deadline = time.monotonic() + 10
    health = b"GET /health HTTP/1.1\r\nHost: a\r\n\r\n"
    while (answer := status(service.exchange(health, wait=2))) != 503:
        assert answer == 200 and time.monotonic() < deadline
        time.sleep(0.2)
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


def test_upgrade_is_not_honoured(service: Service) -> None:
    answer = service.exchange(
        b"GET /health HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        wait=2,
    )
    assert status(answer) == 200
    assert body(answer) == {"status": "ok"}


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


def test_a_bare_line_feed_ends_the_head(service: Service) -> None:
    """A bare LF before ``Content-Length`` ends the head, as h11 reads it: the request has
    no body, and what follows is a request of its own, not valid."""
    answer = service.exchange(HEAD + b"\nContent-Length: 2\r\n\r\n[]", wait=3)
    assert answer.startswith(b"HTTP/1.1 400 ")
    assert b"The request has no body" in answer
    assert b"HTTP/1.1 400 Bad Request" in answer


@pytest.mark.parametrize(
    ("request_", "code"),
    [
        (b"Content-Length: 8\r\nConnection: close\r\n\r\nnot json", "malformed_json"),
        (b"Content-Length: 52428800\r\n\r\n", "too_large"),
    ],
    ids=["read", "from_its_length"],
)
def test_a_refused_body_is_answered_late(service: Service, request_: bytes, code: str) -> None:
    """A refusal of a body, read or not: a client that sends such bodies in a loop gets a
    few answers a second, and costs the event loop a few connections a second."""
    began = time.monotonic()
    answer = service.exchange(HEAD + request_)
    assert status(answer) in (400, 413)
    assert body(answer)["error"] == code
    assert time.monotonic() - began >= 0.3


def test_the_server_ends_when_its_stdin_closes(model_file: str) -> None:
    served = start(model_file)
    assert served.process.stdin is not None
    served.process.stdin.close()
    assert served.process.wait(10) == 0


def test_its_connections_are_tcp_so_that_answers_leave_at_once(model_file: str) -> None:
    """The listening socket says it is TCP, so that asyncio sets TCP_NODELAY on each
    connection it accepts: without it, an answer's body on a kept-alive connection waited for
    the client's delayed ACK of its head."""
    settings = in_process_settings(model_file)
    _, sock = server.server(settings)
    gc.unfreeze()
    with sock:
        assert sock.proto == socket.IPPROTO_TCP


def test_health_is_answered_while_every_answer_thread_is_busy(model_file: str) -> None:
    """/health is answered on the event loop, not behind the predictions that fill the
    answer threads; and what loading made is out of Python's collections (frozen), which
    otherwise walk it while every answer waits."""
    settings = in_process_settings(model_file)
    settings["allowed_hosts"] = ["a"]
    gc.unfreeze()
    running, sock = server.server(settings)
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    sock.close()
    assert frozen > 10_000
    front = running.config.app
    release = threading.Event()
    busy = [front.threads.submit(release.wait, 30) for _ in range(server.THREADS)]

    async def ask(path: str) -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "method": "GET",
            "path": path,
            "query_string": b"",
            "headers": [(b"host", b"a")],
        }

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        answer = await asyncio.wait_for(front.answer(scope, receive), 5)
        return answer.status, answer.body

    try:
        assert asyncio.run(ask("/health")) == (200, '{"status":"ok"}')
        # a route answered in a thread waits for one
        with pytest.raises(asyncio.TimeoutError):
            asyncio.run(asyncio.wait_for(ask("/metadata"), 0.5))
    finally:
        release.set()
        for future in busy:
            future.result()
        front.threads.shutdown()


def test_a_service_open_beyond_this_machine_without_a_token_is_warned_about() -> None:
    assert server.command("127.0.0.2", 8000, token=False)["warnings"] == []
    assert server.command("0.0.0.0", 8000, token=True)["warnings"] == []
    (warning,) = server.command("0.0.0.0", 8000, token=False)["warnings"]
    assert warning["class"] == "serve_open"
    assert warning["message"][0] == (
        "The service listens on 0.0.0.0 without a token: anyone who can reach port 8000 there "
        "can use it."
    )
