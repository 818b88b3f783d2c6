"""A private network namespace for test workers, as gpu_launch() makes one: loopback alone.

``private_network()`` starts a process holding a new network namespace (with
its loopback up) and yields the command prefix that starts a program inside
it; the workers then reach one another on 127.0.0.1 and no other host or
process reaches them. Root makes it directly; anyone else in a user namespace
of their own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest


@contextlib.contextmanager
def private_network() -> Iterator[list[str]]:
    """The prefix (``nsenter ... --``) that runs a command in a fresh private network."""
    if not all(shutil.which(tool) for tool in ("unshare", "nsenter", "ip")):
        pytest.skip("unshare, nsenter or ip is not installed")
    root = os.geteuid() == 0
    user = [] if root else ["--user", "--map-root-user"]
    holder = subprocess.Popen(
        [
            *["unshare", *user, "--net", "--"],
            "sh",
            "-c",
            "ip link set lo up && echo ready && exec cat",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ready = holder.stdout.readline().strip()  # type: ignore[union-attr]
        if ready != "ready":
            pytest.skip(f"no private network namespace here: {holder.stderr.read().strip()}")  # type: ignore[union-attr]
        enter = ["--user", "--preserve-credentials"] if not root else []
        yield ["nsenter", "--target", str(holder.pid), *enter, "--net", "--"]
    finally:
        holder.kill()
        holder.wait()
