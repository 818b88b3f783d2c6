"""Which adapter gpu_fit()'s data gets (``adapters.get_data_adapter``), per backend, and which
one training reads (``adapters.on_device``): each adapter's own contract is tested in its
test_adapter_<name>.py."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import NotingPlan, requires
from gpukeras.core.errors import BadDataError
from gpukeras.core.runtime import config
from gpukeras.data import adapters, pipeline


def arrays(rows: int = 100) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((rows, 4)).astype("float32"), rng.integers(0, 2, rows)


def test_arrays_on_jax_go_to_keras_as_numpy_even_with_tensorflow_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On JAX, Keras' own NumPy batches beat a tf.data pipeline for data in memory."""
    requires("tensorflow")
    assert adapters.tensorflow_available()
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    adapter = adapters.get_data_adapter(arrays(), batch_size=32, seed=1)
    assert isinstance(adapter, adapters.ArrayAdapter)
    assert adapter.steps_per_epoch == 4 and adapter.rows == 100


def test_arrays_on_tensorflow_become_a_seeded_tf_data_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requires("tensorflow")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    adapter = adapters.get_data_adapter(arrays(), batch_size=32, seed=1)
    assert isinstance(adapter, adapters.ArrayDatasetAdapter)
    assert adapter.kind == "arrays" and adapter.steps_per_epoch == 4
    assert adapter.gpu_dataset() == {
        "source": "arrays",
        "cache": False,
        "user_map": False,
        "cache_declined": None,
    }


def test_arrays_without_tensorflow_go_to_keras_on_any_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(adapters, "tensorflow_available", lambda: False)
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    x, _ = arrays()
    adapter = adapters.get_data_adapter((x,), batch_size=None, seed=None)
    assert isinstance(adapter, adapters.ArrayAdapter)
    assert adapter.batch_size == adapters.DEFAULT_BATCH_SIZE and adapter.fit_args["y"] is None
    named = adapters.get_data_adapter(({"a": x, "b": x}, arrays()[1]), 10, None)
    assert named.rows == 100 and set(named.fit_args["x"]) == {"a", "b"}


def test_several_processes_on_jax_read_arrays_through_tf_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keras shards only a tf.data dataset over JAX's processes."""
    requires("tensorflow")
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    adapter = adapters.get_data_adapter(arrays(), 32, 1, several_processes=True)
    assert isinstance(adapter, adapters.ArrayDatasetAdapter)
    monkeypatch.setattr(adapters, "tensorflow_available", lambda: False)
    with pytest.raises(BadDataError, match="needs TensorFlow"):
        adapters.get_data_adapter(arrays(), 32, 1, several_processes=True)


def test_a_dataset_gets_the_dataset_adapter_and_other_data_keras_own() -> None:
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.Dataset.from_tensor_slices(arrays(8)).batch(4)
    adapter = adapters.get_data_adapter(dataset, None, None)
    assert type(adapter) is adapters.TFDatasetAdapter and adapter.batch_size == 4
    generator = (batch for batch in [arrays(4)])
    assert type(adapters.get_data_adapter(generator, None, None)) is adapters.KerasDataAdapter


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ((np.zeros((0, 4)), np.zeros(0)), "has no rows"),
        ("train.csv", "data cannot be str"),
        ({"x": 1}, "data cannot be dict"),
        (None, "data cannot be NoneType"),
    ],
)
def test_data_nothing_reads_is_bad_data(data: object, message: str) -> None:
    with pytest.raises(BadDataError, match=message):
        adapters.get_data_adapter(data, None, None)


def test_the_adapter_follows_the_plan_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters, "tensorflow_available", lambda: False)
    plan = NotingPlan()
    adapters.get_data_adapter(arrays(), 32, None, plan=plan)
    assert plan.checked == [(32, 100)]


def test_training_reads_rows_on_the_device_only_where_they_go_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``on_device``: the adapter chosen, or a ResidentAdapter of its rows, with why."""
    monkeypatch.setattr(adapters, "tensorflow_available", lambda: False)
    source = adapters.get_data_adapter(arrays(), 32, 1)
    model = SimpleNamespace(jit_compile=True)
    streamed = adapters.on_device(source, model, None, None, "tensorflow")
    assert streamed is source and not source.decision.resident
    assert "on tensorflow" in source.decision.why
    generator = adapters.get_data_adapter((batch for batch in []), None, None)
    assert adapters.on_device(generator, model, None, None, "jax") is generator
    assert generator.decision.why.startswith("this data makes its batches on the host")


def compiled_model() -> object:
    keras = config.keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    return model


def test_arrays_that_fit_on_jax_train_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    requires("jax")
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    source = adapters.get_data_adapter(arrays(), 32, 1)
    on_device = adapters.on_device(source, compiled_model(), None, None, "jax")
    assert isinstance(on_device, adapters.ResidentAdapter) and on_device.decision.resident
    assert on_device.device_rows.shuffle and on_device.steps_per_epoch == 4


def test_a_gpu_dataset_of_arrays_batched_as_they_are_trains_on_the_device() -> None:
    requires("jax")
    requires("tensorflow")
    made = pipeline.from_arrays(*arrays(), batch_size=32, shuffle=False, drop_remainder=True)
    source = adapters.get_data_adapter(made["dataset"], None, None)
    on_device = adapters.on_device(source, compiled_model(), None, None, "jax")
    assert isinstance(on_device, adapters.ResidentAdapter)
    rows = on_device.device_rows
    assert not rows.shuffle and (rows.steps, rows.partial) == (3, 0)
