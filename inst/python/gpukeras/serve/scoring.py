"""Scoring new data: batched predict and evaluate, and a model saved with its encoding.

R encodes new data exactly as the training data was (the encoding R recorded:
factor levels matched by name, column order, NA rule) and hands the arrays
over as gpu_dataset() does; here they become one float32 copy each
(``array_source.handover``) and Keras runs the model on them in batches, on
the device the model lives on. The encoding (``data.encoding``'s plain form) is
written as JSON beside the ``.keras`` file and read back in full
(``encoding.normalized``), so that a later R session scores the same way; a model
whose input or output width is not the encoding's is refused before training
(``check_widths``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gpukeras.core import arguments, compat, files
from gpukeras.core.errors import BadArgumentError, BadDataError, BadModelError, DataFieldsError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import adapters, failures, indicators
from gpukeras.data.array_source import HostArrays, handover
from gpukeras.data.bad_rows import Checks
from gpukeras.data.encoding import (
    R_NA_REAL,
    column_rule,
    describe_columns,
    frame_width,
    frames,
    normalized,
    part_columns,
    plain_encoding,
    quoted,
    strings,
)
from gpukeras.serve import encoding_file
from gpukeras.serve.model_io import describe
from gpukeras.train import pretrained

# What the JSON beside a saved model says it is, so that a stray JSON file is not read as one.
ENCODING_FORMAT = "gpukeras-encoding"
ENCODING_VERSION = 2  # 2: factor columns one-hot or codes (1: codes, always)


def _inputs(x: object, y: object | None, y_dtype: str | None, check_missing: Checks) -> HostArrays:
    """R arrays as Keras reads them (one float32 copy each, with R's na = "drop" of the rows
    without NA); a dataset as it is."""
    if adapters.is_tf_dataset(x):
        return HostArrays(x, None)
    return handover(x, y, y_dtype, check_missing, codes=True)


def _refused(error: Exception, what: str) -> Exception:
    refused = failures.refused_data(error, what)
    return error if refused is None else refused


def _check_inputs(model: Model, features: object, what: str) -> None:
    """Run the model on the first row of arrays (of a dataset's first batch, on JAX)
    first, so that data it refuses is refused before Keras' loop: on JAX, Keras'
    predict() and evaluate() take the weights out of the model's variables for the
    loop and put them back at its end, and a loop that fails in its first step never
    puts them back (the model is then unusable)."""
    if adapters.is_tf_dataset(features):
        if config.backend != "jax":
            return  # TensorFlow's loop keeps the weights: no batch read twice
        element = next(iter(features.take(1)), None)
        if element is None:
            return
        batch = element[0] if isinstance(element, tuple) else element
        features = (
            {name: np.asarray(part) for name, part in batch.items()}
            if isinstance(batch, dict)
            else np.asarray(batch)
        )
    first = indicators.rows_of(features, slice(0, 1))
    try:
        model(first, training=False)
    except Exception as error:
        raise _refused(error, what) from error


def _scoring_inputs(
    model: Model,
    x: object,
    y: object | None,
    y_dtype: str | None,
    check_missing: Checks,
    batch_size: object,
    what: str,
    evaluating: bool = False,
) -> tuple[Any, HostArrays, Record]:
    """predict's and evaluate's checks and hand-over, in their one order: the model (for
    ``evaluating``, compiled), the batch size, the data copied once (for ``evaluating``,
    with labels) and checked against the model's inputs (the error says the model cannot
    ``what``). Returns the features, the data handed over (``HostArrays``: its labels, and
    the rows R's na = "drop" kept) and Keras' keyword arguments (``batch_size`` for arrays;
    a dataset has its own batches)."""
    keras = config.keras()
    arguments.check_keras_model(keras, model)
    if evaluating and not getattr(model, "compiled", False):
        raise BadModelError(
            "The model is not compiled, so it has no loss or metrics to evaluate: compile it "
            'first, e.g. model$compile(loss = "sparse_categorical_crossentropy", metrics = '
            'list("accuracy")).'
        )
    batch = arguments.count("batch_size", batch_size)
    held = _inputs(x, y, y_dtype, check_missing)
    features = held.x
    dataset = adapters.is_tf_dataset(features)
    if evaluating and held.y is None and not dataset:
        raise BadDataError("evaluate() needs labels: give `y` with the new data.")
    _check_inputs(model, features, what)
    if evaluating:  # Keras' evaluate() reads every row's columns in one call
        features = indicators.host_form(features)
    kwargs: Record = {} if dataset else {"batch_size": batch}
    return features, held, kwargs


def _predicted_in_blocks(model: Model, features: object, batch: int, verbose: int) -> object:
    """predict() of features holding a data.frame kept as its codes (``indicators.FrameCodes``):
    the indicator columns made a block of rows at a time (``indicators.BLOCK_ROWS``, rounded
    to whole batches), each block one predict() call, never the matrix of every row at once
    (issue #76)."""
    count = _rows(features)
    step = max(batch, indicators.BLOCK_ROWS // batch * batch)
    parts = [
        model.predict(
            indicators.rows_of(features, slice(at, at + step)), batch_size=batch, verbose=verbose
        )
        for at in range(0, count, step)
    ]
    return config.keras().tree.map_structure(lambda *blocks: np.concatenate(blocks), *parts)


def predict(
    model: Model,
    x: object,
    y: object | None = None,
    y_dtype: str | None = None,
    check_missing: Checks = False,
    batch_size: object = 32,
    verbose: int = 0,
) -> object:
    """The model's outputs for ``x``, computed in batches of ``batch_size``.

    Args:
        model: a built Keras 3 model.
        x: R data as ``handover`` takes it (an array or a dict of them), or a
            tf.data dataset (its batches as they are; labels in it are ignored).
        y, y_dtype: not used (R hands data over the same way for every verb).
        check_missing: NA is an error too, named as R names it (``bad_rows.named``).
        batch_size: rows per batch for arrays.
        verbose: Keras' progress display (0 silent).

    Returns:
        A float array with a row per row of ``x``, or a list of them for a
        model with several outputs; a KerasHub classifier's logits become each
        class's probability (``pretrained.probabilities``). Rows R's na = "drop" left
        out are R's NA (doubles then: ``padded``).
    """
    features, held, kwargs = _scoring_inputs(
        model, x, None, None, check_missing, batch_size, "predict from this data"
    )
    try:
        if "batch_size" in kwargs and not verbose and _rows(features) <= kwargs["batch_size"]:
            # One batch: Keras' predict() spends 25-60 ms setting up its epoch iterator
            # and callbacks around the one step that predict_on_batch() runs in ~1 ms
            # (a 1-row request to gpu_serve(), measured on 2 CPU cores).
            predicted = model.predict_on_batch(indicators.host_form(features))
        elif indicators.is_coded(features):
            predicted = _predicted_in_blocks(model, features, kwargs["batch_size"], int(verbose))
        else:
            predicted = model.predict(features, verbose=int(verbose), **kwargs)
    except Exception as error:
        raise _refused(error, "predict from this data") from error
    predicted = outputs(pretrained.probabilities(model, predicted))
    if held.kept is None:
        return predicted
    if isinstance(predicted, list):
        return [padded(part, held.kept, held.rows) for part in predicted]
    return padded(predicted, held.kept, held.rows)


def padded(output: object, kept: np.ndarray, rows: int) -> np.ndarray:
    """The ``output`` (an array) of the ``kept`` rows (0-based) of ``rows`` as a double array
    of every row, R's NA (the NaN R reads as NA, not NaN) in the rows left out."""
    values = np.asarray(output)
    full = np.full((rows, *values.shape[1:]), R_NA_REAL, dtype=np.float64)
    full[kept] = values
    return full


def outputs(predicted: object) -> object:
    """Keras' predictions as arrays: one, or a list of them for a model with several outputs
    (the bridge makes low-precision ones float32 for R)."""
    if isinstance(predicted, dict):
        return [np.asarray(part) for part in predicted.values()]
    if isinstance(predicted, (list, tuple)):
        return [np.asarray(part) for part in predicted]
    return np.asarray(predicted)


def score(
    model: Model, x: object, y: object, sample_weight: object = None, batch_size: object = 32
) -> Record:
    """A fit's held-out rows scored (gpu_cv()'s folds, gpu_search()'s trials): ``metrics``,
    the compiled loss and metrics as Keras' ``evaluate()`` names them, the loss first, and
    ``predictions`` as ``predict`` gives them. ``x``, ``y`` and ``sample_weight`` are arrays
    as the fit trained on them."""
    batch = arguments.count("batch_size", batch_size)
    scores = model.evaluate(
        x, y, sample_weight=sample_weight, batch_size=batch, verbose=0, return_dict=True
    )
    names = sorted(scores, key=lambda name: name != "loss")  # the loss first, as the history
    predicted = model.predict(x, batch_size=batch, verbose=0)
    return {
        "metrics": {str(name): float(scores[name]) for name in names},
        "predictions": outputs(predicted),
    }


def _rows(features: object) -> int:
    """The rows of an array, or of the first array of a dict or list of them."""
    if isinstance(features, dict):
        features = next(iter(features.values()))
    elif isinstance(features, (list, tuple)):
        features = features[0]
    return len(features)  # type: ignore[arg-type]


def evaluate(
    model: Model,
    x: object,
    y: object | None = None,
    y_dtype: str | None = None,
    check_missing: Checks = False,
    batch_size: object = 32,
    verbose: int = 0,
) -> Record:
    """The compiled loss and metrics of ``model`` on ``x`` and ``y``, in batches.

    Returns:
        ``{name: value}`` as Keras' ``evaluate(return_dict=True)`` gives them.
    """
    features, held, kwargs = _scoring_inputs(
        model, x, y, y_dtype, check_missing, batch_size, "be evaluated on this data", True
    )
    try:
        scores = model.evaluate(features, held.y, verbose=int(verbose), return_dict=True, **kwargs)
    except Exception as error:
        raise _refused(error, "be evaluated on this data") from error
    return {str(name): float(value) for name, value in scores.items()}


def encoding_path(path: str) -> Path:
    """Where the encoding of a model saved at ``name.keras`` goes: ``name.gpukeras.json``."""
    model = Path(path)
    return model.with_name(model.name[: -len(".keras")] + ".gpukeras.json")


def _check_path(path: object) -> Path:
    if not isinstance(path, str) or not path.endswith(".keras"):
        raise BadArgumentError(
            f"`path` must be a file name ending in .keras, not {path!r} "
            "(Keras 3 saves whole models in its .keras format)."
        )
    return Path(path)


def save_model(
    model: Model, path: object, encoding: object, overwrite: bool = False, lora: str = "keep"
) -> Record:
    """Save ``model`` to ``path`` (.keras) and ``encoding`` as JSON beside it.

    A KerasHub preset's model keeps its preset and LoRA in the file, with ``lora``'s
    adapters kept apart or merged into the weights (``pretrained.save_model``).

    Nothing is written unless both files may be: an existing one is refused
    unless ``overwrite``. Each file is written under a temporary name in the
    same folder and then renamed, so a failed save leaves no half-written file.

    Returns:
        ``model`` and ``encoding``: the two paths written.
    """
    keras = config.keras()
    arguments.check_keras_model(keras, model)
    target = _check_path(path)
    beside = encoding_path(str(target))
    if not target.parent.is_dir():
        raise BadArgumentError(f"`path`: the folder {str(target.parent)!r} does not exist.")
    existing = [str(file) for file in (target, beside) if os.path.lexists(file)]
    if existing and not overwrite:
        raise BadArgumentError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: "
            "give overwrite = TRUE to replace, or another path."
        )
    document = {"format": ENCODING_FORMAT, "version": ENCODING_VERSION, "model": target.name}
    document["encoding"] = plain_encoding(encoding) if isinstance(encoding, Mapping) else None
    text = json.dumps(document, indent=1)

    def model_then_encoding(temp: str) -> None:
        with compat.tensorflow_left_unloaded():  # on JAX, no TensorFlow for the save alone
            pretrained.save_model(model, temp, lora)
        files.write_atomic(beside, text, mode=None, prefix=".saving-", suffix=".json")

    # mode None: as Keras' own save leaves a file. The encoding is renamed into place only
    # once the model is saved, the model next.
    files.write_atomic(target, model_then_encoding, mode=None, prefix=".saving-", suffix=".keras")
    return {"model": str(target), "encoding": str(beside)}


def load_model(path: object) -> Record:
    """The model saved at ``path`` and the encoding beside it (None when there is none).

    Returns:
        ``model`` (compiled as it was saved), ``encoding`` (what R saved, in full:
        ``encoding.normalized``), ``encoding_file`` (its path, or None) and ``preset``
        (a KerasHub preset's model: its preset and LoRA in words, ``pretrained.preset_line``;
        None for another).
    """
    target = _check_path(path)
    if not target.is_file():
        raise BadArgumentError(f"`path`: there is no file {str(target)!r}.")
    keras = config.keras()
    try:
        model = pretrained.load_model(str(target)) or keras.saving.load_model(str(target))
    except Exception as error:
        raise BadModelError(
            f"{str(target)!r} could not be loaded as a Keras model: {error}"
        ) from error
    beside = encoding_path(str(target))
    preset = pretrained.preset_line(model)
    if not beside.is_file():
        return {"model": model, "encoding": None, "encoding_file": None, "preset": preset}
    try:
        document = json.loads(beside.read_text(encoding="utf-8"))
    except ValueError as error:  # UnicodeDecodeError too
        raise BadModelError(
            f"The encoding file {str(beside)!r} is not valid JSON ({error}): save the model "
            "again with gpu_save(), or remove that file to load the model without an encoding."
        ) from error
    if not isinstance(document, dict) or document.get("format") != ENCODING_FORMAT:
        raise BadModelError(
            f"{str(beside)!r} is not a gpukeras encoding file: remove or rename it to load "
            "the model without an encoding."
        )
    version = document.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BadModelError(f"The encoding file {str(beside)!r} has no valid version.")
    if version > ENCODING_VERSION:
        raise BadModelError(
            f"{str(beside)!r} was written by a newer gpukeras (encoding version "
            f"{version}): update gpukeras to read it."
        )
    encoding = document.get("encoding")
    if encoding is not None:
        encoding_file.check(encoding, str(beside))
        encoding_file.check_fits(encoding, model, str(beside))
        encoding = normalized(encoding)
    return {"model": model, "encoding": encoding, "encoding_file": str(beside), "preset": preset}


# A model of one unit for two levels (the advice's alternative).
SIGMOID = ' (or one unit, activation = "sigmoid")'


def check_widths(
    model: Any, encoding: Mapping[str, Any] | None = None, levels: object = None
) -> None:
    """Raises DataFieldsError (gpukeras_error_bad_data), before training, when the model's
    input of rank 2 takes another number of columns than a data.frame input of ``encoding``
    gives (matched by name when there are several), or when its one output of rank 2 has
    another width than the labels' ``levels`` (one unit for two levels is a sigmoid's; the
    advice for a narrower one names empty class folders for an image folder's ``encoding``,
    else factor levels no row has). Where a width is not known (a subclassed model not
    built), nothing is checked; nor without a data.frame input or two levels."""
    if encoding is not None:
        encoding = plain_encoding(encoding)
    classes = strings(levels)
    parts = frames(encoding) if encoding is not None else []
    if not parts and len(classes) < 2:
        return
    io = describe(model)
    if encoding is not None and parts:
        inputs = [put for put in io["inputs"] if len(put["shape"]) == 2]
        several = bool(encoding.get("several"))
        widths = {put["name"]: put["shape"][1] for put in inputs}
        if not several:
            widths = {"x": inputs[0]["shape"][1]} if len(inputs) == 1 else {}
        for name, part in parts:
            wanted, given = widths.get(name), frame_width(part["columns"])
            if wanted is None or wanted == given:
                continue
            one_hot = any(column_rule(column) == "one_hot" for _, column in part_columns(part))
            raise DataFieldsError(
                f"The model's input{f' `{name}`' if several else ''} takes rows of {wanted} "
                f"column(s), but `{name}` gives {describe_columns(part)}.",
                [f"Build the model for them: keras$Input(shape = list({given}L))."]
                + [
                    "Or keep one integer code per factor (for an Embedding layer): "
                    'gpu_dataset(x, y, factors = "codes").'
                ]
                * one_hot,
                ["gpukeras_error_bad_data"],
            )
    outputs = io["outputs"]
    if len(classes) < 2 or len(outputs) != 1 or len(outputs[0]["shape"]) != 2:
        return
    width, n = outputs[0]["shape"][1], len(classes)
    if width is None or width == n or (width == 1 and n == 2):
        return
    raise DataFieldsError(
        f"The model's output has {width} unit(s), but the labels `y` have {n} levels: "
        f"{quoted(classes)}.",
        [
            "Build `model`'s output with one unit per level: keras$layers$Dense("
            f'{n}L, activation = "softmax"){SIGMOID if n == 2 else ""}.'
        ]
        + [
            "A class folder without images counts too: remove it from the folder."
            if encoding is not None and encoding.get("images")
            else "A level no row has counts too: drop such levels first, y <- droplevels(y)."
        ]
        * (width < n),
        ["gpukeras_error_bad_data"],
    )
