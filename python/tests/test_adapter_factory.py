"""Which adapter gpu_fit()'s data gets in its final form (``adapters.get_data_adapter``), per
backend and what the loop decided (``adapters.FeedContext``), and what the one feed adds
(``gpukeras.data.feed``): each adapter's own contract is tested in its test_adapter_<name>.py."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import NotingPlan, requires
from gpukeras.core.errors import BadDataError
from gpukeras.core.runtime import config
from gpukeras.data import adapters, pipeline
from gpukeras.data.adapters import given
from gpukeras.data.feed import feed


def adapter_for(
    data: object,
    batch_size: int | None,
    seed: int | None,
    backend: str = "tensorflow",
    **decided: object,
) -> adapters.DataAdapter:
    """The adapter for ``data`` with no validation data, as a loop that decided ``decided``."""
    context = adapters.FeedContext(backend, batch_size=batch_size, seed=seed, **decided)  # type: ignore[arg-type]
    return adapters.get_data_adapter(given(data), given(None, training=False), context)


def arrays(rows: int = 100) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((rows, 4)).astype("float32"), rng.integers(0, 2, rows)


def test_arrays_on_jax_go_to_keras_as_numpy_even_with_tensorflow_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On JAX, Keras' own NumPy batches beat a tf.data pipeline for data in memory."""
    requires("tensorflow")
    assert adapters.tensorflow_available()
    adapter = adapter_for(arrays(), 32, 1, "jax")
    assert isinstance(adapter, adapters.ArrayAdapter)
    assert not adapter.decision.resident and "without XLA" in adapter.decision.why
    assert adapter.steps_per_epoch == 4 and adapter.rows == 100


def test_arrays_on_tensorflow_become_a_seeded_tf_data_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requires("tensorflow")
    adapter = adapter_for(arrays(), 32, 1)
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
    x, _ = arrays()
    adapter = adapter_for((x,), None, None)
    assert isinstance(adapter, adapters.ArrayAdapter)
    assert adapter.batch_size == adapters.DEFAULT_BATCH_SIZE and adapter.fit_args["y"] is None
    named = adapter_for(({"a": x, "b": x}, arrays()[1]), 10, None)
    assert named.rows == 100 and set(named.fit_args["x"]) == {"a", "b"}


def test_several_processes_on_jax_read_arrays_through_tf_data(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Keras shards only a tf.data dataset over JAX's processes."""
    requires("tensorflow")
    requires("jax")
    adapter = adapter_for(arrays(), 32, 1, "jax", several_processes=True, jit_compile=True)
    assert isinstance(adapter, adapters.ArrayDatasetAdapter)
    assert "several processes" in adapter.decision.why
    monkeypatch.setattr(adapters, "tensorflow_available", lambda: False)
    with pytest.raises(BadDataError, match="needs TensorFlow"):
        adapter_for(arrays(), 32, 1, "jax", several_processes=True)


def test_the_multi_worker_loop_reads_tf_data_alone_validation_too() -> None:
    """``tf_data_only``: arrays become a pipeline, validation arrays one in order, and data
    that is neither arrays nor a dataset is refused; nothing goes on the device."""
    requires("tensorflow")
    context = adapters.FeedContext("tensorflow", batch_size=25, seed=1, tf_data_only=True)
    x, y = arrays()
    adapter = adapters.get_data_adapter(given((x, y)), given((x[:30], y[:30])), context)
    assert isinstance(adapter, adapters.ArrayDatasetAdapter)
    validation = adapter.validation["validation_data"]
    assert adapters.is_tf_dataset(validation) and set(adapter.validation) == {"validation_data"}
    first = next(iter(validation))[0].numpy()
    np.testing.assert_array_equal(first, x[:25])  # in order, batches of the training's size
    with pytest.raises(BadDataError, match="Multi-worker training takes data"):
        adapter_for((batch for batch in []), 25, 1, tf_data_only=True)
    with pytest.raises(BadDataError, match="takes validation_data"):
        adapters.get_data_adapter(given((x, y)), given((b for b in []), False), context)


def test_a_dataset_gets_the_dataset_adapter_and_other_data_keras_own() -> None:
    tf = pytest.importorskip("tensorflow")
    dataset = tf.data.Dataset.from_tensor_slices(arrays(8)).batch(4)
    adapter = adapter_for(dataset, None, None)
    assert type(adapter) is adapters.TFDatasetAdapter and adapter.batch_size == 4
    generator = (batch for batch in [arrays(4)])
    assert type(adapter_for(generator, None, None)) is adapters.KerasDataAdapter


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
        adapter_for(data, None, None)


def test_the_adapter_follows_the_plan_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(adapters, "tensorflow_available", lambda: False)
    plan = NotingPlan()
    adapter_for(arrays(), 32, None, plan=plan)
    assert plan.checked == [(32, 100)]


def test_data_streams_where_it_cannot_go_on_the_device_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``decision``: whether the data trains on the device, and why not."""
    monkeypatch.setattr(adapters, "tensorflow_available", lambda: False)
    streamed = adapter_for(arrays(), 32, 1, "tensorflow", jit_compile=True)
    assert not streamed.decision.resident and "on tensorflow" in streamed.decision.why
    generator = adapter_for((batch for batch in []), None, None, "jax", jit_compile=True)
    assert generator.decision.why.startswith("this data makes its batches on the host")


def compiled_model() -> object:
    keras = config.keras()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", jit_compile=True)
    return model


def test_arrays_that_fit_on_jax_train_on_the_device() -> None:
    requires("jax")
    x, y = arrays()
    context = adapters.FeedContext("jax", batch_size=32, seed=1, jit_compile=True)
    on_device = adapters.get_data_adapter(given((x, y)), given((x[:10], y[:10])), context)
    assert isinstance(on_device, adapters.ResidentAdapter) and on_device.decision.resident
    assert on_device.device_rows.shuffle and on_device.steps_per_epoch == 4
    # the validation rows are on the device too: one token row per validation step
    assert on_device.validation["validation_data"][0].shape == (1, 1)


def test_a_gpu_dataset_of_arrays_batched_as_they_are_trains_on_the_device() -> None:
    requires("jax")
    requires("tensorflow")
    made = pipeline.from_arrays(*arrays(), batch_size=32, shuffle=False, drop_remainder=True)
    context = adapters.FeedContext("jax", jit_compile=True)
    on_device = adapters.get_data_adapter(given(made["dataset"]), given(None, False), context)
    assert isinstance(on_device, adapters.ResidentAdapter)
    rows = on_device.device_rows
    assert not rows.shuffle and (rows.steps, rows.partial) == (3, 0)


def test_the_feed_builds_the_model_and_describes_the_data_for_the_report() -> None:
    """``feed``: the adapter in its final form, the model built from it (Keras need not peek
    at a batch), the labels checked, and the data described once for the report."""
    requires("tensorflow")
    model = compiled_model()
    x, y = arrays()
    context = adapters.FeedContext("tensorflow", batch_size=32, seed=1, class_weight={0: 2.0})
    fed = feed(model, (x, y.astype("float32")), (x[:10], y[:10]), context)
    assert model.built and model.optimizer.built
    assert fed.validation["validation_batch_size"] == 32 and fed.warnings == []
    assert fed.description["weights"]["training"] == "class_weight"
    assert fed.description["weights"]["validation"] == "none"
    assert fed.description["data_info"] is None  # arrays: R describes them itself
    assert fed.description["data_path"]["resident"] is False
    keras = config.keras()
    binary = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1, activation="sigmoid")])
    binary.compile(optimizer="sgd", loss="binary_crossentropy")
    labelled = feed(binary, (x, y * 3), None, adapters.FeedContext("tensorflow", batch_size=32))
    assert [w["class"] for w in labelled.warnings] == ["labels"]
    assert binary.built
