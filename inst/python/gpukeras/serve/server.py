"""gpu_serve()'s HTTP server: the port clients reach, on uvicorn (h11) with an ASGI
application of its own (no framework: a request's work on the event loop kept to the
least), in a process of its own that loads the model and answers every request itself
(service.py).

Contract. Run as a script (``command()``): it reads one JSON line of settings from stdin,
``{"host", "port", "model"}`` (``model``: the .keras file gpu_save() wrote, its encoding
beside it) and the service's settings (see ``service.service``: ``token``, ``max_rows``,
``max_bytes``, ``batch_size``, ``unknown``, ``allowed_hosts``, ``versions``), and the
server's limits, every one of them: ``body_seconds``, ``head_seconds``,
``keep_alive_seconds``, ``max_connections``, ``max_head_bytes`` and ``refusal_delay``
(their defaults are R's, ``gpu_serve_limits()``, which sends them all). It loads
the model, listens on ``host:port``, prints ``ready`` on stdout once it does, and ends
when its stdin closes (the R process that started it ended) or at SIGTERM.

No HTTP is parsed here: uvicorn's h11 reads every request and enforces HTTP/1.1's
framing (two lengths, a signed length: a 400; this file refuses a ``Transfer-Encoding``
with a length too), and this file sets its limits and adds the ones it lacks:

- a body over ``max_bytes`` is refused from its ``Content-Length`` before a byte of it is
  read (a 413, the connection closed), and a chunked one once it passes ``max_bytes``;
- a body that has not arrived whole within ``body_seconds`` of its head gets a 408 and its
  connection is closed; a connection that has not sent a whole head within
  ``head_seconds`` is closed; an idle kept-alive one after ``keep_alive_seconds``;
- a head over ``max_head_bytes`` (request line and headers) gets a 431; from
  ``max_connections`` open connections a request gets a 503 (uvicorn's
  ``limit_concurrency``);
- ``Upgrade`` is never honoured (no WebSocket protocol): the request is answered as HTTP.

Every other request is answered by the service (``service.answer``) in a thread (at most
THREADS at once, the others queued), so that the event loop goes on reading other
connections meanwhile, but for two kinds, whose answers cost the loop less than a hand-off
to a thread: a ``GET`` of the health route, answered on the event loop, so that it never
queues behind predictions; and, when the service batches, a ``POST .../predict`` of at
most LOOP_BYTES, read and checked on the event loop (``service.begin``), its rows
predicted in the batcher's thread with those of the requests the loop has read meanwhile
(``batching.Batcher.submit``), and answered on the loop (``service.complete``). A
``POST .../predict`` that is refused (a 400, or a 413 from its length or once its body
passed ``max_bytes``) is answered ``refusal_delay`` seconds late, without holding a thread
or reading more of its body: a client that sends such bodies in a loop gets at most a few
answers a second, and takes the event loop, which /health shares, a few connections a
second (a loop of 50 MB bodies refused at once cost it some 3,000). Refusals of the
server's own are JSON ``{"error": <code>, "message": ...}`` as the service's are.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import os
import resource
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from http import HTTPStatus
from pathlib import Path
from typing import Any, NamedTuple

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

# Headers of the client's connection, not of its request: never forwarded either way.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "content-length",
    }
)
REFUSED = frozenset({400, 413})
# Requests answered at once, each in a thread: enough for the clients whose requests the
# service batches together (asyncio's default, 4 more than the cores, left 2 of 8 clients'
# requests queued on 2 cores, out of the batch being formed), bounded for memory.
THREADS = 32
# A POST /predict body of at most this many bytes (some 25 rows of records) is read into
# features on the event loop, its rows predicted by the batcher's thread (when batching):
# no answer thread is woken for it. A larger one is answered in a thread, so that reading
# it holds no other request.
LOOP_BYTES = 4096
HEADERS_TOO_LARGE = "The request's headers are too large: send at most {} bytes of them."


def command(host: str = "127.0.0.1", port: int = 0, token: bool = True) -> dict[str, Any]:
    """The command line that runs the server (``argv``): this Python, isolated (``-I``: no
    user site, no ``PYTHON*`` variables), on this file; and ``warnings``: a ``serve_open``
    one when the service on ``host:port`` is not on loopback and has no ``token``."""
    from gpukeras.serve import service_checks

    warnings = []
    if not token and not service_checks.is_loopback(host):
        warnings.append(
            {
                "class": "serve_open",
                "message": [
                    f"The service listens on {host} without a token: anyone who can reach "
                    f"port {port} there can use it.",
                    "Give token = <a secret string> (clients send `Authorization: Bearer "
                    '<token>`), or keep host = "127.0.0.1".',
                ],
            }
        )
    return {"argv": [sys.executable, "-I", str(Path(__file__).resolve())], "warnings": warnings}


def problem(status: int, code: str, message: str, close: bool = False) -> Answer:
    """A JSON refusal as R's: ``{"error": code, "message": message}``; ``close``: the
    connection ends with it (its request's body was not read)."""
    return Answer(status, json.dumps({"error": code, "message": message}), close)


class _Connection(h11.Connection):
    """h11's connection, which keeps the last protocol error it found in what the client
    sent, so that the answer can carry h11's status for it (431 for a head too long)."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as error:
            self.last_error = error
            raise


class Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for a connection's first head and JSON
    answers, with h11's status, for requests h11 refuses."""

    def __init__(self, *args: Any, head_seconds: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes = kwargs["config"].h11_max_incomplete_event_size
        self.checked = _Connection(h11.SERVER, self.max_head_bytes)
        self.conn = self.checked
        self.head_seconds = head_seconds

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self.loop.call_later(self.head_seconds, self._head_deadline)

    def _head_deadline(self) -> None:
        if self.scope is None and not self.transport.is_closing():
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        error = self.checked.last_error
        status = error.error_status_hint if error is not None else 400
        if status == 431:
            code = "headers_too_large"
            message = HEADERS_TOO_LARGE.format(self.max_head_bytes)
        else:
            code, message = "bad_request", f"The request is not valid HTTP/1.1: {error or msg}."
        body = json.dumps({"error": code, "message": message}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
        ]
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            reason = HTTPStatus(status).phrase.encode()
            response = h11.Response(status_code=status, headers=headers, reason=reason)
            self.transport.write(self.conn.send(response))
            self.transport.write(self.conn.send(h11.Data(data=body)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()


class Answer(NamedTuple):
    """An answer to send: its status, its JSON body, whether its connection ends with it, and
    its headers beyond Content-Type and Content-Length (lower-case names)."""

    status: int
    body: str
    close: bool = False
    headers: tuple[tuple[bytes, bytes], ...] = ()


class _TooLarge(Exception):
    """A body that passed ``max_bytes`` while it was read."""


class _Gone(Exception):
    """The client left before its body was read."""


async def read_body(receive: Receive, max_bytes: int) -> bytes:
    """The request's whole body; _TooLarge once it passes ``max_bytes`` (unread beyond),
    _Gone where the client left first."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Gone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class Front:
    """The ASGI application: the server's limits on each request, then the service's answer.
    A plain ASGI callable, which reads the body and sends the answer itself: what a request
    costs on the event loop, which every request shares, is kept to the least."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from gpukeras.serve import scoring, service, service_checks

        self.settings = settings
        loaded = scoring.load_model(settings["model"])
        self.served = service.service(loaded["model"], loaded["encoding"], settings)
        self.service = service
        self.max_bytes = self.served.max_bytes
        self.too_large = Answer(413, json.dumps(service_checks.too_large(self.max_bytes)), True)
        self.max_head_bytes = int(settings["max_head_bytes"])
        self.body_seconds = float(settings["body_seconds"])
        self.threads = ThreadPoolExecutor(THREADS, thread_name_prefix="answer")
        self.settled: list[tuple[asyncio.Future[Any], Any]] = []
        self.settled_lock = threading.Lock()
        self.reading = False  # the requests read so far are on their way to a batch

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        answer = await self.answer(scope, receive)
        if answer is None:
            return
        if (
            answer.status in REFUSED
            and scope["method"] == "POST"
            and scope["path"].endswith("/predict")
        ):
            await asyncio.sleep(self.settings["refusal_delay"])
        body = answer.body.encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *answer.headers,
        ]
        if answer.close:
            headers.append((b"connection", b"close"))
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def answer(self, scope: Scope, receive: Receive) -> Answer | None:
        """The answer to the request of ``scope``; None when the client left before it was
        read."""
        head = 0
        length = None
        chunked = False
        headers = {}
        for key, value in scope["headers"]:
            head += len(key) + len(value) + 4
            name = key.decode("latin-1")
            if name == "content-length" and length is None:
                length = int(value)
            elif name == "transfer-encoding":
                chunked = True
            if name not in HOP_BY_HOP:
                headers[name] = value.decode("latin-1")
        if head > self.max_head_bytes:  # a whole head in one read, which h11 does not measure
            return problem(
                431, "headers_too_large", HEADERS_TOO_LARGE.format(self.max_head_bytes), True
            )
        if length is not None and chunked:
            return problem(
                400,
                "bad_request",
                "The request has both a Content-Length and a Transfer-Encoding: send one.",
                close=True,
            )
        if length is not None and length > self.max_bytes:
            return self.too_large
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        late: list[bool] = []
        timer = loop.call_later(self.body_seconds, _expire, task, late)
        try:
            body = await read_body(receive, self.max_bytes)
        except _TooLarge:
            return self.too_large
        except _Gone:
            return None
        except asyncio.CancelledError:
            if not late:
                raise
            return problem(
                408,
                "request_timeout",
                f"The body did not arrive within {self.body_seconds:g} seconds.",
                close=True,
            )
        finally:
            timer.cancel()
        method = scope["method"]
        path = scope["path"]
        query = scope["query_string"].decode("latin-1")
        route = self.served.paths.get(path)
        if method == "GET" and route == "health":
            answered = self.service.answer(self.served, method, path, query, headers, body)
        elif (
            method == "POST"
            and route == "predict"
            and len(body) <= LOOP_BYTES
            and self.served.batcher is not None
        ):
            answered = await self._answer_here(method, path, query, headers, body)
        else:
            answer = functools.partial(
                self.service.answer, self.served, method, path, query, headers, body
            )
            answered = await loop.run_in_executor(self.threads, answer)
        status = int(answered["status"])
        more = tuple(
            (key.lower().encode("latin-1"), value.encode("latin-1"))
            for key, value in answered["headers"].items()
            if key.lower() != "content-type"
        )
        return Answer(status, answered["body"], False, more)

    async def _answer_here(
        self, method: str, path: str, query: str, headers: dict[str, str], body: bytes
    ) -> dict[str, Any]:
        """A small POST /predict answered on the event loop but for the model's call, which
        the batcher's thread makes: no thread of its own waits for it."""
        started = self.service.begin(self.served, method, path, query, headers, body)
        if not isinstance(started, self.service.Pending):
            return started
        batcher = self.served.batcher
        assert batcher is not None
        self.loop = asyncio.get_running_loop()
        if not self.reading:  # the requests the loop has read join before a batch goes
            self.reading = True
            self.loop.call_soon(self._read, batcher.on_its_way())
        future = self.loop.create_future()
        batcher.submit(started.features, functools.partial(self._predicted, future))
        outputs, error = await future

        def predicted(features: Any) -> Any:
            if error is not None:
                raise error
            return outputs

        return self.service.complete(self.served, started, predicted)

    def _read(self, arrived: Callable[[], None]) -> None:
        """After what was ready on the event loop when a request was submitted, which
        includes the requests it has read since: those have joined the batch."""
        self.reading = False
        arrived()

    def _predicted(self, future: asyncio.Future[Any], outputs: Any, error: Any) -> None:
        """In the model's thread: ``future``'s request was predicted. The futures of one
        batch are settled on the event loop together, at one wake-up of it."""
        with self.settled_lock:
            self.settled.append((future, (outputs, error)))
            first = len(self.settled) == 1
        if first:
            with contextlib.suppress(RuntimeError):  # the loop has closed: the server ends
                self.loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        with self.settled_lock:
            settled, self.settled = self.settled, []
        for future, result in settled:
            if not future.done():  # not cancelled: its client is still there
                future.set_result(result)


def _expire(task: asyncio.Task[Any], late: list[bool]) -> None:
    """The body's time is up: its reading (``task``) is cancelled, and ``late`` says why."""
    late.append(True)
    task.cancel()


def _more_descriptors() -> None:
    """The soft limit on open files raised to the hard one (at most 65,536): each held
    connection takes one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def _end_with_stdin() -> None:
    """Ends the process once stdin closes: the R process that started it has ended."""
    sys.stdin.read()
    os._exit(0)


class PortInUse(Exception):
    """The port cannot be listened on: in use, not this machine's address, or privileged."""


def server(settings: dict[str, Any]) -> tuple[uvicorn.Server, socket.socket]:
    """The uvicorn server for ``settings`` (the limits among them) and its listening socket.

    What loading made (Python, the framework, the model: some 300,000 objects that live as
    long as the server) is then frozen out of Python's collections (``gc.freeze``): a full
    collection, which the garbage of requests triggers from time to time, otherwise walks
    all of them while every answer, /health's too, waits for it."""
    family = socket.AF_INET6 if ":" in settings["host"] else socket.AF_INET
    # IPPROTO_TCP named: asyncio sets TCP_NODELAY on a connection only where its socket's
    # protocol says TCP (a socket made with protocol 0 does not), and without it an answer's
    # body waited for the client's delayed ACK of its head on a kept-alive connection (40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings["host"], int(settings["port"])))
    except OSError as error:
        raise PortInUse from error
    sock.listen(1024)
    head_seconds = float(settings["head_seconds"])

    def protocol(*args: Any, **kwargs: Any) -> Protocol:
        return Protocol(*args, head_seconds=head_seconds, **kwargs)

    config = uvicorn.Config(
        Front(settings),
        http=protocol,  # type: ignore[arg-type]
        ws="none",
        lifespan="off",
        interface="asgi3",
        log_config=None,
        access_log=False,
        proxy_headers=False,  # the address of a client is never used: no middleware for it
        server_header=False,
        limit_concurrency=int(settings["max_connections"]),
        timeout_keep_alive=settings["keep_alive_seconds"],
        h11_max_incomplete_event_size=int(settings["max_head_bytes"]),
        backlog=1024,
    )
    gc.freeze()
    return uvicorn.Server(config), sock


def main() -> None:
    """Reads the settings line from stdin and serves until stdin closes."""
    settings = json.loads(sys.stdin.readline())
    # the process starts on this file alone (python -I): the package beside it
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    _more_descriptors()
    try:
        running, sock = server(settings)
    except PortInUse as error:
        print("port_in_use", flush=True)
        print(error.__cause__, file=sys.stderr)
        sys.exit(1)
    # nothing is logged while serving: a log of refused clients would grow without bound
    logging.disable(logging.ERROR)
    print("ready", flush=True)
    threading.Thread(target=_end_with_stdin, daemon=True).start()
    running.run(sockets=[sock])


if __name__ == "__main__":
    main()
