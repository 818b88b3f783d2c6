"""Names for the framework objects the core passes around but cannot type.

Keras ships no type information (no ``py.typed``) and TensorFlow's is partial,
so to a type checker their objects are ``Any``. Naming them says what a
parameter holds, and lets the checker verify the core's own logic instead of
being silenced line by line. Values that come from the user (R) and are
checked before use stay ``object``: the check is what narrows them.
"""

from __future__ import annotations

from typing import Any

Keras = Any  # the keras module, as an argument
Model = Any  # a keras.Model
Layer = Any  # a keras.Layer
Tensor = Any  # a backend tensor, a KerasTensor or a Keras variable
Dataset = Any  # a tf.data.Dataset
Strategy = Any  # a tf.distribute.Strategy or a keras.distribution.Distribution
Callback = Any  # a keras.callbacks.Callback
Optimizer = Any  # a keras.optimizers.Optimizer
Device = Any  # a JAX device

# Plain data on its way to R (numbers, strings, lists, nested records), built
# and read by key: the values' types are the documented fields', not checked.
Record = dict[str, Any]

# The key R data sent with a verb, for the core to copy in that same call, comes under
# (``gpukeras.data.array_source.received``).
HANDOVER = "gpukeras_handover"
