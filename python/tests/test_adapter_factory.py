"""Which adapter gpu_fit()'s data gets, per backend (the factory in ``data_adapters``)."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import requires
from gpukeras.data import adapters


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
    assert adapter.kind == "keras arrays"
    assert adapter.fit_args["batch_size"] == 32 and adapter.fit_args["shuffle"] is True
    assert adapter.steps_per_epoch == 4 and adapter.rows == 100
    assert adapter.reseed_numpy  # a seed makes Keras' NumPy shuffling repeatable
    # The advice knows the rows are in memory: nothing to cache, no map to speed up.
    assert adapter.gpu_dataset() == {"source": "arrays", "cache": False, "user_map": False}


def test_arrays_on_tensorflow_become_a_seeded_tf_data_pipeline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requires("tensorflow")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    adapter = adapters.get_data_adapter(arrays(), batch_size=32, seed=1)
    assert isinstance(adapter, adapters.ArrayDatasetAdapter)
    assert adapter.kind == "arrays" and adapter.steps_per_epoch == 4
    assert adapter.gpu_dataset() == {"source": "arrays", "cache": False, "user_map": False}
