"""messages: the frameworks' words the core classifies errors by, made by the installed
Keras and TensorFlow.

Each constant of ``core/messages.py`` that a framework's wording must contain is
checked on a real error here: when a release rewords one, a test here fails
rather than gpu_fit() quietly raising the wrong class.
"""

from __future__ import annotations

import numpy as np
import pytest

from conftest import in_process_backend
from gpukeras import bridge
from gpukeras.core import messages
from gpukeras.core.runtime import config
from gpukeras.data import adapters, sources


def model() -> object:
    keras = config.keras()
    built = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    built.compile(optimizer="sgd", loss="mse")
    return built


def test_keras_input_check_says_incompatible_with_the_layer_at_any_step() -> None:
    """Validation data meets the model after training steps: the wording alone tells."""
    with pytest.raises(ValueError) as raised:
        model()(np.zeros((2, 3), np.float32))  # type: ignore[operator]
    assert messages.INCOMPATIBLE_INPUT in str(raised.value)
    assert messages.refused_by_model(raised.value, first_step=False)
    assert messages.refused_by_model(raised.value, first_step=True)


def test_a_batch_tensorflow_cannot_read_names_iterator_get_next_and_is_not_refused() -> None:
    """A first batch that cannot be made fails in IteratorGetNext (Keras' TensorFlow train
    function reads it in the graph): the data's fault, not the model refusing it. Through
    gpu_fit() it is bad data that names the batch."""
    in_process_backend("tensorflow")
    if not adapters.tensorflow_available():
        pytest.skip("TensorFlow is not installed: no tf.data here")
    tf = sources.tensorflow()

    def unreadable() -> object:
        rows = tf.data.Dataset.from_tensor_slices(["not a number", "1 2 3 4"])
        parsed = rows.map(lambda line: tf.strings.to_number(tf.strings.split(line)))
        return parsed.map(lambda x: (tf.reshape(x, (4,)), x[:1])).batch(1)

    with pytest.raises(tf.errors.OpError) as raised:
        model().fit(unreadable(), epochs=1, verbose=0, shuffle=False)  # type: ignore[attr-defined]
    assert messages.READING_A_BATCH in str(raised.value)
    assert not messages.refused_by_model(raised.value, first_step=True)
    answer = bridge.call("fit", {"model": model(), "data": unreadable(), "verbose": 0})
    assert answer["r_class"] == "gpukeras_error_bad_data", answer
    assert answer["message"].startswith("Training stopped at epoch 1, batch 1: a batch could")


def test_any_other_failure_of_the_first_step_is_the_model_refusing_its_data() -> None:
    error = RuntimeError("Matrix size-incompatible: In[0]: [2,3], In[1]: [4,1]")
    assert messages.refused_by_model(error, first_step=True)
    assert not messages.refused_by_model(error, first_step=False)
