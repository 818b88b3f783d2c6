"""Every use of a private Keras or JAX attribute, in one place.

Public APIs do not answer these questions; when a release moves one of these
attributes, this module is the one to change.
"""

from __future__ import annotations

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
