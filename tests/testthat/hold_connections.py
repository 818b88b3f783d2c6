"""Holds connections to a service open with an unfinished body, and times GET /health meanwhile.

Usage: python hold_connections.py PORT CONNECTIONS TRIES. Opens CONNECTIONS connections to
127.0.0.1:PORT, each sending the head of a POST /health announcing a body of 500 bytes and
10 bytes of it, then sends TRIES requests to GET /health on new connections, one after
another, each given 5 s; prints a JSON line: {"held": <connections still open>,
"statuses": [...], "seconds": [...]} (a status of 0: no answer within 5 s).
"""

from __future__ import annotations

import json
import socket
import sys
import time


def health(port: int) -> tuple[int, float]:
    began = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            line = sock.makefile("rb").readline()
        return int(line.split()[1]), time.monotonic() - began
    except (OSError, IndexError, ValueError):
        return 0, time.monotonic() - began


def main() -> None:
    port, count, tries = (int(value) for value in sys.argv[1:4])
    head = (
        b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 500\r\n\r\n"
    )
    held = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(head + b"[" * 10)
        held.append(sock)
    time.sleep(0.5)
    answers = [health(port) for _ in range(tries)]
    print(
        json.dumps(
            {
                "held": len(held),
                "statuses": [status for status, _ in answers],
                "seconds": [seconds for _, seconds in answers],
            }
        )
    )
    for sock in held:
        sock.close()


if __name__ == "__main__":
    main()
