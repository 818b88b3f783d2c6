"""keras_api: the keras module as gpu_keras() gives it to R, with R's whole numbers as ints.

reticulate passes R's 64 as 64.0; these calls pass floats as it does, to real Keras.
"""

from __future__ import annotations

import pytest

from gpukeras.core import keras_api
from gpukeras.core.runtime import config


@pytest.fixture(scope="module")
def keras() -> keras_api.KerasNamespace:
    return keras_api.keras_api()


def test_whole_number_floats_become_ints_where_keras_wants_them(keras) -> None:
    model = keras.Sequential(
        [keras.Input(shape=8.0), keras.layers.Dense(64.0), keras.layers.Dense(1.0)]
    )
    assert model.input_shape == (None, 8)
    assert [layer.units for layer in model.layers] == [64, 1]
    conv = keras.layers.Conv2D(16.0, [3.0, 3.0], strides=2.0)
    assert (conv.filters, conv.kernel_size, conv.strides) == (16, (3, 3), (2, 2))
    assert keras.layers.Reshape(target_shape=[2.0, 4.0]).target_shape == (2, 4)
    assert keras.callbacks.EarlyStopping(patience=3.0).patience == 3
    assert isinstance(keras.callbacks.EarlyStopping(patience=3.0).patience, int)


def test_an_int_shape_is_a_shape_too(keras) -> None:
    # R's 3L reaches Python as the int 3, which Keras refuses as a shape ("Cannot convert")
    assert keras.Input(shape=3).shape == (None, 3)
    assert keras.layers.Reshape(target_shape=[2, 4]).target_shape == (2, 4)
    assert keras.Input(batch_shape=[None, 5]).shape == (None, 5)


def test_floats_keras_declares_and_fractions_stay_as_they_are(keras) -> None:
    assert keras.layers.Dropout(0.5).rate == 0.5
    assert isinstance(keras.optimizers.SGD(momentum=1.0).momentum, float)
    assert "float" in str(keras.ops.full((2,), 1.0).dtype)  # a value, not a count
    with pytest.raises(ValueError, match="positive integer"):
        keras.layers.Dense(2.5)


def test_what_is_not_called_is_keras_own(keras) -> None:
    real = config.keras()
    assert keras.layers.Layer is real.layers.Layer  # to subclass, from R too
    assert keras.Model is real.Model
    assert keras.__version__ == real.__version__
    assert "Dense" in dir(keras.layers)

    class Wider(keras.layers.Dense):  # Python subclassing reaches the class itself
        pass

    assert Wider.__mro__[1] is real.layers.Dense
    assert keras.layers.Dense.from_config(real.layers.Dense(3).get_config()).units == 3
