"""gpu_serve()'s front: the port clients reach, in a process of its own beside R's httpuv.

Contract. Run as a script (standard library only, so it starts in a fraction of a
second and holds no framework): it reads one JSON line of settings from stdin,
``{"host", "port", "backend_port", "max_bytes", "too_large"}`` (and
``head_seconds``, by default ``HEAD_SECONDS``), listens on
``host:port``, prints ``ready`` on stdout once it does, and ends when its stdin
closes (the R process that started it ended) or at SIGTERM. Each client
connection carries one request (every answer of the service closes its
connection):

- its head (request line and headers) is read, at most ``MAX_HEAD_BYTES`` within
  ``HEAD_SECONDS``; a longer one gets a ``431``, a slower one is closed;
- a ``Content-Length`` over ``max_bytes`` gets, at once and with the body
  unread, the ``413`` answer R made (``too_large``, a JSON body), and the
  connection is closed;
- any other request goes, head and at most ``Content-Length`` bytes of body, to
  R's httpuv on ``127.0.0.1:backend_port``, which makes every other check, and
  its answer goes back to the client until R closes the connection.

Why a process of its own: httpuv decides from a request's headers only on R's
thread, and reads what the client sends meanwhile on a thread that shares R's
CPU, so clients that send bodies too large in a loop took most of the service's
CPU from the requests it serves (bench/results/serve-hostile-*). Here such a
request costs a read of its head and a short answer, on no thread of R's.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any

MAX_HEAD_BYTES = 64 * 1024
HEAD_SECONDS = 10.0
READ_BYTES = 16 * 1024
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length[ \t]*:[ \t]*([^\r\n]*)", re.IGNORECASE)
CONNECTION = re.compile(rb"connection[ \t]*:", re.IGNORECASE)


def command() -> dict[str, Any]:
    """The command line that runs the front: this Python, isolated (``-I``: no user site,
    no ``PYTHON*`` variables), on this file."""
    return {"argv": [sys.executable, "-I", str(Path(__file__).resolve())]}


def announced_length(head: bytes) -> int | None:
    """The body's length as the head's one ``Content-Length`` gives it: None when there is
    none, or when it is not one whole number (R's httpuv then refuses the request)."""
    found = CONTENT_LENGTH.findall(head)
    values = {value.strip() for value in found}
    if len(values) != 1:
        return None
    value = values.pop()
    return int(value) if value.isdigit() else None


def closing_head(head: bytes) -> bytes:
    """The request's head (ending in an empty line) as R gets it: its ``Connection``
    headers replaced by ``Connection: close``, so that httpuv closes the connection
    once it has answered (it waits for the client to close otherwise), and the front
    knows the answer is whole when R's side closes."""
    lines = head[:-4].split(b"\r\n")
    kept = [lines[0], *(line for line in lines[1:] if not CONNECTION.match(line))]
    return b"\r\n".join([*kept, b"Connection: close", b"", b""])


def answer(status: str, body: str) -> bytes:
    """An HTTP/1.1 answer with a JSON body that closes its connection."""
    data = body.encode()
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + data


HEAD_TOO_LARGE = answer(
    "431 Request Header Fields Too Large",
    json.dumps(
        {
            "error": "headers_too_large",
            "message": f"The request's headers take more than {MAX_HEAD_BYTES} bytes.",
        }
    ),
)
NO_BACKEND = answer(
    "503 Service Unavailable",
    json.dumps(
        {
            "error": "unavailable",
            "message": "The service is not answering: try again in a moment.",
        }
    ),
)


class Client(asyncio.BufferedProtocol):
    """One client connection: its head read, then refused or forwarded to R, and R's
    answer back. A buffered protocol, read into a small buffer of its own: asyncio's
    default reads up to 256 KiB into a new bytes object, which made a refusal of a
    client already sending its body four times as costly."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.buffer = bytearray(READ_BYTES)
        self.head = bytearray()
        self.remaining = 0  # bytes of body still to forward to R
        self.transport: asyncio.Transport | None = None
        self.backend: Backend | None = None
        self.connecting: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.timer = asyncio.get_running_loop().call_later(
            self.settings["head_seconds"], transport.abort
        )

    def get_buffer(self, sizehint: int) -> memoryview:
        size = min(READ_BYTES, self.remaining) if self.backend is not None else READ_BYTES
        return memoryview(self.buffer)[: max(size, 1)]

    def buffer_updated(self, nbytes: int) -> None:
        assert self.transport is not None
        data = bytes(memoryview(self.buffer)[:nbytes])
        if self.backend is not None:  # the body, to R
            data = data[: self.remaining]
            self.remaining -= len(data)
            self.backend.send(data)
            if self.remaining <= 0:
                self.transport.pause_reading()
            return
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        head_bytes = end + 4 if end >= 0 else len(self.head)  # so far, where it has not ended
        if head_bytes > MAX_HEAD_BYTES:
            self.refuse(HEAD_TOO_LARGE)
            return
        if end < 0:
            return
        self.timer.cancel()
        head, body = bytes(self.head[: end + 4]), bytes(self.head[end + 4 :])
        length = announced_length(head)
        if length is not None and length > self.settings["max_bytes"]:
            self.refuse(self.settings["too_large"])
            return
        self.remaining = length or 0
        body = body[: self.remaining]
        self.remaining -= len(body)
        self.transport.pause_reading()
        self.backend = Backend(self)
        # held here: the loop keeps only a weak reference to a task
        self.connecting = asyncio.ensure_future(
            self.backend.connect(self.settings["backend_port"], closing_head(head) + body)
        )

    def refuse(self, response: bytes) -> None:
        """Answers `response` and closes the connection, what the client still sends unread."""
        assert self.transport is not None
        self.timer.cancel()
        self.transport.write(response)
        self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.timer.cancel()
        if self.backend is not None:
            self.backend.close()

    # the client reads R's answer slower than R writes it: R's side waits
    def pause_writing(self) -> None:
        self.backend_reads(False)

    def resume_writing(self) -> None:
        self.backend_reads(True)

    def backend_reads(self, reads: bool) -> None:
        transport = self.backend.transport if self.backend is not None else None
        if transport is not None:
            (transport.resume_reading if reads else transport.pause_reading)()


class Backend(asyncio.Protocol):
    """The connection to R's httpuv for one client's request: what it answers goes to the
    client, and the client's connection closes with it."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.transport: asyncio.Transport | None = None

    async def connect(self, port: int, first: bytes) -> None:
        """Connects to R and sends `first` (the head and the body read with it); the client
        is answered a 503 if R cannot be reached."""
        try:
            await asyncio.get_running_loop().create_connection(lambda: self, "127.0.0.1", port)
        except OSError:
            self.client.refuse(NO_BACKEND)
            return
        if self.transport is None or self.client.transport is None:
            return  # the client left meanwhile
        self.transport.write(first)
        if self.client.remaining > 0:
            self.client.transport.resume_reading()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if self.client.transport is None or self.client.transport.is_closing():
            transport.abort()
            return
        self.transport = transport

    def send(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        assert self.client.transport is not None
        self.client.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client.transport is not None:
            self.client.transport.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()

    # R reads the body slower than the client sends it: the client waits
    def pause_writing(self) -> None:
        assert self.client.transport is not None
        self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        assert self.client.transport is not None
        if self.client.remaining > 0:
            self.client.transport.resume_reading()


async def serve(settings: dict[str, Any]) -> None:
    """Listens as `settings` say until stdin closes or SIGTERM."""
    loop = asyncio.get_running_loop()
    known = {
        "backend_port": int(settings["backend_port"]),
        "max_bytes": float(settings["max_bytes"]),
        "too_large": answer("413 Payload Too Large", str(settings["too_large"])),
        "head_seconds": float(settings.get("head_seconds", HEAD_SECONDS)),
    }
    server = await loop.create_server(
        lambda: Client(known),
        settings["host"],
        int(settings["port"]),
        reuse_address=True,
    )
    ended = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, ended.set)

    class StdinClosed(asyncio.Protocol):
        def connection_lost(self, exc: Exception | None) -> None:
            ended.set()

    await loop.connect_read_pipe(StdinClosed, sys.stdin)
    print("ready", flush=True)
    async with server:
        await ended.wait()


def main() -> None:
    """Reads the settings line from stdin and serves."""
    settings = json.loads(sys.stdin.readline())
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()
