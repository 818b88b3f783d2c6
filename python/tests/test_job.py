"""gpukeras.train.job: carrying a model, callbacks and a schedule to a child process, and progress.

The processes themselves (supervisor, child, restarts after a crash) are
tested from R (tests/testthat/test-job.R); here the Python pieces each do
their part.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest

from gpukeras.core.runtime import config
from gpukeras.train import job, live
from nvml_double import FakeGpu, fake_pynvml

pytestmark = pytest.mark.slow  # background jobs: child processes


def compiled_model() -> object:
    keras = config.keras()
    keras.utils.set_random_seed(1)
    model = keras.Sequential(
        [keras.Input(shape=(4,)), keras.layers.Dense(3), keras.layers.Dense(1)]
    )
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="mse")
    return model


def data() -> tuple[np.ndarray, np.ndarray]:
    x = np.sin(np.arange(200, dtype="float32")).reshape(50, 4)
    return x, x @ np.array([1.0, -2.0, 0.5, 3.0], dtype="float32")


def test_a_model_goes_and_comes_back_with_its_optimizer_state(tmp_path: object) -> None:
    model = compiled_model()
    x, y = data()
    model.fit(x, y, batch_size=10, epochs=1, verbose=0)
    carried = job.carry_model(model, str(tmp_path))
    assert str(tmp_path) in carried["model"]
    loaded = job.load_carried(str(tmp_path), carried["sys_path"])["model"]
    for got, want in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(got, want)
    # The child trains on; the parent's model gets the weights and the optimizer's state.
    loaded.fit(x, y, batch_size=10, epochs=2, verbose=0)
    path = job.save_trained(loaded, str(tmp_path / "trained.weights.h5"))
    job.load_trained(model, path)
    assert int(model.optimizer.iterations.numpy()) == 15
    for got, want in zip(model.get_weights(), loaded.get_weights()):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(model.optimizer.variables, loaded.optimizer.variables):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_a_model_never_trained_loads_into_a_fresh_one(tmp_path: object) -> None:
    trained = compiled_model()
    x, y = data()
    trained.fit(x, y, batch_size=10, epochs=1, verbose=0)
    path = job.save_trained(trained, str(tmp_path / "trained.weights.h5"))
    fresh = compiled_model()
    job.load_trained(fresh, path)  # its optimizer is built first
    assert int(fresh.optimizer.iterations.numpy()) == 5


def test_an_unregistered_custom_layer_is_refused_by_name(tmp_path: object) -> None:
    keras = config.keras()

    class Doubling(keras.layers.Layer):
        def call(self, x: object) -> object:
            return x * 2

    model = keras.Sequential([keras.Input(shape=(4,)), Doubling(), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    # Defined inside a function: its module has no such name for a fresh process to find.
    with pytest.raises(job.NotCarriableError, match=r"uses Doubling \(test_job\)"):
        job.carry_model(model, str(tmp_path))
    assert not (tmp_path / job.MODEL_FILE).exists()


def test_an_uncompiled_model_is_refused(tmp_path: object) -> None:
    keras = config.keras()
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(1)])
    with pytest.raises(job.NotCarriableError, match="not compiled"):
        job.carry_model(model, str(tmp_path))


def test_callbacks_are_pickled_and_a_lambda_callback_is_refused(tmp_path: object) -> None:
    keras = config.keras()
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=3)
    job.carry_callbacks([stop], str(tmp_path))
    with open(tmp_path / job.CALLBACKS_FILE, "rb") as source:
        (again,) = pickle.load(source)
    assert type(again) is type(stop) and again.patience == 3
    with pytest.raises(job.NotCarriableError, match=r"^The callback LambdaCallback cannot be"):
        job.carry_callbacks([keras.callbacks.LambdaCallback(on_epoch_end=lambda *a: None)], "x")


def test_a_schedule_goes_as_its_config(tmp_path: object) -> None:
    keras = config.keras()
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    carried = job.carry_schedule(schedule)
    compiled_model().save(str(tmp_path / job.MODEL_FILE))
    again = job.load_carried(str(tmp_path), [], schedule=carried)["schedule"]
    assert float(again(20)) == pytest.approx(0.025)


def test_carry_takes_the_model_callbacks_and_schedule_that_load_carried_gives_back(
    tmp_path: object,
) -> None:
    keras = config.keras()
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=10, decay_rate=0.5)
    stop = keras.callbacks.EarlyStopping(monitor="loss", patience=3)
    carried = job.carry(compiled_model(), str(tmp_path), callbacks=[stop], schedule=schedule)
    again = job.load_carried(str(tmp_path), carried["sys_path"], schedule=carried["schedule"])
    assert isinstance(again["model"], keras.Model)
    assert [type(callback) for callback in again["callbacks"]] == [type(stop)]
    assert float(again["schedule"](20)) == pytest.approx(0.025)
    # no callbacks, no schedule: the model alone, and nothing pickled
    alone = tmp_path / "alone"
    alone.mkdir()
    assert job.carry(compiled_model(), str(alone))["schedule"] is None
    assert not (alone / job.CALLBACKS_FILE).exists()


def test_progress_is_written_with_the_latest_gpu_reading(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml([FakeGpu()]))
    model = compiled_model()
    x, y = data()
    progress = job.progress_callback(str(tmp_path), attempt=2, batch_size=10, nvml_indices=[0])
    model.fit(x, y, batch_size=10, epochs=2, verbose=0, callbacks=[progress])
    fields = dict(
        line.split(": ", 1) for line in (tmp_path / job.PROGRESS_FILE).read_text().splitlines()
    )
    assert fields["attempt"] == "2"
    assert (fields["epoch"], fields["epochs"], fields["batch"], fields["steps"]) == (
        "2",
        "2",
        "5",
        "5",
    )
    assert float(fields["log_loss"]) > 0
    assert float(fields["gpu_memory_used_mib"]) > 0
    assert "gpu_utilization" in fields
    lines = (tmp_path / job.EPOCHS_FILE).read_text().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["1", "2"]
    assert lines[1].split("\t")[1].startswith("loss=")


def test_epoch_lines_show_values_as_keras_progress_display_does(tmp_path: object) -> None:
    model = compiled_model()
    x, y = data()
    progress = job.progress_callback(str(tmp_path), attempt=1, batch_size=10, nvml_indices=[])
    history = model.fit(x, y, batch_size=10, epochs=1, verbose=0, callbacks=[progress])
    [line] = (tmp_path / job.EPOCHS_FILE).read_text().splitlines()
    loss = history.history["loss"][0]
    shown = f"{loss:.4f}" if abs(loss) > 1e-3 else f"{loss:.4e}"  # Keras' ProgbarLogger's rule
    assert line == f"1\tloss={shown}"
    assert live.as_keras_shows(0.716968) == "0.7170"
    assert live.as_keras_shows(0.00001234) == "1.2340e-05"
    assert live.as_keras_shows(live.percent(12.34)) == "12"


def test_arrays_go_as_npy_files_memory_mapped_back_whole_or_by_rows(tmp_path: object) -> None:
    """R data a job or a worker carries: saved once, mapped back copy-on-write (a write
    to the map leaves the file as it was), or some rows as one C-order copy."""
    array = np.asfortranarray(np.arange(12, dtype="float32").reshape(4, 3))
    path = job.save_array(array, str(tmp_path / "data-x.npy"))
    mapped = job.load_array(path)
    assert isinstance(mapped, np.memmap)
    np.testing.assert_array_equal(mapped, array)
    mapped[0, 0] = 99.0
    np.testing.assert_array_equal(np.load(path), array)
    rows = job.load_array(path, [3, 1])
    assert rows.flags.c_contiguous and not isinstance(rows, np.memmap)
    np.testing.assert_array_equal(rows, array[[3, 1]])
