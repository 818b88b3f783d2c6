"""The wait at the end of fit(): tf.data's autotuning thread, with and without it.

TensorFlow 2.21 sometimes returns from ``model.fit()`` seconds after training
ended. Stack samples taken in that wait (gdb, all threads) show the main thread
in ``RootDataset::Iterator::~Iterator`` joining tf.data's autotuning thread
(``UnboundedThreadPool::LogicalThreadWrapper`` destructor) while that thread
sleeps in ``Model::OptimizeLoop`` (a condition-variable wait): dropping the
iterator cancels the thread, whose wake-up races with the flag it reads (the
cancellation manager sets it only after running the callbacks), and a thread
that loses sleeps out its period, which doubles up to a minute.
gpu_dataset() pipelines therefore run without that thread
(``pipeline._without_autotune_thread``).

This script trains one model three ways in alternating rounds, each on a fresh
copy, ``epochs`` epochs of 60,000 x 784 floats (MLP 784-512-512-10, batch 128):

- ``keras_arrays``: Keras' own ``fit()`` on NumPy arrays (its own tf.data
  pipeline, with the autotuning thread);
- ``pipeline``: ``fit()`` on ``pipeline.from_arrays()`` (gpu_dataset()'s
  pipeline, without the thread), ``repeat()`` and ``steps_per_epoch`` as
  gpu_fit() hands it to Keras;
- ``pipeline_autotune``: the same pipeline with autotuning switched back on.

For each fit: ``train_seconds`` (fit() called to Keras' ``on_train_end``) and
``tail_seconds`` (``on_train_end`` to fit() returning, the wait). And the
pipeline alone (``pipeline_facts.benchmark``, batches/s), with and without the thread,
in the same rounds: what switching it off costs the input.

Usage: python bench/stall.py [--quick | --smoke] [--out FILE] (from the
repository root; TensorFlow backend). Writes bench/results/stall-cpu.json
(stall-cpu-quick.json with --quick; a smoke run: see bench/lib/bench_modes.py).
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "inst" / "python"), str(ROOT / "bench" / "lib")]

import bench_modes  # noqa: E402

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.data import pipeline, pipeline_facts  # noqa: E402
from gpukeras.data.sources import tensorflow  # noqa: E402
from gpukeras.gpu.devices import cpu_name  # noqa: E402

BATCH = 128
# A tail longer than this is a stall (a fit's own end takes milliseconds).
STALL_SECONDS = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_modes.add_arguments(parser)
    args = parser.parse_args()
    started = time.perf_counter()
    load_before = Path("/proc/loadavg").read_text().strip()
    rows, epochs, rounds = (2048, 1, 1) if args.smoke else (60000, 2, 4 if args.quick else 10)
    keras = config.keras()
    tf = tensorflow()
    rng = np.random.default_rng(1)
    x = rng.random((rows, 784), dtype=np.float32)
    y = x[:, :10].argmax(axis=1).astype(np.int32)

    class TrainEnd(keras.callbacks.Callback):
        def on_train_end(self, logs: dict | None = None) -> None:
            self.at = time.perf_counter()

    def model() -> object:
        keras.utils.set_random_seed(1)
        built = keras.Sequential(
            [
                keras.Input((784,)),
                keras.layers.Dense(512, activation="relu"),
                keras.layers.Dense(512, activation="relu"),
                keras.layers.Dense(10),
            ]
        )
        built.compile(
            optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
        return built

    def dataset(autotune: bool) -> object:
        made = pipeline.from_arrays(x, y, batch_size=BATCH, seed=1)["dataset"]
        if autotune:
            options = tf.data.Options()
            options.autotune.enabled = True
            made = made.with_options(options)
        return made

    def fit_way(way: str) -> dict[str, float]:
        fresh, clock = model(), TrainEnd()
        if way == "keras_arrays":
            begun = time.perf_counter()
            fresh.fit(x, y, batch_size=BATCH, epochs=epochs, verbose=0, callbacks=[clock])
        else:
            data = dataset(autotune=way == "pipeline_autotune")
            steps = int(data.cardinality())
            begun = time.perf_counter()
            fresh.fit(
                data.repeat(),
                steps_per_epoch=steps,
                epochs=epochs,
                shuffle=False,  # the pipeline's own, as gpu_fit() says
                verbose=0,
                callbacks=[clock],
            )
        ended = time.perf_counter()
        return {"train_seconds": clock.at - begun, "tail_seconds": ended - clock.at}

    def input_way(autotune: bool) -> float:
        steps = 20 if args.smoke else 400
        return float(pipeline_facts.benchmark(dataset(autotune), steps=steps)["batches_per_second"])

    ways = ["keras_arrays", "pipeline", "pipeline_autotune"]
    fits: dict[str, dict[str, list[float]]] = {
        way: {"train_seconds": [], "tail_seconds": []} for way in ways
    }
    input_rate: dict[str, list[float]] = {"pipeline": [], "pipeline_autotune": []}
    for round_ in range(rounds):
        shift = round_ % len(ways)  # rotate the order, so no way always runs first
        for way in ways[shift:] + ways[:shift]:
            gc.collect()
            for key, value in fit_way(way).items():
                fits[way][key].append(value)
        for name in (["pipeline", "pipeline_autotune"] if round_ % 2 == 0 else
                     ["pipeline_autotune", "pipeline"]):  # fmt: skip
            input_rate[name].append(input_way(autotune=name == "pipeline_autotune"))
        print(
            f"round {round_ + 1}: "
            + ", ".join(
                f"{way} {fits[way]['train_seconds'][-1]:.2f} s + tail "
                f"{fits[way]['tail_seconds'][-1]:.3f} s"
                for way in ways
            ),
            flush=True,
        )
    ratios = [a / b for a, b in zip(input_rate["pipeline"], input_rate["pipeline_autotune"])]
    device = f"CPU ({cpu_name()})"
    result = {
        "benchmark": "stall",
        "command": bench_modes.command("bench/stall.py", args),
        "date": datetime.date.today().isoformat(),
        "quick": args.quick,
        "smoke": args.smoke,
        "machine": {
            "cores": os.cpu_count(),
            "device": device,
            "gpu": [d.name for d in tf.config.list_logical_devices("GPU")] or "none",
            "loadavg_before": load_before,
            "loadavg_after": Path("/proc/loadavg").read_text().strip(),
        },
        "backend": keras.backend.backend(),
        "versions": {
            "python": platform.python_version(),
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "numpy": np.__version__,
        },
        "workload": {
            "model": "MLP 784-512-512-10 (relu), adam",
            "rows": rows,
            "batch_size": BATCH,
            "epochs": epochs,
        },
        "rounds": rounds,
        "stall_seconds": STALL_SECONDS,
        "fits": fits,
        "train_seconds_median": {w: statistics.median(fits[w]["train_seconds"]) for w in ways},
        "tail_seconds_max": {w: max(fits[w]["tail_seconds"]) for w in ways},
        "stalls": {w: sum(t > STALL_SECONDS for t in fits[w]["tail_seconds"]) for w in ways},
        "input_batches_per_second": input_rate,
        "input_without_vs_with_autotune": {
            "median": statistics.median(ratios),
            "rounds": ratios,
        },
        "notes": [
            "train_seconds: fit() called to Keras' on_train_end; tail_seconds: on_train_end "
            "to fit() returning (Keras drops its iterators there); a stall is a tail over "
            "stall_seconds. Rounds rotate the order of the ways.",
            "input_batches_per_second: gpukeras.data.pipeline_facts.benchmark() of the pipeline "
            "alone (no model), without tf.data's autotuning thread (pipeline) and with it; "
            "input_without_vs_with_autotune: the median of the per-round ratios.",
            "Without a GPU, tf.data's threads and the model's compute share the same CPU "
            "cores; other processes on the machine change the speed from round to round.",
        ],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    suffix = "-quick" if args.quick else ""
    out = bench_modes.result_path(args, ROOT / "bench" / "results" / f"stall-cpu{suffix}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for way in ways:
        print(
            f"{way:18} train {result['train_seconds_median'][way]:6.2f} s (median), "
            f"longest tail {result['tail_seconds_max'][way]:6.3f} s, "
            f"{result['stalls'][way]} stall(s) in {rounds} fits"
        )
    print(
        "input without / with the autotuning thread: "
        f"{result['input_without_vs_with_autotune']['median']:.2f} (median of {rounds})"
    )
    print(f"wrote {out} ({result['wall_seconds']:.0f} s)")


if __name__ == "__main__":
    main()
