"""The TCP sockets a process listens on, read from /proc, and whether other hosts can reach them.

Imported by worker scripts (to report their own sockets right after joining a
cluster) and by the tests that read those reports.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"  # the TCP state of a listening socket in /proc/net/tcp


def _address(hex_address: str) -> str:
    """/proc/net/tcp's hex address (32-bit words in host order, little-endian) as text."""
    raw = bytes.fromhex(hex_address)
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(swapped))


def listening(pid: int | None = None) -> list[dict[str, object]]:
    """The sockets process ``pid`` (this one by default) listens on.

    Returns:
        One ``{"address", "port", "loopback", "private"}`` per socket: ``loopback``
        when bound to a loopback address, ``private`` when the process's network
        namespace has no interface but loopback (then no other host reaches it
        whatever address it is bound to).
    """
    pid = os.getpid() if pid is None else pid
    proc = Path(f"/proc/{pid}")
    inodes = set()
    for fd in (proc / "fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    interfaces = [
        line.split(":")[0].strip() for line in (proc / "net" / "dev").read_text().splitlines()[2:]
    ]
    private = set(interfaces) <= {"lo"}
    found = []
    for table in ("tcp", "tcp6"):
        path = proc / "net" / table
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != LISTEN or fields[9] not in inodes:
                continue
            hex_address, hex_port = fields[1].split(":")
            address = ipaddress.ip_address(_address(hex_address))
            address = getattr(address, "ipv4_mapped", None) or address  # ::ffff:127.0.0.1
            found.append(
                {
                    "address": str(address),
                    "port": int(hex_port, 16),
                    "loopback": address.is_loopback,
                    "private": private,
                }
            )
    return found


def reachable_from_other_hosts(sockets: list[dict[str, object]]) -> list[dict[str, object]]:
    """The sockets another host could connect to: neither on loopback nor in a private network."""
    return [s for s in sockets if not s["loopback"] and not s["private"]]
