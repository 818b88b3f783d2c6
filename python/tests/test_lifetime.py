"""core/lifetime.py: a process ends with its parent, however the parent ends (asked twice: the
second changes nothing)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpukeras.core import lifetime

CORE = Path(lifetime.__file__).resolve().parents[2]

# A parent that starts a busy child, which asks to end with it, then says the child's pid.
PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", '''
import os, sys, time
sys.path.insert(0, sys.argv[1])
from gpukeras.core import lifetime
way = lifetime.end_with_parent(int(sys.argv[2]))
assert lifetime.end_with_parent(int(sys.argv[2])) == way  # asked again: nothing changes
print("asked", way, flush=True)
time.sleep(300)
''', sys.argv[1], str(__import__("os").getpid())], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().split()[0] == "asked"
print(child.pid, flush=True)
time.sleep(300)
"""


def running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_busy_child_ends_when_its_parent_is_killed() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, str(CORE)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert running(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 10
        while running(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(child)
    finally:
        parent.kill()
