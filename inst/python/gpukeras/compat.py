"""Every use of a private Keras, TensorFlow or JAX attribute that setup and fit need, in one place.

Public APIs do not answer these questions; when a release moves one of these
attributes, this module is the one to change.
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

from gpukeras.runtime import config


def global_dtype_policy_set() -> bool:
    """Whether Keras' global dtype policy has been set (or read) in this process.

    ``keras.config.dtype_policy()`` returns the float32 default both when no
    policy was set and when float32 was set on purpose; only Keras' global
    state tells them apart. Reading the policy (as building a layer does) also
    sets it, to the default (keras/src/dtype_policies/dtype_policy.py, 3.15).
    """
    config.keras()
    from keras.src.backend.common import global_state

    return global_state.get_global_attribute("dtype_policy") is not None


def jax_backends_started() -> bool:
    """Whether JAX has initialised its backends (after which XLA variables no longer act)."""
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())


def dataset_chain(dataset: object, limit: int = 50) -> list[object]:
    """A tf.data dataset and the datasets it was made from, outermost first.

    tf.data keeps each transformation's input in the private ``_input_dataset``
    (TensorFlow 2.21); a source or a merge of several datasets ends the chain.
    """
    chain, current = [], dataset
    while current is not None and len(chain) < limit:
        chain.append(current)
        current = getattr(current, "_input_dataset", None)
    return chain


def dataset_steps(dataset: object) -> list[str]:
    """The transformations of ``dataset``, outermost first: 'Prefetch', 'ParallelMap', ...

    Named by tf.data's private classes (``_PrefetchDataset``, ``CacheDataset``).
    """
    return [
        type(step).__name__.lstrip("_").removesuffix("Dataset") for step in dataset_chain(dataset)
    ]


def static_batch_size(dataset: object) -> int | None:
    """The batch size a batch step in the chain was given (private ``_batch_size``), if any."""
    for step in dataset_chain(dataset):
        size = getattr(step, "_batch_size", None)
        if size is not None:
            with contextlib.suppress(Exception):
                return int(size)
    return None


def jax_memory_fraction_variable() -> str:
    """The variable the installed jaxlib reads for the share of GPU memory it takes.

    jaxlib 0.7 reads XLA_CLIENT_MEM_FRACTION, still takes the older
    XLA_PYTHON_CLIENT_MEM_FRACTION alone (deprecated), and refuses to start
    with both set; older jaxlib reads only the older one. Which it reads is
    seen in its xla_client module, not in any API.
    """
    spec = importlib.util.find_spec("jaxlib.xla_client")
    with contextlib.suppress(OSError, TypeError):
        if "XLA_CLIENT_MEM_FRACTION" in Path(spec.origin).read_text():  # type: ignore[union-attr,arg-type]
            return "XLA_CLIENT_MEM_FRACTION"
    return "XLA_PYTHON_CLIENT_MEM_FRACTION"
