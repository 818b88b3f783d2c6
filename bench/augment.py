"""Augmentation presets on the host or on the device (issue #23, item 1): should gpu_dataset()'s
augment presets, which are Keras preprocessing layers, run inside the training step?

A small CNN on 32 x 32 x 3 images, with the presets ``flip_horizontal`` and ``rotation``,
trained by ``gpukeras.train.fit.fit`` three ways, each with a fresh model (same seed), one
untimed warm-up epoch, then the timed epochs, in an order that rotates from round to round:

- ``host``: a gpu_dataset() of the arrays with ``augment =`` (the layers run in tf.data on
  the host, batches stream to the device); needs TensorFlow, so it is not measured on the
  GPU machines, which have none;
- ``device``: the same layers first in the model (they augment in training only), the
  arrays on the device (the device-resident loop, several steps per dispatch);
- ``none``: the model without augmentation, arrays on the device: what the augmentation
  costs on the device is ``device`` over it.

Ratios are taken within each round, then their median with a bootstrap 95% interval.

Usage: KERAS_BACKEND=jax python bench/augment.py [--quick | --smoke] [--out FILE]
Run from the repository root. Writes bench/results/augment-<device>-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402
from pipeline import code_state, device_facts  # noqa: E402
from resident import bootstrap  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.train import fit  # noqa: E402

PRESETS = {"flip_horizontal": {}, "rotation": {}}
BATCH = 128


def model_with(keras: object, augment: bool) -> object:
    """The CNN, with the presets' layers first when ``augment``."""
    k: object = keras
    layers = [k.Input((32, 32, 3))]  # type: ignore[attr-defined]
    if augment:
        layers += [
            k.layers.RandomFlip("horizontal", seed=1),  # type: ignore[attr-defined]
            k.layers.RandomRotation(0.1, seed=2),  # type: ignore[attr-defined]
        ]
    layers += [
        k.layers.Conv2D(32, 3, activation="relu"),  # type: ignore[attr-defined]
        k.layers.MaxPooling2D(),  # type: ignore[attr-defined]
        k.layers.Conv2D(64, 3, activation="relu"),  # type: ignore[attr-defined]
        k.layers.GlobalAveragePooling2D(),  # type: ignore[attr-defined]
        k.layers.Dense(10),  # type: ignore[attr-defined]
    ]
    k.utils.set_random_seed(1)  # type: ignore[attr-defined]
    model = k.Sequential(layers)  # type: ignore[attr-defined]
    model.compile(
        optimizer="adam",
        loss=k.losses.SparseCategoricalCrossentropy(from_logits=True),  # type: ignore[attr-defined]
    )
    return model


def ways(keras: object, x: np.ndarray, y: np.ndarray, epochs: int) -> dict[str, Callable]:
    def timed(make_model: Callable[[], object], data: Callable[[], object], batch: object):
        def run() -> dict[str, object]:
            model = make_model()
            fit.fit(model, data(), batch_size=batch, epochs=1, verbose=0, monitor=False)
            started = time.perf_counter()
            result = fit.fit(model, data(), batch_size=batch, epochs=epochs, verbose=0)
            return {
                "seconds": time.perf_counter() - started,
                "data": result["settings"]["data"],
                "steps_per_dispatch": result["settings"]["steps_per_execution"],
            }

        return run

    found = {
        "device": timed(lambda: model_with(keras, True), lambda: (x, y), BATCH),
        "none": timed(lambda: model_with(keras, False), lambda: (x, y), BATCH),
    }
    if importlib.util.find_spec("tensorflow") is not None:
        from gpukeras.data import pipeline

        def augmented() -> object:
            made = pipeline.from_arrays(x, y, batch_size=BATCH, seed=1, augment=PRESETS)
            return made["dataset"]

        found["host"] = timed(lambda: model_with(keras, False), augmented, None)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    keras = config.keras()
    device, short = device_facts()
    rounds = 1 if args.smoke else 3 if args.quick else 5
    # smoke: one batch, enough to run every way (512 rows took 66 s here, 128 take 26 s)
    rows, epochs = (128, 1) if args.smoke else (20480, 2)
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 255, (rows, 32, 32, 3)).astype("float32")
    y = rng.integers(0, 10, rows).astype("int32")
    runs = ways(keras, x, y, epochs)
    seen: dict[str, list[dict[str, object]]] = {name: [] for name in runs}
    names = list(runs)
    for round_index in range(rounds):
        for name in names[round_index % len(names) :] + names[: round_index % len(names)]:
            seen[name].append(runs[name]())
    seconds = {name: [float(r["seconds"]) for r in done] for name, done in seen.items()}  # type: ignore[arg-type]

    def ratio(slow: str, fast: str) -> dict[str, object] | None:
        if slow not in seconds or fast not in seconds:
            return None
        values = [s / f for s, f in zip(seconds[slow], seconds[fast])]
        return {"median": statistics.median(values), "ci95": bootstrap(values), "rounds": values}

    result = {
        "benchmark": "augment",
        "command": bench_modes.command("bench/augment.py", args),
        "date": datetime.date.today().isoformat(),
        "device": device,
        "backend": config.backend,
        "rows": rows,
        "batch_size": BATCH,
        "epochs_timed": epochs,
        "rounds": rounds,
        "presets": list(PRESETS),
        "code": code_state(),
        "seconds": {name: statistics.median(values) for name, values in seconds.items()},
        "runs": seen,
        # > 1: the device way is faster than augmenting on the host
        "host_over_device": ratio("host", "device"),
        # the augmentation's cost on the device: > 1 by how much it lengthens the epoch
        "device_over_none": ratio("device", "none"),
        "host": "measured" if "host" in seconds else "not measured: no TensorFlow for tf.data",
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    out = bench_modes.result_path(
        args, ROOT / "bench" / "results" / f"augment-{short}-{result['date']}.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    for name, value in result["seconds"].items():  # type: ignore[union-attr]
        print(f"{name:7s} {value:.2f} s for {epochs} epochs of {rows:,} images")
    for key in ("host_over_device", "device_over_none"):
        if result[key] is not None:
            print(f"{key}: {result[key]['median']:.2f}")  # type: ignore[index]
    print("written to", out)


if __name__ == "__main__":
    main()
