"""Why NVML's utilization stays under 90 % in the device-resident fit of bench/monitor.py's
wide MLP: the same fit with longer epochs (8x the rows: fewer epoch boundaries, the same
kernels) and with larger batches (longer kernels).

Each shape: one fit to compile, one epoch timed, then a fit of about ``SECONDS`` with
gpu_fit()'s own monitor (NVML sampled at 10 Hz); its mean utilization, p95, samples/s and
steps per dispatch are kept. If longer epochs raise the utilization and the kernels are the
same, what the device waits for is the host's work between epochs.

Usage: KERAS_BACKEND=jax python bench/utilization.py [--quick | --smoke] [--out FILE]
Run from the repository root. Writes bench/results/utilization-<device>-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402
from monitor import workload  # noqa: E402
from pipeline import code_state, device_facts  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.train import fit  # noqa: E402

SECONDS = 12.0
# (name, rows, batch) on a GPU; bench/monitor.py's workload is the first
SHAPES = [
    ("bench/monitor.py's", 65536, 1024),
    ("8x rows", 524288, 1024),
    ("batch 4096", 262144, 4096),
    ("batch 8192", 524288, 8192),
]


def measure(keras: object, gpu: bool, smoke: bool, rows: int, batch: int, target: float) -> dict:
    model, (x, y), _ = workload(keras, gpu, smoke)
    x, y = np.resize(x, (rows, x.shape[1])), np.resize(y, rows)
    fit.fit(model, (x, y), batch_size=batch, epochs=1, verbose=0, monitor=False)  # compile
    started = time.perf_counter()
    fit.fit(model, (x, y), batch_size=batch, epochs=1, verbose=0, monitor=False)
    epoch_seconds = time.perf_counter() - started
    epochs = max(2, math.ceil(target / epoch_seconds))
    result = fit.fit(model, (x, y), batch_size=batch, epochs=epochs, verbose=0)
    report = result["monitor"] or {}
    return {
        "rows": rows,
        "batch_size": batch,
        "epoch_seconds": epoch_seconds,
        "epochs": epochs,
        "steps_per_dispatch": result["settings"]["steps_per_execution"],
        "data": result["settings"]["data"],
        **{
            name: report.get(name)
            for name in ("gpu_utilization_mean", "gpu_utilization_p95", "samples_per_second", "mfu")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    keras = config.keras()
    device, short = device_facts()
    gpu = not device.startswith("CPU")
    shapes = [(name, 1024, 256) for name, _, _ in SHAPES[:2]] if args.smoke else SHAPES
    target = 0.2 if args.smoke else SECONDS / 2 if args.quick else SECONDS
    found = {name: measure(keras, gpu, args.smoke, r, b, target) for name, r, b in shapes}
    result = {
        "benchmark": "utilization",
        "command": bench_modes.command("bench/utilization.py", args),
        "date": datetime.date.today().isoformat(),
        "device": device,
        "backend": config.backend,
        "code": code_state(),
        "shapes": found,
    }
    measured = ROOT / "bench" / "results" / f"utilization-{short}-{result['date']}.json"
    out = bench_modes.result_path(args, measured)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    for name, row in found.items():
        print(
            f"{name:>20}: utilization {row['gpu_utilization_mean']} % (p95 "
            f"{row['gpu_utilization_p95']}), epochs of {row['epoch_seconds']:.3f} s, "
            f"{row['steps_per_dispatch']} steps a dispatch"
        )
    print("written to", out)


if __name__ == "__main__":
    main()
