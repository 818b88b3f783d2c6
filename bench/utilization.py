"""Is the device busy across epochs? NVML's utilization during a device-resident gpu_fit() of
issue #58's MLP (1024-4096-4096-4096-10, batch 1024, 65,536 rows: 64 steps an epoch), and at
8x the rows (goals on a GPU: >= 90 % and >= 95 %), each way of running the resident loop in a
fresh process.

Ways:
- ``resident loop``: gpukeras' device-resident loop as it is;
- ``loops in command buffers``: the same, with XLA running while loops inside CUDA graphs
  (``--xla_gpu_enable_command_buffer``), on a GPU only.
(2026-11-26 on an H200, bench/results/utilization-NVIDIA-H200-2026-11-26*.json: the loop
with a traced step count, and each epoch's first dispatch queued at the end of the one
before, which gained nothing and was taken out.)

Each: one fit to compile, one epoch timed, then a fit of about ``SECONDS`` with gpu_fit()'s
own monitor (NVML sampled at 10 Hz over the timed steps); its mean utilization and p95,
samples/s, steps per dispatch and the first fit's seconds (compiling) are kept.

Usage: KERAS_BACKEND=jax python bench/utilization.py [--quick | --smoke] [--out FILE]
Run from the repository root. Writes bench/results/utilization-<device>-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402
from pipeline import code_state, device_facts  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402

SECONDS = 10.0
# The children train as a user's process would (JAX's own memory preallocation); this one
# only names the device, so it must not hold the GPU's memory meanwhile.
CHILD_ENV = dict(os.environ)
os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
GOAL = {"issue #58's MLP": 90.0, "8x rows": 95.0}
# (name, input width, hidden widths, rows, batch) on a GPU
SHAPES = [
    ("issue #58's MLP", 1024, (4096,) * 3, 65536, 1024),
    ("8x rows", 1024, (4096,) * 3, 524288, 1024),
]
SMOKE_SHAPES = [("issue #58's MLP", 32, (64,), 1024, 256)]
# name: (XLA flags added, on a GPU only)
WAYS: dict[str, tuple[str, bool]] = {
    "resident loop": ("", False),
    "loops in command buffers": (
        "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,WHILE,CONDITIONAL",
        True,
    ),
}

CHILD = r"""
import json, math, sys, time
import numpy as np
config = json.loads(sys.argv[1])
from gpukeras.core.runtime import config as runtime
from gpukeras.train import fit
keras = runtime.keras()
width, hidden, rows, batch = config["width"], config["hidden"], config["rows"], config["batch"]
rng = np.random.default_rng(0)
x = rng.standard_normal((rows, width), dtype=np.float32)
y = rng.integers(0, 10, rows)
keras.utils.set_random_seed(0)
layers = [keras.Input((width,))] + [keras.layers.Dense(u, activation="relu") for u in hidden]
model = keras.Sequential(layers + [keras.layers.Dense(10)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
started = time.perf_counter()
fit.fit(model, (x, y), batch_size=batch, epochs=1, verbose=0, monitor=False, seed=1)
first = time.perf_counter() - started
started = time.perf_counter()
fit.fit(model, (x, y), batch_size=batch, epochs=2, verbose=0, monitor=False, seed=1)
epoch_seconds = (time.perf_counter() - started) / 2
epochs = max(3, math.ceil(config["seconds"] / epoch_seconds))
result = fit.fit(model, (x, y), batch_size=batch, epochs=epochs, verbose=0, seed=1)
report = result["monitor"] or {}
settings = result["settings"]
print("@@" + json.dumps({
    "first_fit_seconds": first,
    "epoch_seconds": epoch_seconds,
    "epochs": epochs,
    "steps_per_dispatch": settings["steps_per_execution"],
    "data": settings["data"],
    **{name: report.get(name) for name in (
        "gpu_utilization_mean", "gpu_utilization_p95", "samples_per_second", "mfu")},
}, default=str))
"""


def measure(shape: tuple, way: str, gpu: bool, seconds: float) -> dict:
    _, width, hidden, rows, batch = shape
    child = {"width": width, "hidden": list(hidden), "rows": rows}
    child.update(batch=batch, seconds=seconds)
    return bench_modes.run_way(CHILD, child, CHILD_ENV, WAYS[way][0], way)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    device, short = device_facts()
    gpu = not device.startswith("CPU")
    shapes = SMOKE_SHAPES if args.smoke else SHAPES if gpu else SMOKE_SHAPES
    seconds = 0.3 if args.smoke else SECONDS / 2 if args.quick else SECONDS
    ways = [way for way, (_, gpu_only) in WAYS.items() if gpu or not gpu_only]
    found: dict[str, dict[str, dict]] = {}
    result = {
        "benchmark": "utilization",
        "command": bench_modes.command("bench/utilization.py", args),
        "date": datetime.date.today().isoformat(),
        "device": device,
        "backend": config.backend,
        "code": code_state(),
        "goal_percent": GOAL,
        "shapes": found,
    }
    measured = ROOT / "bench" / "results" / f"utilization-{short}-{result['date']}.json"
    out = bench_modes.result_path(args, measured)
    out.parent.mkdir(parents=True, exist_ok=True)
    for shape in shapes:  # written after each way: a run stopped by a limit keeps the others
        for way in ways:
            found.setdefault(shape[0], {})[way] = measure(shape, way, gpu, seconds)
            out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    for name, rows in found.items():
        for way, row in rows.items():
            if "failed" in row:
                print(f"{name:>16} | {way:<32}: failed")
                continue
            print(
                f"{name:>16} | {way:<32}: utilization {row['gpu_utilization_mean']} % (p95 "
                f"{row['gpu_utilization_p95']}), {row['samples_per_second']:.0f} samples/s, "
                f"epochs of {row['epoch_seconds']:.3f} s, {row['steps_per_dispatch']} steps a "
                f"dispatch, first fit "
                f"{row['first_fit_seconds']:.1f} s"
            )
    print("written to", out)


if __name__ == "__main__":
    main()
