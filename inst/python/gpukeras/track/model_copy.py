"""A model's copy taken as a fit ends, for its tracked run: written on the sending thread.

``ModelCopy`` takes what the model is at once, on the training thread, and cheaply
(its config, and its variables' and optimizer's values copied to the host: a few
milliseconds); ``folder`` then writes it as gpu_save() does, on the thread that sends
the run (``records.later_op``), from a model rebuilt from that copy on the CPU.
The live model is not read again: the run's model is the fit's, whatever trains it
afterwards.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from gpukeras.core import compat
from gpukeras.core.handles import Model
from gpukeras.core.runtime import config
from gpukeras.serve import scoring
from gpukeras.train import pretrained


class ModelCopy:
    """A model as it is now, taken cheaply on the training thread (its config and its
    variables' and optimizer's values copied to the host), and written later on another
    thread (``folder``) from a model rebuilt from them on the CPU: the live model is not
    read again, so the run's model is the fit's, whatever trains it afterwards."""

    def __init__(self, model: Model):
        keras = config.keras()
        self.config = keras.saving.serialize_keras_object(model)
        if compat.compile_config_skipped(model):
            # Keras would skip it when rebuilding anyway, with a warning on the sending
            # thread that the call the session runs meanwhile records as its own
            self.config.pop("compile_config", None)
        # classes deserializing may not find by name (defined in R, or in __main__)
        self.classes = {
            keras.saving.get_registered_name(type(layer)): type(layer)
            for layer in compat.flatten_layers(model, include_self=True)
        }
        self.preset = pretrained.preset_record(model)  # a KerasHub preset's, with its LoRA
        self.values = _host_copies(keras, model.variables)
        optimizer = getattr(model, "optimizer", None)
        self.optimizer_values = (
            _host_copies(keras, optimizer.variables)
            if optimizer is not None and getattr(optimizer, "built", False)
            else None
        )

    def rebuilt(self) -> Model:
        """The model again, on the CPU, with the values taken."""
        keras = config.keras()
        with keras.device("cpu:0"):
            model = keras.saving.deserialize_keras_object(self.config, custom_objects=self.classes)
            pretrained.restore_preset(model, self.preset)
            _assign(model.variables, self.values)
            if self.optimizer_values is not None:
                if not model.optimizer.built:  # compiled from the config, a built model's is
                    model.optimizer.build(model.trainable_variables)
                _assign(model.optimizer.variables, self.optimizer_values)
        return model

    def folder(self, encoding: object) -> str:
        """A temporary folder with the model as gpu_save() writes it (``model/model.keras``
        and its encoding beside it) and ``model_summary.txt``; the sender removes it once
        sent."""
        model = self.rebuilt()
        folder = tempfile.mkdtemp(prefix="gpukeras-run-")
        os.mkdir(os.path.join(folder, "model"))
        scoring.save_model(model, os.path.join(folder, "model", "model.keras"), encoding)
        lines: list[str] = []
        with contextlib.suppress(Exception):
            model.summary(print_fn=lambda line, *args, **kwargs: lines.append(line))
        Path(folder, "model_summary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        return folder


def _host_copies(keras: Any, variables: list[Any]) -> list[Any]:
    import numpy as np

    return [np.array(keras.ops.convert_to_numpy(v), copy=True) for v in variables]


def _assign(variables: list[Any], values: list[Any]) -> None:
    if len(variables) != len(values):
        raise ValueError(f"the rebuilt model has {len(variables)} variables, not {len(values)}")
    for variable, value in zip(variables, values):
        variable.assign(value)
