"""Input pipelines, the Python side: array fit() against the device-resident ceiling.

The R benchmark (bench/pipeline.R) compares three ways of feeding the same model:
(a) fit() on arrays, (b) fit() on a gpu_dataset() tf.data pipeline and (c) the
ceiling, one batch already in device memory, repeated. The GPU machines this
project verifies on run Keras on JAX and have no TensorFlow, so tf.data, and
with it (b), cannot run there. This script measures what can: (a) and (c), on
the same two workloads (an MLP on synthetic tabular data; a CNN on the UCI
digits with random flips and contrast as Keras layers at the model's start;
not rotations, because Keras turns XLA off for a model with a RandomRotation
layer, and on JAX every op of the train step then runs on its own),
and reports ``array_fit_vs_ceiling`` (a / c) and (a)'s input wait share. Keys
for (b) are written as null.

The ceiling: on JAX, the batch is ``jax.device_put`` once and a Python generator
yields that same device array every step (Keras passes jax.Arrays through); on
TensorFlow, ``tf.data.Dataset.from_tensors(batch).repeat()``.

Timing: gpukeras.train.timing.step_timer (see inst/python/gpukeras/timing.py). Each
way gets a fresh model and untimed warm-up epochs; then rounds time each way in
turn (rotating the order); samples/s are medians over rounds, ratios the median
of per-round ratios; the input wait share comes from one more epoch timed with
``measure_input=True``.

Usage: KERAS_BACKEND=jax python bench/pipeline.py [--quick | --smoke] [--out FILE]
Run from the repository root. Writes
bench/results/pipeline-python-<device>[-quick].json (a smoke run: see
bench/lib/bench_modes.py).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.data.sources import tensorflow  # noqa: E402
from gpukeras.gpu.devices import cpu_name  # noqa: E402
from gpukeras.train import timing  # noqa: E402

BAR = {"ratio_vs_ceiling": 0.97, "ratio_vs_array_fit": 1.0, "input_wait_share": 0.05}


def mlp_data(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """20 features, two classes, the same rule as bench/pipeline.R (not the same draws)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((rows, 20), dtype=np.float32)
    score = x[:, 0] * x[:, 1] + np.sin(2 * x[:, 2]) + 0.5 * x[:, 3] - 0.3 * x[:, 4] ** 2
    y = (score + rng.normal(0, 0.3, rows) > -0.3).astype(np.int32)
    return x, y


def digits_data(copies: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The shipped UCI digits as 8 x 8 x 1 images in [0, 1], repeated, whole batches only."""
    with gzip.open(ROOT / "inst" / "extdata" / "digits.csv.gz", "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.float32)
    images = (table[:, :64] / 16).reshape(-1, 8, 8, 1)
    labels = table[:, 64].astype(np.int32)
    rows = len(images) * copies // batch_size * batch_size
    return np.tile(images, (copies, 1, 1, 1))[:rows], np.tile(labels, copies)[:rows]


def mlp_model(keras: object, augmented: bool = False) -> object:
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [
            keras.Input((20,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(2),
        ]
    )
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def cnn_model(keras: object, augmented: bool = False) -> object:
    keras.utils.set_random_seed(1)
    front = (
        [
            keras.layers.RandomFlip("horizontal", seed=1),
            keras.layers.RandomContrast(0.2, seed=2),
        ]
        if augmented
        else []
    )
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            *front,
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(2),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(10),
        ]
    )
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def ceiling_source(batch: tuple[np.ndarray, np.ndarray]) -> tuple[object, str]:
    """One batch in device memory, repeated forever; and where it lives."""
    backend = config.backend
    if backend == "jax":
        import jax

        on_device = jax.device_put(batch)

        def repeat() -> Iterator[object]:
            while True:
                yield on_device

        return repeat, str(next(iter(on_device[0].devices())))
    tf = tensorflow()
    return (lambda: tf.data.Dataset.from_tensors(batch).repeat()), "host (tf.data)"


def make_ways(
    keras: object,
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    epochs: int,
    build: Callable,
    augmented: bool,
) -> dict[str, object]:
    """(a) and (c) with the same model (augmentation layers included); for augmented
    models also (c) without them, which shows what the augmentation costs."""
    steps = len(x) // batch_size
    source, placement = ceiling_source((x[:batch_size], y[:batch_size]))
    models = {
        "array_fit": build(keras, augmented=augmented),
        "ceiling": build(keras, augmented=augmented),
    }
    if augmented:
        models["ceiling_without_augmentation"] = build(keras, augmented=False)

    def array_fit(callbacks: list) -> None:
        models["array_fit"].fit(
            x, y, batch_size=batch_size, shuffle=True, epochs=epochs, verbose=0, callbacks=callbacks
        )

    def ceiling(model: object) -> Callable[[list], None]:
        def fit(callbacks: list) -> None:
            model.fit(
                source(),
                steps_per_epoch=steps,
                epochs=epochs,
                shuffle=False,
                verbose=0,
                callbacks=callbacks,
            )

        return fit

    run = {"array_fit": array_fit}
    run.update({name: ceiling(model) for name, model in models.items() if name != "array_fit"})
    return {
        "run": run,
        "models": models,
        "steps": steps,
        "rows": len(x),
        "batch_size": batch_size,
        "epochs": epochs,
        "placement": placement,
    }


def measure(name: str, ways: dict, rounds: int) -> dict[str, object]:
    run = ways["run"]
    names = list(run)
    print(f"{name}: warming up ...", flush=True)
    for way in names:
        run[way]([])
        run[way]([timing.step_timer(skip=0)])
    throughput: dict[str, list[float]] = {way: [] for way in names}
    step_ms: dict[str, list[float]] = {way: [] for way in names}
    for round_ in range(rounds):
        shift = round_ % len(names)  # rotate the order, so no way always runs first
        order = names[shift:] + names[:shift]
        for way in order:
            timer = timing.step_timer(batch_size=ways["batch_size"], skip=0, measure_input=False)
            run[way]([timer])
            report = timer.report()
            throughput[way].append(report["samples_per_second"])
            step_ms[way].append(report["step_time_mean_ms"])
        print(
            f"{name} round {round_ + 1}: "
            + ", ".join(f"{way} {throughput[way][-1]:.0f}" for way in names)
            + " samples/s",
            flush=True,
        )
    waits = {}
    for way in names:
        timer = timing.step_timer(skip=0, measure_input=True)
        run[way]([timer])
        waits[way] = timer.report()
    vs_ceiling = [a / c for a, c in zip(throughput["array_fit"], throughput["ceiling"])]
    return {
        "rows": ways["rows"],
        "batch_size": ways["batch_size"],
        "steps_per_epoch": ways["steps"],
        "epochs_per_timed_fit": ways["epochs"],
        "parameters": ways["models"]["ceiling"].count_params(),
        "ceiling_placement": ways["placement"],
        "samples_per_second": {
            "array_fit": statistics.median(throughput["array_fit"]),
            "gpu_dataset": None,
            **{way: statistics.median(throughput[way]) for way in names[1:]},
        },
        "samples_per_second_rounds": throughput,
        "step_time_mean_ms": {way: statistics.median(step_ms[way]) for way in names},
        "ratio_vs_ceiling": None,
        "ratio_vs_array_fit": None,
        "input_wait_share": None,
        "array_fit_vs_ceiling": statistics.median(vs_ceiling),
        "array_fit_vs_ceiling_rounds": vs_ceiling,
        "input_wait_share_by_way": {way: waits[way]["input_wait_share"] for way in names},
        "input_wait_mean_ms_by_way": {way: waits[way]["input_wait_mean_ms"] for way in names},
        "between_steps_share_by_way": {way: waits[way]["between_steps_share"] for way in names},
        "timing_method": waits["array_fit"]["method"],
    }


def device_facts() -> tuple[str, str]:
    """(name of the device the backend trains on, short name for the file)."""
    if config.backend == "jax":
        import jax

        device = jax.devices()[0]
        if device.platform == "gpu":
            kind = device.device_kind
            return kind, kind.replace("NVIDIA", "").split()[0].lower()
        return f"CPU ({cpu_name()})", "cpu"
    tf = tensorflow()
    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(
            tf.config.list_physical_devices("GPU")[0]
        )
        kind = details.get("device_name", "GPU")
        return kind, kind.replace("NVIDIA", "").split()[0].lower()
    return f"CPU ({cpu_name()})", "cpu"


def code_state() -> dict[str, object]:
    """The commit measured and uncommitted changes to the package's code (None without git)."""

    def git(*args: str) -> list[str] | None:
        try:
            done = subprocess.run(
                ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.splitlines()

    head = git("rev-parse", "HEAD")
    changed = git("status", "--porcelain", "--", "R", "inst/python")
    return {
        "commit": head[0] if head else None,
        "uncommitted": [line.strip() for line in changed] if changed is not None else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    load_before = Path("/proc/loadavg").read_text().strip()
    sizes = {"mlp_rows": 102400, "mlp_epochs": 2, "digits_copies": 32, "cnn_epochs": 1, "rounds": 5}
    if args.smoke:
        sizes.update(mlp_rows=2048, mlp_epochs=1, digits_copies=1, rounds=1)
    elif args.quick:
        sizes.update(mlp_rows=20480, mlp_epochs=3, digits_copies=8)
    keras = config.keras()
    device, short = device_facts()
    x, y = mlp_data(sizes["mlp_rows"])
    mlp = measure(
        "mlp", make_ways(keras, x, y, 256, sizes["mlp_epochs"], mlp_model, False), sizes["rounds"]
    )
    mlp["description"] = (
        f"MLP 20-128-128-2 on {sizes['mlp_rows']:,} synthetic rows x 20 features, "
        "2 classes, batch 256"
    )
    x, y = digits_data(sizes["digits_copies"], 128)
    cnn = measure(
        "cnn", make_ways(keras, x, y, 128, sizes["cnn_epochs"], cnn_model, True), sizes["rounds"]
    )
    cnn["description"] = (
        f"digits CNN (conv 32, conv 64, pool, dense 10) on {len(x):,} 8x8 images "
        f"({sizes['digits_copies']} copies of the 1,797 UCI digits), batch 128, "
        "augment: horizontal flip + contrast 0.2 as layers at the model's start (array fit "
        "and ceiling; ceiling_without_augmentation leaves them out)"
    )
    backend_version = {}
    for name in ("jax", "jaxlib", "tensorflow"):
        module = sys.modules.get(name)
        if module is not None:
            backend_version[name] = getattr(module, "__version__", None)
    result = {
        "benchmark": "pipeline-python",
        "command": bench_modes.command("bench/pipeline.py", args),
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "smoke": args.smoke,
        "machine": {
            "cores": os.cpu_count(),
            "cpu": cpu_name(),
            "gpu": device if short != "cpu" else "none",
            "device": device,
            "loadavg_before": load_before,
            "loadavg_after": Path("/proc/loadavg").read_text().strip(),
        },
        "code": code_state(),
        "backend": keras.backend.backend(),
        "versions": {
            "python": platform.python_version(),
            "keras": keras.__version__,
            "numpy": np.__version__,
            **backend_version,
        },
        "rounds": sizes["rounds"],
        "bar": BAR,
        "workloads": {"mlp": mlp, "cnn": cnn},
        "notes": [
            "(b) gpu_dataset() builds tf.data pipelines, which need TensorFlow; the GPU "
            "machines have none, so gpu_dataset keys are null here. bench/pipeline.R "
            "measures (b) where TensorFlow runs.",
            "array_fit_vs_ceiling = (a) / (c), the same model: how close Keras' own array "
            "input gets to a batch already in device memory; the median of per-round "
            "ratios. In bench/pipeline.R the CNN's ceiling has no augmentation layers "
            "(gpu_dataset() augments in tf.data); here ceiling_without_augmentation is that.",
            "input_wait_share_by_way: share of step time in next(iterator) inside Keras' "
            "train_function (gpukeras.train.timing); with JAX's asynchronous dispatch, an upper "
            "bound of the device's idle time due to input.",
        ],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    suffix = "-quick" if args.quick else ""
    measured = ROOT / "bench" / "results" / f"pipeline-python-{short}{suffix}.json"
    out = bench_modes.result_path(args, measured)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nsamples/s ({device}; backend {result['backend']}; median of {sizes['rounds']})")
    header = ("(a) arrays", "(c) ceiling", "a/c", "wait (a)", "wait (c)", "(c) no augm.")
    print(f"{'':4} {header[0]:>11} {header[1]:>12} {header[2]:>7} " + " ".join(header[3:]))
    for name, workload in (("mlp", mlp), ("cnn", cnn)):
        sps, wait = workload["samples_per_second"], workload["input_wait_share_by_way"]
        bare = sps.get("ceiling_without_augmentation")
        print(
            f"{name:4} {sps['array_fit']:11.0f} {sps['ceiling']:12.0f} "
            f"{workload['array_fit_vs_ceiling']:7.3f} {100 * wait['array_fit']:8.1f}% "
            f"{100 * wait['ceiling']:8.1f}% " + (f"{bare:12.0f}" if bare else "")
        )
    print(f"wrote {out} ({result['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
