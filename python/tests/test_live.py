"""The live line: the monitor's figures in Keras' progress display, never in the history."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gpukeras.gpu import samplers
from gpukeras.train import fit, live, monitor


def test_each_epoch_line_shows_host_cpu_and_the_input_wait_and_the_history_stays_clean(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import keras

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 8)).astype("float32")
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")

    class Slow(keras.callbacks.Callback):
        # Host CPU is sampled every 0.1 s; an epoch of data on the device can end
        # before the first sample, and then nothing is shown rather than a guess.
        def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
            time.sleep(0.3)

    result = fit.fit(model, (x, y), epochs=2, batch_size=32, verbose=2, callbacks=[Slow()])
    lines = [line for line in capsys.readouterr().out.splitlines() if "/32 - " in line]
    assert len(lines) == 2  # one line per epoch, as in a non-interactive run
    for line in lines:
        assert " - loss: " in line and " - cpu_%: " in line and " - input_wait_%: " in line
        # the GPU's figures exactly when a GPU trains (none here: nothing to show)
        assert ("gpu_%" in line) == result["settings"]["device"].startswith("GPU")
    assert sorted(result["history"]) == ["epoch", "loss"]

    quiet = fit.fit(model, (x, y), epochs=1, batch_size=32, verbose=0)
    assert "cpu_%" not in capsys.readouterr().out
    assert sorted(quiet["history"]) == ["epoch", "loss"]


def test_figures_are_the_latest_fresh_readings_of_every_gpu_in_use() -> None:
    now = time.perf_counter()
    watcher = monitor.TrainingMonitor([0, 1], batch_size=32, skip=0, measure_input=True)
    watcher.gpu.samples = [
        samplers.Sample(now - 10, 0, 5.0, 100.0, None),  # stale: an older reading of GPU 0
        samplers.Sample(now - 0.5, 0, 90.0, 2048.0, None),
        samplers.Sample(now - 0.4, 1, 70.0, 1024.0, None),
    ]
    watcher.host.samples = [samplers.HostSample(now - 0.2, 42.0)]
    shown = live.figures(watcher, now)
    assert shown == {"gpu_%": 80.0, "gpu_mem_GiB": 3.0, "cpu_%": 42.0}
    # Readings older than FRESH_SECONDS are not shown as if current.
    assert live.figures(watcher, now + live.FRESH_SECONDS + 1) == {}


def test_keras_progress_display_prints_figures_as_people_read_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from keras.utils import Progbar

    shown = [
        ("cpu_%", live.percent(52.63)),
        ("input_wait_%", live.percent(3.26)),
        ("gpu_%", live.percent(0.0)),
        ("gpu_mem_GiB", live.Figure(3.14159, 2)),
    ]
    for verbose in (1, 2):
        bar = Progbar(2, verbose=verbose, stateless_metrics=set())
        bar.update(2, [("loss", 0.5), *shown], finalize=True)
        line = capsys.readouterr().out.strip().splitlines()[-1]
        assert line.endswith(
            " - loss: 0.5000 - cpu_%: 53 - input_wait_%: 3.3 - gpu_%: 0.0 - gpu_mem_GiB: 3.14"
        ), line
    # They stay the numbers they are.
    assert live.percent(52.63) == 53.0 and live.percent(3.26) + 1 == pytest.approx(4.3)
    assert live.percent(-12.4) == -12.0 and str(live.Figure(2.0, 2)) == "2.00"


def test_the_live_input_wait_is_zero_for_batches_on_the_device() -> None:
    watcher = monitor.TrainingMonitor([], batch_size=32, skip=0, measure_input=False)
    assert "input_wait_%" not in live.figures(watcher, time.perf_counter())
    resident = monitor.TrainingMonitor([], batch_size=32, skip=0, measure_input=False)
    # as the timer records it for a train function marked as one whose batches are there
    resident.timer.record.input_on_device = True  # type: ignore[attr-defined]
    assert live.figures(resident, time.perf_counter()) == {"input_wait_%": 0.0}
