"""TensorFlow: batches gathered on the device inside Keras' graph loop, against tf.data.

The question (issue #23, item 2): on TensorFlow, Keras runs ``steps_per_execution``
batches in one graph (a ``tf.while_loop`` over the iterator). Does gathering each
batch by index from tensors already in device memory, inside that graph, train
faster than gpukeras' tf.data pipeline over host memory (``pipeline.from_arrays``:
batches gathered by a shuffled index, in parallel, prefetched), with or without
``prefetch_to_device``? Three ways of feeding one model, each on a fresh copy:

- ``tf_data``: ``pipeline.from_arrays(x, y, batch_size, seed)``, what gpu_fit()
  gives Keras for arrays on TensorFlow (batches stay on the host; Keras' step
  copies each one to the device).
- ``tf_data_to_device``: the same with ``to_device`` the training device
  (``tf.data.experimental.prefetch_to_device``).
- ``resident``: ``x`` and ``y`` in ``tf.Variable``s on the device, put there once;
  each epoch's order drawn on the device (``argsort`` of stateless uniforms keyed
  by (seed, epoch)) into a third variable; Keras gets ``Dataset.range(steps)``
  (one int64 per step) and the model's ``train_step`` gathers the step's rows
  from the variables inside Keras' compiled step, so the graph loop never leaves
  the device for data. Whole batches only (rows are cut to a multiple).

Timing: each way gets its model warmed up (one untimed fit: tracing, XLA), then
rounds run each way in turn, the order rotating; a timed fit is ``epochs`` epochs
timed by ``gpukeras.train.timing.step_timer`` (dispatch timestamps; Keras' own count of
rows; the first call left out), so samples/s are steady-state and each epoch's
restart of the pipeline is in them. Ratios are taken within a round, then the
median over rounds with a bootstrap 95 % interval.

What a CPU run can and cannot tell: on a CPU-only machine "the device" is the
host, so ``resident`` saves tf.data's per-batch work (its threads, the element
hand-over, the chunked gather) but no copy, and ``prefetch_to_device`` to the
CPU copies nothing; both ways then compete with the model for the same cores.
What a GPU changes, not measurable here: the host-to-device copy of every batch
(``tf_data``: inside the step; ``tf_data_to_device``: ahead of it, where
TensorFlow overlaps it, see tensorflow#30929), and whether the host keeps up
with a fast device. Run it on a GPU machine with TensorFlow to measure that:
``python bench/tf_resident.py`` picks ``GPU:0`` when TensorFlow sees one.

Measured (bench/results/tf_resident-cpu.json; 2 cores, load 4-8 from other work,
two runs of 5 rounds): no difference the noise lets through. resident / tf_data
was 0.82 [0.69, 0.99], 1.17 [0.71, 1.68] and 1.21 [0.49, 1.58] for the MLP at
steps_per_execution 1, 8 and 32, and 0.95, 1.09 and 1.03 (every interval
across 1) for the CNN; the earlier run's medians were 1.12, 1.20, 0.75 and
0.86, 0.67, 0.96. The tf.data pipeline alone takes 0.1-0.4 ms a batch: 2-13 %
of the MLP's step, 0.2 % of the CNN's, the most the device could save here,
and within the machine's round-to-round spread. prefetch_to_device (to the
CPU) was no faster either (0.66-0.99). Decision: TensorFlow keeps tf.data; no
second way of feeding data on TensorFlow without a measurement that pays for
it. On a GPU the resident way should remove, from each step, the batch's
host-to-device copy (tens of KB here) and tf.data's host work (0.1-0.4 ms a
batch), which matters where a step on the device is as short (small models,
as the H100 run of the JAX side found: Keras' fit() on arrays at 0.55 of a
batch on the device); the verification GPU machines have no TensorFlow, so
that is for a GPU machine that has it.

Usage: python bench/tf_resident.py [--smoke] [--rounds N] [--out FILE]
(run from the repository root; TensorFlow backend). Writes
bench/results/tf_resident-<device>.json; ``--smoke`` runs tiny sizes once and
writes nothing unless ``--out`` is given.
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
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "inst" / "python"))

from gpukeras.core.runtime import config  # noqa: E402
from gpukeras.data import pipeline  # noqa: E402
from gpukeras.gpu.devices import cpu_name  # noqa: E402
from gpukeras.train import timing  # noqa: E402

WAYS = ("tf_data", "tf_data_to_device", "resident")
SEED = 1


def mlp_data(rows: int) -> tuple[np.ndarray, np.ndarray]:
    """20 features, two classes (the rule of bench/pipeline.py)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((rows, 20), dtype=np.float32)
    score = x[:, 0] * x[:, 1] + np.sin(2 * x[:, 2]) + 0.5 * x[:, 3] - 0.3 * x[:, 4] ** 2
    return x, (score + rng.normal(0, 0.3, rows) > -0.3).astype(np.int32)


def digits_data(copies: int) -> tuple[np.ndarray, np.ndarray]:
    """The shipped UCI digits as 8 x 8 x 1 images in [0, 1], repeated."""
    with gzip.open(ROOT / "inst" / "extdata" / "digits.csv.gz", "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.float32)
    images = (table[:, :64] / 16).reshape(-1, 8, 8, 1)
    labels = table[:, 64].astype(np.int32)
    return np.tile(images, (copies, 1, 1, 1)), np.tile(labels, copies)


def mlp_model(keras: object) -> object:
    return keras.Sequential(  # type: ignore[attr-defined]
        [
            keras.Input((20,)),  # type: ignore[attr-defined]
            keras.layers.Dense(128, activation="relu"),  # type: ignore[attr-defined]
            keras.layers.Dense(128, activation="relu"),  # type: ignore[attr-defined]
            keras.layers.Dense(2),  # type: ignore[attr-defined]
        ]
    )


def cnn_model(keras: object) -> object:
    layers = keras.layers  # type: ignore[attr-defined]
    return keras.Sequential(  # type: ignore[attr-defined]
        [
            keras.Input((8, 8, 1)),  # type: ignore[attr-defined]
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.Conv2D(64, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(10),
        ]
    )


def compiled(keras: object, build: Callable, per_call: int) -> object:
    keras.utils.set_random_seed(SEED)  # type: ignore[attr-defined]
    model = build(keras)
    model.compile(  # type: ignore[attr-defined]
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),  # type: ignore[attr-defined]
        steps_per_execution=per_call,
        jit_compile=True,
    )
    return model


def resident_feed(
    tf: object, model: object, x: np.ndarray, y: np.ndarray, batch_size: int, device: str
) -> tuple[object, object]:
    """Data on ``device`` once, and ``model.train_step`` gathering each batch there.

    Returns Keras' input (one int64 per step, repeated) and a callback that
    draws each epoch's order on the device. Set before Keras makes its train
    function, so its compiled step (and the graph loop around it) holds the gather.
    """
    steps = len(x) // batch_size
    keras = config.keras()
    with tf.device(device):  # type: ignore[attr-defined]
        features = tf.Variable(x[: steps * batch_size], trainable=False)  # type: ignore[attr-defined]
        labels = tf.Variable(y[: steps * batch_size], trainable=False)  # type: ignore[attr-defined]
        order = tf.Variable(tf.range(steps * batch_size), trainable=False)  # type: ignore[attr-defined]
    train_step = model.train_step  # type: ignore[attr-defined]

    def gathered_step(step: object) -> object:
        # The step's rows of the order by a gather of static size: slicing the order
        # variable at a step-dependent start (order[a:b], tf.slice) made XLA compile the
        # step for 40-90 s here, against 2-4 s this way.
        at = tf.cast(step, tf.int32) * batch_size + tf.range(batch_size)  # type: ignore[attr-defined]
        rows = tf.gather(order, at)  # type: ignore[attr-defined]
        return train_step((tf.gather(features, rows), tf.gather(labels, rows)))  # type: ignore[attr-defined]

    model.train_step = gathered_step  # type: ignore[attr-defined]

    class Shuffle(keras.callbacks.Callback):  # type: ignore[attr-defined,name-defined]
        def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
            with tf.device(device):  # type: ignore[attr-defined]
                draw = tf.random.stateless_uniform([steps * batch_size], seed=[SEED, epoch])  # type: ignore[attr-defined]
                order.assign(tf.argsort(draw))  # type: ignore[attr-defined]

    dataset = tf.data.Dataset.range(steps).repeat()  # type: ignore[attr-defined]
    return dataset, Shuffle()


def make_ways(
    keras: object,
    tf: object,
    x: np.ndarray,
    y: np.ndarray,
    batch_size: int,
    build: Callable,
    per_call: int,
    device: str,
) -> tuple[dict[str, Callable[[int, list], None]], object]:
    """Each way as ``fit(epochs, callbacks)`` on a model of its own (one per way), and the
    tf_data way's pipeline (one epoch of it)."""
    rows = len(x) // batch_size * batch_size
    x, y = x[:rows], y[:rows]
    steps = rows // batch_size
    ways: dict[str, Callable[[int, list], None]] = {}

    def over(model: object, data: object, extra: list) -> Callable[[int, list], None]:
        def fit(epochs: int, callbacks: list) -> None:
            model.fit(  # type: ignore[attr-defined]
                data,
                steps_per_epoch=steps,
                epochs=epochs,
                shuffle=False,
                verbose=0,
                callbacks=extra + callbacks,
            )

        return fit

    for way in WAYS:
        model = compiled(keras, build, per_call)
        if way == "resident":
            data, shuffle = resident_feed(tf, model, x, y, batch_size, device)
            ways[way] = over(model, data, [shuffle])
            continue
        to_device = device if way == "tf_data_to_device" else "none"
        built = pipeline.from_arrays(x, y, batch_size=batch_size, seed=SEED, to_device=to_device)
        ways[way] = over(model, built["dataset"].repeat(), [])
        if way == "tf_data":
            epoch = built["dataset"]
    return ways, epoch


def interval(values: list[float], draws: int = 4000) -> list[float]:
    """A bootstrap 95 % interval of the median of ``values`` (seeded)."""
    rng = np.random.default_rng(1)
    medians = np.median(rng.choice(values, size=(draws, len(values))), axis=1)
    return [float(np.quantile(medians, 0.025)), float(np.quantile(medians, 0.975))]


def measure(
    name: str,
    ways: dict[str, Callable[[int, list], None]],
    epoch: object,
    rounds: int,
    epochs: int,
) -> dict[str, object]:
    """Samples/s of each way over ``rounds`` rotating rounds, the ratios to tf_data, and
    what tf_data's pipeline (``epoch``) takes alone per batch, timed in each round."""
    for run in ways.values():  # tracing, XLA, the pipeline's first start
        run(1, [])
    rates: dict[str, list[float]] = {way: [] for way in ways}
    step_ms: dict[str, list[float]] = {way: [] for way in ways}
    alone_ms: list[float] = []
    names = list(ways)
    batches = int(epoch.cardinality())  # type: ignore[attr-defined]
    for round_ in range(rounds):
        shift = round_ % len(names)
        for way in names[shift:] + names[:shift]:
            timer = timing.step_timer(skip=1, measure_input=False)
            ways[way](epochs, [timer])
            report = timer.report()
            rates[way].append(float(report["samples_per_second"]))  # type: ignore[arg-type]
            step_ms[way].append(float(report["batch_time_mean_ms"]))  # type: ignore[arg-type]
        probe = timing.pipeline_seconds(epoch, batches, seconds=2.0, batches=batches)
        alone_ms.append(probe["batch_seconds"] * 1e3)
        print(
            f"{name} round {round_ + 1}: "
            + ", ".join(f"{way} {rates[way][-1]:.0f}" for way in names)
            + " samples/s",
            flush=True,
        )
    ratios = {
        f"{way}_vs_tf_data": [a / b for a, b in zip(rates[way], rates["tf_data"])]
        for way in names
        if way != "tf_data"
    }
    ratios["resident_vs_tf_data_to_device"] = [
        a / b for a, b in zip(rates["resident"], rates["tf_data_to_device"])
    ]
    shares = [alone / step for alone, step in zip(alone_ms, step_ms["tf_data"])]
    return {
        "pipeline_alone_ms": statistics.median(alone_ms),
        "pipeline_alone_share_of_step": statistics.median(shares),
        "pipeline_alone_share_ci95": interval(shares),
        "samples_per_second": {way: statistics.median(rates[way]) for way in names},
        "samples_per_second_rounds": rates,
        "step_time_ms": {way: statistics.median(step_ms[way]) for way in names},
        "ratios": {key: statistics.median(values) for key, values in ratios.items()},
        "ratios_ci95": {key: interval(values) for key, values in ratios.items()},
        "ratio_rounds": ratios,
    }


def training_device(tf: object) -> tuple[str, str]:
    """The device the ways train on ('GPU:0' when TensorFlow sees one), and its name."""
    gpus = tf.config.list_physical_devices("GPU")  # type: ignore[attr-defined]
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])  # type: ignore[attr-defined]
        return "GPU:0", str(details.get("device_name", "GPU"))
    return "CPU:0", f"CPU ({cpu_name()})"


def commit() -> str | None:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round, no file")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    started = time.perf_counter()
    load_before = Path("/proc/loadavg").read_text().strip()
    keras = config.keras()
    if keras.backend.backend() != "tensorflow":
        raise SystemExit("bench/tf_resident.py measures the TensorFlow backend (KERAS_BACKEND)")
    import tensorflow as tf

    device, device_name = training_device(tf)
    per_calls, rounds, epochs = (1, 8, 32), args.rounds, 2
    plans = [
        ("mlp", mlp_data(102400), mlp_model, 256),
        ("cnn", digits_data(4), cnn_model, 128),
    ]
    if args.smoke:  # every way once, at one steps_per_execution: it runs, and quickly
        per_calls, rounds, epochs = (8,), 1, 1
        plans = [("mlp", mlp_data(8192), mlp_model, 256)]
    workloads: dict[str, object] = {}
    for name, (x, y), build, batch_size in plans:
        for per_call in per_calls:
            label = f"{name}_spe{per_call}"
            ways, epoch = make_ways(keras, tf, x, y, batch_size, build, per_call, device)
            result = measure(label, ways, epoch, rounds, epochs)
            result.update(
                rows=len(x) // batch_size * batch_size,
                batch_size=batch_size,
                steps_per_execution=per_call,
            )
            workloads[label] = result
    result = {
        "benchmark": "tf_resident",
        "command": "python bench/tf_resident.py" + (" --smoke" if args.smoke else ""),
        "date": datetime.date.today().isoformat(),
        "smoke": args.smoke,
        "machine": {
            "cores": os.cpu_count(),
            "cpu": cpu_name(),
            "device": device_name,
            "loadavg_before": load_before,
            "loadavg_after": Path("/proc/loadavg").read_text().strip(),
        },
        "commit": commit(),
        "training_device": device,
        "versions": {
            "python": platform.python_version(),
            "keras": keras.__version__,
            "tensorflow": tf.__version__,
            "numpy": np.__version__,
        },
        "rounds": rounds,
        "epochs_per_timed_fit": epochs,
        "workloads": {
            "mlp": "MLP 20-128-128-2 on 102,400 synthetic rows x 20 features, batch 256 "
            "(smoke: 8,192 rows)",
            "cnn": "digits CNN (conv 32, conv 64, pool, dense 10) on 7,168 8x8 images "
            "(4 copies of the 1,797 UCI digits, whole batches), batch 128",
        },
        "results": workloads,
        "notes": [
            "samples_per_second: median over rounds of timed fits "
            "(gpukeras.train.timing.step_timer: "
            "dispatch timestamps, Keras' count of rows, the first call of each fit left out); "
            "ratios: the median of per-round ratios (ways run back to back, rotating order), "
            "with a bootstrap 95% interval.",
            "jit_compile = TRUE for every way; whole batches only.",
            "pipeline_alone_ms: tf_data's pipeline read alone from Python, one epoch per "
            "round (gpukeras.train.timing.pipeline_seconds: its start spread over the epoch, the "
            "cost of a Python next() taken off); pipeline_alone_share_of_step: that over "
            "tf_data's time per training step, per round: on a CPU-only machine the most "
            "that gathering on the device could save.",
        ],
        "wall_seconds": round(time.perf_counter() - started, 1),
    }
    out = args.out
    if out is None and not args.smoke:
        short = "cpu" if device.startswith("CPU") else device_name.replace("NVIDIA ", "")
        out = ROOT / "bench" / "results" / f"tf_resident-{short.replace(' ', '-')}.json"
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nsamples/s on {device_name} ({device}), median of {rounds} round(s)")
    print(
        f"{'':10} {'tf_data':>10} {'to_device':>10} {'resident':>10}  "
        "resident/tf_data [95% CI]  pipeline alone, share of a step"
    )
    for label, numbers in workloads.items():
        rate = numbers["samples_per_second"]  # type: ignore[index]
        low, high = numbers["ratios_ci95"]["resident_vs_tf_data"]  # type: ignore[index]
        print(
            f"{label:10} {rate['tf_data']:10.0f} {rate['tf_data_to_device']:10.0f} "
            f"{rate['resident']:10.0f}  {numbers['ratios']['resident_vs_tf_data']:.3f} "  # type: ignore[index]
            f"[{low:.3f}, {high:.3f}]  {numbers['pipeline_alone_ms']:.3f} ms, "  # type: ignore[index]
            f"{100 * numbers['pipeline_alone_share_of_step']:.1f} %"  # type: ignore[index]
        )
    print(
        f"{'wrote ' + str(out) if out else 'smoke: nothing written'} ({result['wall_seconds']} s)"
    )


if __name__ == "__main__":
    main()
