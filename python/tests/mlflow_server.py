"""A real MLflow tracking server for a test: `mlflow server` on 127.0.0.1, a free port, a SQLite
backend and a local artifact folder (artifacts proxied over HTTP, as a team's server serves
them), with MLflow's basic authentication (a user who logs in, and wrong credentials refused);
and a silent one (``silent``: connections accepted, nothing answered).

Used by pytest and bench/tracking.py. R's tests start the same server from
tests/testthat/helper-mlflow.R: R CMD check's copy of the tests has no python/ folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# A server that accepts connections and never answers (R's tests and a benchmark run it too).
SILENT = Path(__file__).resolve().parents[2] / "tests" / "testthat" / "silent_server.py"
USER = "admin"
PASSWORD = "gpukeras-Test-Pass-4096"  # the admin the server makes at its first start
START_SECONDS = 120


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    process: subprocess.Popen
    url: str
    folder: Path

    def pause(self) -> None:
        """Stop answering (SIGSTOP): the kernel still accepts connections, nothing replies."""
        os.killpg(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self.process.pid, signal.SIGCONT)


def mlflow_command() -> str:
    """The full MLflow's command: GPUKERAS_MLFLOW_SERVER, else the one make test installs in an
    environment of its own (as a team's server runs apart from its clients), else the one
    beside this Python."""
    own = Path.home() / ".cache" / "gpukeras" / "mlflow-server" / "bin" / "mlflow"
    fallback = own if own.exists() else Path(sys.executable).with_name("mlflow")
    return os.environ.get("GPUKERAS_MLFLOW_SERVER") or str(fallback)


def start(folder: Path) -> Server:
    folder.mkdir(parents=True, exist_ok=True)
    ini = folder / "auth.ini"
    ini.write_text(
        "[mlflow]\ndefault_permission = EDIT\nauth_cache_ttl_seconds = 600\n"
        f"database_uri = sqlite:///{folder / 'auth.db'}\nadmin_username = {USER}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    port = free_port()
    env = {
        **os.environ,
        "MLFLOW_AUTH_CONFIG_PATH": str(ini),
        "MLFLOW_AUTH_ADMIN_PASSWORD": PASSWORD,
        "MLFLOW_FLASK_SERVER_SECRET_KEY": "gpukeras-test-secret",
        # no job runner (eight more processes, 12 s of CPU a start): tracking runs need none
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    command = [
        mlflow_command(),
        "server",
        "--app-name",
        "basic-auth",
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination",
        str(folder / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = open(folder / "server.log", "wb")  # noqa: SIM115 (the server's for its life)
    process = subprocess.Popen(
        command, cwd=folder, env=env, stdout=log, stderr=log, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"mlflow server exited: {(folder / 'server.log').read_text()[-2000:]}"
            )
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{url}/health", timeout=2) as answer,
        ):
            if answer.status == 200:
                return Server(process, url, folder)
        time.sleep(0.3)
    stop(Server(process, url, folder))
    raise RuntimeError("mlflow server did not start within 120 s")


def stop(server: Server) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.process.pid, signal.SIGCONT)
        os.killpg(server.process.pid, signal.SIGTERM)
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait()


@contextlib.contextmanager
def running(folder: Path) -> Iterator[Server]:
    server = start(folder)
    try:
        yield server
    finally:
        stop(server)


@contextlib.contextmanager
def silent() -> Iterator[str]:
    """A server that accepts connections and never answers (``SILENT``, its own process): its
    URL, the process killed after."""
    process = subprocess.Popen(
        [sys.executable, str(SILENT)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        port = process.stdout.readline().strip()  # type: ignore[union-attr]
        if not port.isdigit():
            raise RuntimeError("the silent server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()
