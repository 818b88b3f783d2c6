"""The monitor's cost, the Python side: gpu_fit()'s core with monitor on against monitor off.

gpu_fit() measures while it trains: a step timer (one Python call and two
``perf_counter`` calls per step, and on TensorFlow and JAX the batch fetched
by the timer inside ``train_function``), and two sampler threads at 10 Hz
(NVML where there is a GPU, /proc/stat for the host). This script trains one
model with ``gpukeras.train.fit.fit`` in alternating rounds, monitor on and off, and
compares the time of the steady-state epochs (the first epoch of each fit,
with its tracing, is left out), timed by a callback that only reads the clock
at each epoch's start and end. ``overhead`` is the median over rounds of
(epoch time with the monitor / without) - 1; the bar is 1 %. The samplers'
own CPU time is reported as ``monitor_cpu_share`` (of one core).

Usage: python bench/monitor.py [--quick | --smoke] [--out FILE] (KERAS_BACKEND
picks the backend; on the GPU machines, KERAS_BACKEND=jax). Run from the
repository root. Writes bench/results/monitor-python-<backend>-<device>[-quick].json
(a smoke run: see bench/lib/bench_modes.py).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.gpu.devices import cpu_name, list_devices  # noqa: E402
from gpukeras.train import fit  # noqa: E402

BAR = {"overhead": 0.01}


def workload(
    keras: object, gpu: bool, smoke: bool
) -> tuple[object, tuple[np.ndarray, np.ndarray], int]:
    """An MLP whose steps take milliseconds: short enough that per-step costs would show."""
    width, rows, batch = (
        (64, 1024, 256) if smoke else (4096, 64 * 1024, 1024) if gpu else (512, 256 * 40, 256)
    )
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, 256), dtype=np.float32)
    y = rng.integers(0, 10, rows)
    keras.utils.set_random_seed(0)  # type: ignore[attr-defined]
    model = keras.Sequential(  # type: ignore[attr-defined]
        [
            keras.Input((256,)),  # type: ignore[attr-defined]
            keras.layers.Dense(width, activation="relu"),  # type: ignore[attr-defined]
            keras.layers.Dense(width, activation="relu"),  # type: ignore[attr-defined]
            keras.layers.Dense(10),  # type: ignore[attr-defined]
        ]
    )
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),  # type: ignore[attr-defined]
    )
    return model, (x, y), batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    keras = config.keras()
    started = time.perf_counter()
    gpus = [row for row in list_devices() if row["type"] == "GPU"]
    device = str(gpus[0]["name"]) if gpus else f"CPU ({cpu_name()})"
    short = device.replace("NVIDIA", "").split()[0].lower() if gpus else "cpu"
    model, data, batch = workload(keras, bool(gpus), args.smoke)
    rounds, epochs = (1, 2) if args.smoke else (4, 3) if args.quick else (8, 4)

    class EpochClock(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.seconds: list[float] = []

        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            self.began = time.perf_counter()

        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            self.seconds.append(time.perf_counter() - self.began)

    def run(monitor: bool) -> tuple[float, dict | None]:
        clock = EpochClock()
        result = fit.fit(
            model, data, epochs=epochs, batch_size=batch, monitor=monitor, seed=1,
            callbacks=[clock], verbose=0,
        )  # fmt: skip
        return statistics.median(clock.seconds[1:]), result["monitor"]

    run(True), run(False)  # trace both ways of stepping first
    ratios, on_times, off_times, shares, reports = [], [], [], [], []
    for position in range(rounds):
        order = (True, False) if position % 2 == 0 else (False, True)
        times = {}
        for monitor in order:
            times[monitor], report = run(monitor)
            if report is not None:
                shares.append(report["monitor_cpu_share"])
                reports.append(report)
        on_times.append(times[True])
        off_times.append(times[False])
        ratios.append(times[True] / times[False])
    overhead = statistics.median(ratios) - 1
    last = reports[-1]
    result = {
        "benchmark": "monitor-python",
        "command": bench_modes.command("bench/monitor.py", args),
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "smoke": args.smoke,
        "machine": {"cores": os.cpu_count(), "cpu": cpu_name(), "device": device},
        "backend": keras.backend.backend(),
        "versions": {
            "python": platform.python_version(),
            "keras": keras.__version__,
            "numpy": np.__version__,
        },
        "workload": {
            "model": f"MLP 256-{model.layers[0].units}-{model.layers[0].units}-10",
            "rows": len(data[0]),
            "batch_size": batch,
            "steps_per_epoch": -(-len(data[0]) // batch),
            "epochs_per_fit": epochs,
            "step_time_mean_ms": last["step_time_mean_ms"],
            "input_wait_share": last["input_wait_share"],
        },
        "rounds": rounds,
        "epoch_seconds_with_monitor": on_times,
        "epoch_seconds_without_monitor": off_times,
        "ratio_rounds": ratios,
        "overhead": overhead,
        "monitor_cpu_share": statistics.median(shares),
        "bar": BAR,
        "meets_bar": overhead < BAR["overhead"],
        "notes": [
            "overhead: median over rounds of (median steady-state epoch time with the "
            "monitor / without) - 1; epochs after each fit's first; rounds alternate the order.",
            "monitor_cpu_share: CPU time of the sampler threads / fit wall time (one core = 1).",
            "On TensorFlow the step timer hands Keras the batch it fetched, so Keras runs its "
            "per-batch step function rather than the one that reads the iterator in the graph "
            "(gpukeras.train.timing): monitored epochs can come out a little faster as well as "
            "slower.",
        ],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    quick = "-quick" if args.quick else ""
    name = f"monitor-python-{result['backend']}-{short}{quick}.json"
    out = bench_modes.result_path(args, ROOT / "bench" / "results" / name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{device}, {result['backend']}: step {last['step_time_mean_ms']:.2f} ms, "
        f"monitor overhead {100 * overhead:+.2f} % (bar < 1 %), samplers "
        f"{100 * result['monitor_cpu_share']:.2f} % of a core -> {out}"
    )


if __name__ == "__main__":
    main()
