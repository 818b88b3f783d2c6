"""On JAX: gpu_fit() of a CNN whose first layers are Keras' geometric augmentation layers
(run by test_fit.py as ``after`` code, see ``scripts/core_child.py``)."""

import keras
import numpy as np

from __main__ import bridge, readback
from gpukeras.core import compat

rng = np.random.default_rng(0)
x = rng.random((96, 12, 12, 3), dtype=np.float32)
y = rng.integers(0, 3, 96).astype("int32")


def cnn(*augment: keras.layers.Layer) -> keras.Model:
    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [keras.Input((12, 12, 3)), *augment, keras.layers.Conv2D(4, 3),
         keras.layers.GlobalAveragePooling2D(), keras.layers.Dense(3)]
    )  # fmt: skip
    model.compile(
        optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


geometric = cnn(
    keras.layers.RandomFlip("horizontal", seed=1),
    keras.layers.RandomRotation(0.1, seed=2),
    keras.layers.RandomZoom(0.1, seed=3),
    keras.layers.RandomTranslation(0.1, 0.1, seed=4),
)
rotation = geometric.layers[1]


def seed_state() -> list[np.ndarray]:  # the layer's seed generator's state
    return [np.asarray(v.value).copy() for v in rotation.non_trainable_variables]


seed_before = seed_state()
assert seed_before
# Several steps per dispatch, given: "auto" times a step, and on a busy machine one step
# can fill a dispatch's time alone (k = 1), which says nothing of the augmentation.
answer = bridge.call(
    "fit",
    {
        "model": geometric, "data": (x, y), "epochs": 2, "batch_size": 16, "verbose": 0,
        "steps_per_execution": 3,
    },
)  # fmt: skip
readback["geometric"] = answer
# the rotation drew new angles in the compiled steps: its seed moved on
readback["seed_moved"] = any((a != b).any() for a, b in zip(seed_state(), seed_before))
cropped = cnn(keras.layers.RandomCrop(10, 10, seed=5))
readback["cropped"] = bridge.call(
    "fit", {"model": cropped, "data": (x, y), "epochs": 1, "batch_size": 16, "verbose": 0}
)
readback["blocks"] = [layer.name for layer in cropped.layers if compat.blocks_xla(layer)]
