"""What the Python benchmarks share: how one runs (smoke, quick or full), and where its result goes.

A smoke run (``--smoke``, or ``GPUKERAS_BENCH_SMOKE=1``) uses tiny sizes and one
round, only to show that the script still runs: ``make bench-smoke`` runs every
benchmark so (``bench/lib/smoke.sh``). Its result goes to ``GPUKERAS_BENCH_OUT``
(else a new temporary folder), never over a measured result in bench/results/.
The R benchmarks do the same through ``bench/lib/common.R``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SMOKE_VARIABLE = "GPUKERAS_BENCH_SMOKE"
OUT_VARIABLE = "GPUKERAS_BENCH_OUT"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--quick, --smoke and --out, the arguments every Python benchmark takes."""
    parser.add_argument("--quick", action="store_true", help="fewer rounds, smaller sizes")
    parser.add_argument(
        "--smoke",
        action="store_true",
        default=os.environ.get(SMOKE_VARIABLE) == "1",
        help=f"tiny sizes, one round, the result in a temporary folder ({SMOKE_VARIABLE}=1 too)",
    )
    parser.add_argument("--out", type=Path, default=None, help="the result's JSON file")


def result_path(args: argparse.Namespace, measured: Path) -> Path:
    """Where the result goes: ``--out``; for a smoke run, a file named after
    ``measured`` in the smoke folder; else ``measured`` (under bench/results/)."""
    if args.out is not None:
        return Path(args.out)
    if args.smoke:
        folder = os.environ.get(OUT_VARIABLE) or tempfile.mkdtemp(prefix="gpukeras-bench-")
        return Path(folder) / f"{measured.stem}-smoke.json"
    return measured


def command(script: str, args: argparse.Namespace) -> str:
    """The command that ran ``script`` in this mode, for its result."""
    flag = " --smoke" if args.smoke else " --quick" if args.quick else ""
    return f"python {script}{flag}"


def run_child(code: str, config: dict, env: dict[str, str], what: str = "") -> dict:
    """Run ``code`` in a fresh Python with ``config`` (JSON) as its argument and ``env`` as
    its environment, and return the report it printed last on a line starting with ``@@``
    (a fresh process per measurement: a backend starts once per process)."""
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("@@")]
    if not lines:
        raise RuntimeError(f"benchmark child failed{what}:\n{done.stderr[-3000:]}")
    report: dict = json.loads(lines[-1][2:])
    return report


def run_way(code: str, config: dict, env: dict[str, str], flags: str, way: str) -> dict:
    """``run_child`` for one way of a benchmark: the core on PYTHONPATH, ``flags`` added to
    ``env``'s XLA_FLAGS; a way that fails (an XLA flag refused) is ``{"failed": its error}``,
    so that it leaves the others."""
    root = Path(__file__).resolve().parents[2]
    paths = [str(root / "inst" / "python"), env.get("PYTHONPATH", "")]
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    if flags:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} {flags}".strip()
    try:
        return run_child(code, config, env, f" ({way})")
    except RuntimeError as error:
        return {"failed": str(error)[-1500:]}
