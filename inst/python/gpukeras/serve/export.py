"""gpu_export(): a trained model for serving outside R, as a SavedModel or as ONNX.

"savedmodel": Keras' ExportArchive, with the training encoding built into the served
function (``serve/export_signature.py``): the signature ``serving_default`` takes each raw
column by name and returns named outputs; the model's own function on encoded rows
is the signature ``encoded``. What each name is, and the encoding, are written to
``assets.extra/gpukeras.json`` inside the SavedModel (TensorFlow Serving ignores that
folder's files).

"onnx": Keras' ONNX export of the model itself (tf2onnx on TensorFlow, jax2onnx on
JAX), which takes the encoded rows; the encoding goes beside it as the JSON gpu_save()
writes (``name.gpukeras.json``), with the ONNX graph's input and output names.

A KerasHub image classifier (gpu_image_backbone() of a preset) has its preprocessing outside
the model: its preprocessor's image converter (resizing, scale, offset), which its
``predict()`` applies in the input pipeline, and logits, which predict() makes
probabilities. ``serving_default`` does both, the converter as the TensorFlow ops
predict()'s pipeline runs (on either engine: inside JAX's jax2tf conversion it cannot run),
so it takes the images as predict() does; ``encoded`` and the ONNX graph are the model's
own function (converted images in, logits out), and the JSON's ``preprocessing`` says what
to do before and after it.

Nothing is written under ``path`` unless the whole export succeeded: it is built in a
temporary folder beside it and renamed into place.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gpukeras.core import arguments, compat
from gpukeras.core.errors import BadArgumentError, ExportError
from gpukeras.core.handles import Model, Record
from gpukeras.core.runtime import config
from gpukeras.data import encoding as frame_encoding
from gpukeras.data import source_files
from gpukeras.data.adapters.base import tensorflow_available
from gpukeras.gpu.precision import LOW_PRECISION
from gpukeras.serve import export_signature
from gpukeras.serve.scoring import ENCODING_FORMAT, ENCODING_VERSION
from gpukeras.train import model_copies, pretrained

FORMATS = ("savedmodel", "onnx")
SIGNATURE = "serving_default"
ENCODED_SIGNATURE = "encoded"
INSTALL_ONNX = 'install_gpukeras(extras = "onnx")'
# Where the SavedModel keeps what its names are and the encoding.
ABOUT_FILE = ("assets.extra", "gpukeras.json")


def export(
    model: Model,
    path: object,
    format: object = "savedmodel",
    encoding: object = None,
    unknown: object = "error",
    overwrite: bool = False,
) -> Record:
    """Export ``model`` (with the training ``encoding`` R recorded, or None) to ``path``.

    Args:
        model: a built Keras 3 model.
        path: the SavedModel's folder, or the .onnx file.
        format: "savedmodel" or "onnx".
        encoding: the plain form (as R sends it: ``encoding.plain_encoding``), or None
            (the model's inputs as they are).
        unknown: what a factor level training did not have becomes in the served
            function: "error", "zero" (one-hot columns) or "code" (columns of codes).
        overwrite: replace what is at ``path`` (and, for ONNX, the JSON beside it).

    Returns:
        ``path``, ``format``, ``inputs`` (the served inputs: name, input, column, type,
        dtype, shape, levels, rule, unknown), ``outputs`` (name, what, level or
        position), ``encoding_file`` (ONNX: the JSON beside it) and ``backend``.
    """
    keras = config.keras()
    arguments.check_keras_model(keras, model)
    if format not in FORMATS:
        raise BadArgumentError(f'`format` must be "savedmodel" or "onnx", not {format!r}.')
    if unknown not in frame_encoding.UNKNOWN_RULES:
        raise BadArgumentError(f'`unknown` must be "error", "zero" or "code", not {unknown!r}.')
    target = _check_path(path, str(format), overwrite)
    plain = frame_encoding.plain_encoding(encoding) if isinstance(encoding, dict) else None
    converter = pretrained.image_converter(model)
    row = _call_once(model, plain, converter)
    if format == "onnx":
        return _export_onnx(keras, model, target, plain, row)
    return _export_saved_model(keras, model, target, plain, str(unknown), converter)


def onnx_encoding_path(path: str) -> Path:
    """The JSON beside ``name.onnx``: ``name.gpukeras.json``, as gpu_save() names it."""
    model = Path(path)
    return model.with_name(model.name[: -len(".onnx")] + ".gpukeras.json")


def _check_path(path: object, format: str, overwrite: bool) -> Path:
    if not isinstance(path, str) or not path:
        raise BadArgumentError(f"`path` must be a file or folder name, not {path!r}.")
    target = Path(path)
    if format == "onnx" and not path.endswith(".onnx"):
        raise BadArgumentError(f'`path` must end in .onnx for format = "onnx", not {path!r}.')
    if not target.parent.is_dir():
        raise BadArgumentError(f"`path`: the folder {str(target.parent)!r} does not exist.")
    beside = [onnx_encoding_path(path)] if format == "onnx" else []
    existing = [str(file) for file in [target, *beside] if os.path.lexists(file)]
    if existing and not overwrite:
        raise BadArgumentError(
            f"{' and '.join(existing)} already exist{'s' if len(existing) == 1 else ''}: "
            "give overwrite = TRUE to replace, or another path."
        )
    return target


def _input_specs(model: Model, encoding: Record | None) -> dict[str, list[int | None]]:
    """Each model input's shape (rows first, as None) by name: the encoding's inputs
    (a data.frame's width, an array's shape), else the model's own."""
    if encoding is not None:
        return {name: [None, *_part_shape(part)] for name, part in frame_encoding.parts(encoding)}
    tensors = list(model.inputs)
    return {
        str(getattr(t, "name", f"input_{i}")).split(":")[0]: list(t.shape)
        for i, t in enumerate(tensors)
    }


def _model_specs(specs: dict[str, list[int | None]], converter: Any) -> dict[str, list[int | None]]:
    """The model's own input shapes: ``specs``, or where a KerasHub image ``converter`` resizes
    the images first (``pretrained.image_converter``), the shape it resizes them to."""
    if converter is None or converter.image_size is None:
        return specs
    resize = converter.resizing.compute_output_shape
    return {name: list(resize(tuple(shape))) for name, shape in specs.items()}


def _part_shape(part: Mapping[str, Any]) -> list[int]:
    if part["type"] == "array":
        return [int(d) for d in part["shape"]]
    return [frame_encoding.part_width(part)]


def _several(encoding: Record | None, specs: dict[str, Any]) -> bool:
    return bool(encoding["several"]) if encoding is not None else len(specs) > 1


def _call_once(model: Model, encoding: Record | None, converter: Any) -> Any:
    """Run the model on one row of zeros (through its image ``converter``, if any): Keras
    exports only a model that was called (one gpu_load() read back was not), and a model the
    data does not fit fails here. Returns the input the model ran on (the converted row),
    which fits it even where its own input shape leaves sizes open (a KerasHub image
    classifier's height and width)."""
    specs = _input_specs(model, encoding)
    zeros = {
        name: np.zeros([1, *[d or 1 for d in shape[1:]]], "float32")
        for name, shape in specs.items()
    }
    batch = zeros if _several(encoding, specs) else next(iter(zeros.values()))
    try:
        row = batch if converter is None else converter(batch)
        model(row, training=False)
    except Exception as error:
        raise BadArgumentError(
            f"The model cannot run on rows encoded as its training data was: {error}"
        ) from error
    return row


@contextlib.contextmanager
def _built_beside(target: Path) -> Iterator[Path]:
    """A temporary folder beside ``target`` to build in, removed at the end."""
    folder = Path(tempfile.mkdtemp(prefix=".exporting-", dir=str(target.parent)))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _move_into_place(built: Path, target: Path, work: Path) -> None:
    """Rename ``built`` to ``target``; what was there goes to ``work`` first (removed
    with it), and comes back if the rename fails. Not ``core.files.write_atomic``: a
    SavedModel is a folder, which ``os.replace`` cannot put over an existing one."""
    old = work / f"replaced-{target.name}"
    if target.exists() or target.is_symlink():
        os.rename(target, old)
    try:
        os.rename(built, target)
    except OSError:
        if old.exists():
            os.rename(old, target)
        raise


def _about(model: Model, encoding: Record | None, name: str, extra: Record) -> Record:
    """The JSON document gpu_save() writes beside a model, with what ``extra`` adds (and a
    KerasHub image classifier's ``preprocessing``)."""
    document = {"format": ENCODING_FORMAT, "version": ENCODING_VERSION, "model": name}
    document["encoding"] = encoding
    preprocessing = _preprocessing(model)
    if preprocessing is not None:
        document["preprocessing"] = preprocessing
    document.update(extra)
    return document


def _preprocessing(model: Model) -> Record | None:
    """What predict() does to a KerasHub image classifier's images before its model and to
    its outputs after, which the SavedModel's ``serving_default`` does too (not its
    ``encoded`` signature, nor an ONNX graph): its image converter's settings, and the
    ``activation`` that makes its logits probabilities. None for any other model."""
    converter = pretrained.image_converter(model)
    if converter is None:
        return None

    def plain(value: Any) -> Any:
        return None if value is None else np.asarray(value, dtype="float64").tolist()

    outputs = getattr(model, "outputs", None) or [()]
    return {
        "image_size": None if converter.image_size is None else list(converter.image_size),
        "scale": plain(converter.scale),
        "offset": plain(converter.offset),
        "crop_to_aspect_ratio": bool(converter.crop_to_aspect_ratio),
        "interpolation": str(converter.interpolation),
        "antialias": bool(converter.antialias),
        "activation": pretrained.probability_activation(model, tuple(outputs[0].shape)),
    }


def _tensorflow() -> Any:
    if not tensorflow_available():
        raise ExportError(
            "A SavedModel is written by TensorFlow, which is not installed in this Python "
            f"(the Keras backend is {config.backend}). Run install_gpukeras() in R, or "
            "`pip install tensorflow-cpu` in that environment."
        )
    return source_files.tensorflow()


def _export_saved_model(
    keras: Any, model: Model, target: Path, encoding: Record | None, unknown: str, converter: Any
) -> Record:
    """The SavedModel (see the module); a KerasHub image classifier's ``converter`` runs in
    the served function, as TensorFlow ops (predict() runs it so, in its input pipeline, on
    either engine), before the model's function, and its logits become probabilities."""
    tf = _tensorflow()
    specs = _input_specs(model, encoding)
    several = _several(encoding, specs)
    own = _model_specs(specs, converter)
    tensor_specs = {n: tf.TensorSpec(s, tf.float32, name=n) for n, s in own.items()}
    signature = [tensor_specs] if several else [next(iter(tensor_specs.values()))]
    if encoding is None:
        plain = {"inputs": {n: {"type": "array", "shape": s[1:]} for n, s in specs.items()}}
        served = export_signature.served_inputs(plain, unknown)
        levels = None
    else:
        served = export_signature.served_inputs(encoding, unknown)
        y = encoding.get("y") or {}
        levels = [str(level) for level in y.get("levels") or []] or None
    plan = export_signature.OutputPlan(levels, [str(n) for n in getattr(model, "output_names", [])])
    archive = keras.export.ExportArchive()
    try:
        model_fn = archive.track_and_add_endpoint(ENCODED_SIGNATURE, model, signature)

        @tf.function(input_signature=[export_signature.signature_specs(tf, served)])
        def serve(features: Any) -> Any:
            encoded = export_signature.encode(tf, features, served)
            x = encoded if several else next(iter(encoded.values()))
            if converter is not None:
                x = converter(x)
            return export_signature.name_outputs(tf, _probabilities(tf, model, model_fn(x)), plan)

        archive.add_endpoint(SIGNATURE, serve)
    except Exception as error:
        raise ExportError(f"Keras could not export this model as a SavedModel: {error}") from error
    inputs = export_signature.plain_inputs(served)
    about = _about(
        model,
        encoding,
        target.name,
        {
            "serving": {
                "signature": SIGNATURE,
                "encoded_signature": ENCODED_SIGNATURE,
                "unknown": unknown,
                "inputs": inputs,
                "outputs": plan.names,
            }
        },
    )
    with _built_beside(target) as work:
        built = work / "savedmodel"
        try:
            archive.write_out(str(built), verbose=False)
        except Exception as error:
            raise ExportError(f"The SavedModel could not be written: {error}") from error
        about_path = built.joinpath(*ABOUT_FILE)
        about_path.parent.mkdir(exist_ok=True)
        about_path.write_text(json.dumps(about, indent=1), encoding="utf-8")
        _move_into_place(built, target, work)
    return {
        "path": str(target),
        "format": "savedmodel",
        "inputs": inputs,
        "outputs": plan.names,
        "encoding_file": str(target.joinpath(*ABOUT_FILE)),
        "backend": config.backend,
    }


def _probabilities(tf: Any, model: Model, predicted: Any) -> Any:
    """``predicted`` as predict() gives it: a KerasHub classifier's logits as each class's
    probability (``pretrained.probability_activation``), in float32; else as it is."""
    if isinstance(predicted, (dict, list, tuple)):
        return predicted
    activation = pretrained.probability_activation(model, tuple(predicted.shape))
    if activation is None:
        return predicted
    return getattr(tf.nn, activation)(tf.cast(predicted, tf.float32))


def _onnx_modules() -> Any:
    """The onnx module, after checking that what the backend's ONNX export needs is there."""
    if config.backend == "jax" and importlib.util.find_spec("jax2onnx") is None:
        raise ExportError(
            "Keras exports ONNX from the JAX engine with jax2onnx, which is not installed "
            "(it needs JAX 0.8.1 or later). Export from the TensorFlow engine instead: "
            'gpu_save(fit, "model.keras"), then in an R session with KERAS_BACKEND='
            'tensorflow, gpu_export(gpu_load("model.keras"), path, format = "onnx") '
            f'(after {INSTALL_ONNX}); or format = "savedmodel", which works from JAX.'
        )
    missing = [m for m in ("tf2onnx", "onnx") if importlib.util.find_spec(m) is None]
    if config.backend == "jax":
        missing = [m for m in missing if m != "tf2onnx"]
    if missing:
        raise ExportError(
            f"ONNX export needs {' and '.join(missing)}, not installed in this Python: "
            f"run {INSTALL_ONNX} in R (and restart R)."
        )
    import onnx

    return onnx


def _export_onnx(
    keras: Any, model: Model, target: Path, encoding: Record | None, row: Any
) -> Record:
    onnx = _onnx_modules()
    beside = onnx_encoding_path(str(target))
    with _built_beside(target) as work:
        built = work / target.name
        try:
            with _quiet_tf2onnx():
                _in_float32(keras, model, row).export(str(built), format="onnx", verbose=False)
        except Exception as error:
            raise ExportError(f"Keras could not export this model to ONNX: {error}") from error
        graph = onnx.load(str(built)).graph
        _refuse_unsupported(onnx, graph, model)
        _check_loads(built)
        names = {
            "onnx": {
                "inputs": [i.name for i in graph.input],
                "outputs": [o.name for o in graph.output],
                "model_inputs": list(_input_specs(model, encoding)),
            }
        }
        about = work / beside.name
        about.write_text(json.dumps(_about(model, encoding, target.name, names), indent=1), "utf-8")
        _move_into_place(built, target, work)
        _move_into_place(about, beside, work)
    return {
        "path": str(target),
        "format": "onnx",
        "inputs": [{"name": n} for n in names["onnx"]["inputs"]],
        "outputs": [{"name": n, "what": "output"} for n in names["onnx"]["outputs"]],
        "encoding_file": str(beside),
        "backend": config.backend,
    }


def _in_float32(keras: Any, model: Model, row: Any) -> Model:
    """The model ONNX is exported from: ``model``, or where a layer computes in bfloat16 or
    float16 (mixed precision, as gpu_setup() chooses on a recent GPU) a float32 copy with
    its weights: tf2onnx makes of it a graph onnxruntime refuses ("MatMul bound to different
    types (tensor(float16) and tensor(bfloat16))"). The file then computes in float32, as
    predict()'s doubles are. ``row`` is the input ``_call_once()`` ran the model on."""
    layers = compat.flatten_layers(model)
    if not any(getattr(layer, "compute_dtype", None) in LOW_PRECISION for layer in layers):
        return model
    copy = model_copies.clone(
        keras, model, "gpu_export()", weights=True, policy="float32", every_layer=True
    )
    # Keras' ONNX export wants a model that was called once (a clone never was)
    copy(row, training=False)
    return copy


@contextlib.contextmanager
def _quiet_tf2onnx() -> Iterator[None]:
    """tf2onnx logs each op it converts at INFO (its unsupported ops are found afterwards),
    and Keras' patch of it for NumPy 2 asks NumPy 1.26 for ``np.object``, a FutureWarning."""
    import logging

    logger = logging.getLogger("tf2onnx")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*np.object.*", category=FutureWarning)
            yield
    finally:
        logger.setLevel(level)


def _refuse_unsupported(onnx: Any, graph: Any, model: Model) -> None:
    """ExportError naming the layers whose operations ONNX has none for: tf2onnx leaves an
    op it cannot convert in the graph as it is, and writes a model no runtime loads."""
    unsupported = [
        node
        for node in graph.node
        if node.domain in ("", "ai.onnx") and not onnx.defs.has(node.op_type)
    ]
    if not unsupported:
        return
    layers = {layer.name: layer for layer in compat.flatten_layers(model)}
    found: dict[str, set[str]] = {}
    for node in unsupported:
        layer = _layer_of(node.name, layers)
        found.setdefault(layer or f"(op {node.name})", set()).add(node.op_type)
    named = "; ".join(
        f"`{name}` ({type(layers[name]).__name__ if name in layers else 'not a layer'}: "
        f"{', '.join(sorted(ops))})"
        for name, ops in found.items()
    )
    raise ExportError(
        f"The model cannot be exported to ONNX: ONNX has no operation for what these "
        f'layers do: {named}. Export it with format = "savedmodel" (TensorFlow Serving '
        "runs every TensorFlow operation), or do that step in R before the model."
    )


def _layer_of(node_name: str, layers: dict[str, Any]) -> str | None:
    """The layer a graph node belongs to, from its name scope ("functional_1/bins_1/Op"):
    TensorFlow suffixes each scope ("_1") to make it unique, so a suffixed match wins."""
    scopes = node_name.split("/")[:-1]
    for scope in reversed(scopes):
        for name in layers:
            if re.fullmatch(re.escape(name) + r"_\d+", scope):
                return name
        if scope in layers:
            return scope
    return None


def _check_loads(path: Path) -> None:
    """Create an onnxruntime session on the file, where onnxruntime is installed."""
    if importlib.util.find_spec("onnxruntime") is None:
        return
    import onnxruntime

    try:
        onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as error:
        raise ExportError(f"onnxruntime cannot load the exported model: {error}") from error
