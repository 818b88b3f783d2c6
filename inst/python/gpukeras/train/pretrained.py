"""KerasHub's pretrained models: a preset loaded for a task and compiled for gpu_fit().

A preset is a name KerasHub loads from Kaggle or Hugging Face, as its own
``from_preset()`` does, or a folder ``save_to_preset()`` wrote. The model keeps
the preset's own preprocessor (its tokenizer): texts go in, R never tokenizes.

KerasHub is imported at the first call here only: it imports TensorFlow through
tensorflow-text (15 s on 2 cores), which a user who loads no preset never pays.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import platform
import sys
import tempfile
import warnings
import weakref
import zipfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from gpukeras.core import compat
from gpukeras.core.errors import BadArgumentError, GpukerasError
from gpukeras.core.handles import Record
from gpukeras.core.runtime import config
from gpukeras.data.encoding import normalized
from gpukeras.data.source_files import tensorflow

HUB_REPAIR = 'Run install_gpukeras(extras = "hub") in R, then restart R.'
# What save_to_preset() writes first in a preset folder, and from_preset() reads first.
PRESET_FILE = "metadata.json"
# What a model loaded here carries inside the .keras file gpukeras saves, beside Keras' own
# members (KerasHub's configs have no LoRA): its preset, LoRA and optimizer; its adapters where
# they are kept (KerasHub's save_lora_weights(), whose file name ends so).
SAVED_PRESET = "gpukeras-preset.json"
SAVED_ADAPTERS = "gpukeras-adapters.lora.h5"
# How the name of the adapters' file ``save_weights`` writes beside a weights file ends.
ADAPTERS_SUFFIX = ".lora.h5"
# The preset, LoRA rank (None: every weight trains) and the rank merged into the weights
# (gpu_save(lora = "merge")) of each model loaded here, for a tracked fit's params and print().
_PRESETS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


class KerasHubMissingError(GpukerasError):
    """KerasHub, or the tensorflow-text its tokenizers run on, is not installed or does not load."""

    r_class = "gpukeras_error_keras_hub_missing"


class BadPresetError(GpukerasError):
    """A preset that cannot be loaded for the task asked: no such preset, or not this task's."""

    r_class = "gpukeras_error_bad_preset"


def keras_hub() -> ModuleType:
    """KerasHub, imported once Keras has started (and on another backend, TensorFlow with its
    GPUs hidden, as tf.data has it); KerasHubMissingError naming the repair when it, or the
    tensorflow-text its tokenizers need off Windows, is missing or does not load.

    Where the backend is not TensorFlow and TensorFlow is not installed at all (a machine
    with JAX alone), KerasHub is imported without it: a preset without a tokenizer loads
    and fine-tunes on token ids (KerasHub batches arrays with Grain), and texts are refused
    where they are read (``text_dataset``: TensorflowMissingError, naming the repair).
    """
    config.keras()
    texts = config.backend == "tensorflow" or _installed("tensorflow")
    if texts:
        tensorflow()
    try:
        if texts and platform.system() != "Windows":
            import tensorflow_text  # noqa: F401  KerasHub hides this error, then fails at the first text
        import keras_hub as hub
    except ImportError as error:
        name = error.name if isinstance(error, ModuleNotFoundError) else None
        what = (
            f"{name.replace('_', '-')} is not installed in the Python at {sys.executable}"
            if name in ("keras_hub", "tensorflow_text") and name is not None
            else f"KerasHub does not load with the TensorFlow installed ({error})"
        )
        raise KerasHubMissingError(f"{what}. {HUB_REPAIR}") from error
    return hub


def _installed(module: str) -> bool:
    """Whether ``module`` can be found (not imported) in this Python."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def looks_like_path(preset: str) -> bool:
    """Whether ``preset`` names a folder (one that exists, or that starts with ".", "/" or
    "~") rather than a preset's name or URL."""
    if "://" in preset:
        return False
    return (
        Path(preset).expanduser().exists() or preset.startswith((".", "/", "~")) or "\\" in preset
    )


def _preset_path(preset: str, arg: str = "preset", example: str = "bert_tiny_en_uncased") -> str:
    """``preset`` as KerasHub's ``from_preset()`` is given it: a name (or a URL) as it is, a
    path (``looks_like_path``) as its absolute path, which must be a folder save_to_preset()
    wrote: BadPresetError naming the argument ``arg`` otherwise (and the preset name
    ``example``), before KerasHub reads it."""
    if not looks_like_path(preset):
        return preset
    path = Path(preset).expanduser()
    folder = str(path.resolve())
    if not (path / PRESET_FILE).is_file():
        raise BadPresetError(
            f"`{arg}`: '{folder}' is not a KerasHub preset folder (it has no {PRESET_FILE}, "
            "which save_to_preset() writes). Give a folder save_to_preset() wrote, or a preset "
            f"name such as '{example}'."
        )
    return folder


def check_preset(preset: str) -> Record:
    """gpu_check(preset = )'s row: whether ``preset`` (a name, a URL or a folder) loads, as
    KerasHub's own preset loader reads its config and metadata (no weights read, no model
    built).

    Returns:
        ``preset`` (as KerasHub is given it: a folder's absolute path), ``loads``,
        ``backbone`` (its class), ``tasks`` (KerasHub's tasks for it, as its metadata lists
        them), ``parameters`` (the backbone's count, from its metadata; None where not
        recorded) and ``problem`` (why it does not load, with the repair; None when it does).
    """
    row: Record = {"preset": preset, "loads": False, "backbone": None, "tasks": []}
    row.update(parameters=None, problem=None)
    try:
        keras_hub()
        row["preset"] = _preset_path(preset)
        row["backbone"], metadata = compat.keras_hub_preset(row["preset"])
    except GpukerasError as error:
        return {**row, "problem": str(error)}
    except (ValueError, OSError, KeyError) as error:
        return {
            **row,
            "problem": f"'{row['preset']}' does not load as a KerasHub preset: "
            f"{str(error).rstrip('.')}. Give a "
            "folder save_to_preset() wrote, or a preset name such as 'bert_tiny_en_uncased'.",
        }
    count = metadata.get("parameter_count")
    tasks = metadata.get("tasks")
    return {
        **row,
        "loads": True,
        "tasks": [str(task) for task in tasks] if isinstance(tasks, list) else [],
        "parameters": count if isinstance(count, int) else None,
    }


def text_classifier(
    preset: str,
    num_classes: int,
    lora_rank: int | None = None,
    sequence_length: int | None = None,
    learning_rate: float = 5e-5,
) -> Record:
    """Load ``preset``'s text classifier with a new head of ``num_classes`` and compile it.

    Args:
        preset: a KerasHub preset name (downloaded as KerasHub does) or a preset folder.
        num_classes: the number of classes (the levels of R's factor).
        lora_rank: LoRA's rank: the backbone's weights frozen, low-rank adapters added to
            them (KerasHub's ``enable_lora``); None trains every weight.
        sequence_length: the tokens each text is cut or padded to; None keeps the preset's.
        learning_rate: Adam's learning rate.

    Returns:
        ``model`` (compiled: sparse categorical cross-entropy on logits, accuracy),
        ``task`` (the classifier's class name), ``trainable`` (the trainable weights'
        count) and ``parameters`` (all weights' count).

    Raises:
        KerasHubMissingError: KerasHub is not installed, or does not load.
        BadPresetError: not a preset folder, a preset that cannot be loaded, or one without
            a text classifier.
    """
    model = load_task("TextClassifier", preset, lora_rank, sequence_length, num_classes=num_classes)
    compile_classifier(model, config.keras().optimizers.Adam(learning_rate=learning_rate))
    return _loaded(model)


def causal_lm(
    preset: str,
    lora_rank: int | None = None,
    sequence_length: int | None = None,
    learning_rate: float = 5e-5,
) -> Record:
    """Load ``preset``'s causal language model and compile it to be fine-tuned on texts.

    Its preprocessor makes each text its own next-token targets: gpu_fit() trains it on
    texts alone (``text_dataset`` without labels).

    Args:
        preset: a KerasHub preset name (downloaded as KerasHub does) or a preset folder.
        lora_rank: LoRA's rank, as ``text_classifier``'s; None trains every weight.
        sequence_length: the tokens each training text is cut or padded to; None keeps the
            preset's.
        learning_rate: Adam's learning rate.

    Returns:
        ``model`` (compiled as KerasHub's ``CausalLM.compile()``: sparse categorical
        cross-entropy on logits, accuracy weighted to the real tokens, Adam at
        ``learning_rate``), ``task``, ``trainable`` and ``parameters``, as
        ``text_classifier``'s.

    Raises:
        KerasHubMissingError: KerasHub is not installed, or does not load.
        BadPresetError: not a preset folder, a preset that cannot be loaded, or one without
            a causal language model.
    """
    model = load_task("CausalLM", preset, lora_rank, sequence_length)
    model.compile(optimizer=config.keras().optimizers.Adam(learning_rate=learning_rate))
    return _loaded(model)


def load_task(
    task: str,
    preset: str,
    lora_rank: int | None = None,
    sequence_length: int | None = None,
    arg: str = "preset",
    example: str = "bert_tiny_en_uncased",
    **options: Any,
) -> Any:
    """``preset``'s model for KerasHub's ``task`` (a class of ``keras_hub.models``, built
    with ``options``), its preprocessor's sequence length set and LoRA enabled as asked,
    remembered with its preset and rank for tracking (``preset_params``); BadPresetError
    naming the argument ``arg`` (and the preset name ``example``) when it cannot be loaded."""
    hub = keras_hub()
    preset = _preset_path(preset, arg, example)
    what = {
        "TextClassifier": "a text classifier",
        "CausalLM": "a causal language model",
        "ImageClassifier": "an image classifier",
    }[task]
    try:
        model = getattr(hub.models, task).from_preset(preset, **options)
    except (ValueError, FileNotFoundError, OSError) as error:
        raise BadPresetError(
            f"`{arg}`: '{preset}' could not be loaded as {what}: {error}"
        ) from error
    if sequence_length is not None:
        model.preprocessor.sequence_length = sequence_length
    if lora_rank is not None:
        model.backbone.enable_lora(rank=lora_rank)
    _PRESETS[model] = {"preset": preset, "lora_rank": lora_rank, "merged_rank": None}
    return model


def lora_like(model: Any, copy: Any) -> None:
    """Give ``copy``, a compiled clone of ``model`` (KerasHub's configs hold no LoRA), the
    LoRA that ``load_task`` enabled on ``model``'s backbone, at the same rank, and compile it
    again; nothing for any other model."""
    rank = (_PRESETS.get(model) or {}).get("lora_rank")
    if rank is None:
        return
    hub = keras_hub()
    for layer in copy.layers:
        if isinstance(layer, hub.models.Backbone):
            layer.enable_lora(rank=rank)
    # compiled as the model is, its optimizer built again for the weights that now train
    copy.compile_from_config(model.get_compile_config())


def _loaded(model: Any) -> Record:
    """What ``text_classifier`` and ``causal_lm`` return for ``model``."""
    return {
        "model": model,
        "task": type(model).__name__,
        "trainable": _count(model.trainable_weights),
        "parameters": _count(model.weights),
    }


def preset_params(model: Any) -> dict[str, object]:
    """The params a tracked fit of ``model`` records when ``text_classifier`` or ``causal_lm``
    loaded it (or ``load_model`` loaded what it saved): ``preset`` (the name, or the folder's
    absolute path) and ``lora_rank`` ("none" when every weight trains); nothing for any other
    model."""
    loaded = _PRESETS.get(model)
    if loaded is None:
        return {}
    rank = loaded["lora_rank"]
    return {"preset": loaded["preset"], "lora_rank": "none" if rank is None else rank}


def preset_record(model: Any) -> dict[str, Any] | None:
    """What ``model`` was loaded from when it was loaded here (its preset and LoRA) and its
    preprocessor (which does not train), for ``restore_preset`` on a copy of it; None for
    another model."""
    loaded = _PRESETS.get(model)
    return None if loaded is None else {**loaded, "preprocessor": model.preprocessor}


def restore_preset(model: Any, record: dict[str, Any] | None) -> None:
    """Make ``model``, rebuilt from the config of one loaded here (KerasHub's has neither
    LoRA nor its tokenizer's vocabulary), that model again before its values are assigned:
    LoRA enabled at its rank (the same variables, in the same order), the preprocessor
    ``record`` holds, and its preset remembered. Nothing for ``record`` None."""
    if record is None:
        return
    loaded = {key: value for key, value in record.items() if key != "preprocessor"}
    model.preprocessor = record["preprocessor"]
    if loaded["lora_rank"] is not None:
        model.backbone.enable_lora(rank=loaded["lora_rank"])
    _PRESETS[model] = loaded


def preset_line(model: Any) -> str | None:
    """What ``model`` was loaded from, in words, when ``text_classifier`` or ``causal_lm``
    loaded it (or ``load_model`` what it saved): its preset and LoRA; None for another model."""
    loaded = _PRESETS.get(model)
    if loaded is None:
        return None
    rank, merged = loaded["lora_rank"], loaded.get("merged_rank")
    lora = (
        f"LoRA rank {rank} (adapters trainable)"
        if rank is not None
        else f"LoRA rank {merged} merged into the weights"
        if merged is not None
        else "no LoRA"
    )
    return f"KerasHub preset {loaded['preset']}; {lora}"


def generate(
    model: Any, prompts: list[str], max_length: int | None = None, sampler: str = "greedy"
) -> list[str]:
    """Each prompt followed by what ``model`` (a KerasHub causal language model) generates
    after it, token by token with ``sampler`` (a KerasHub sampler's name), to ``max_length``
    tokens in all (None: its preprocessor's sequence length) or its end token.

    R has checked the prompts (no NA), ``max_length`` (a count) and ``sampler`` (a name).
    The sampler is the model's from here on, as ``compile(sampler=)`` would set it, without
    compiling it again (its optimizer's state is kept).

    Raises:
        BadArgumentError: ``model`` is no causal language model, or ``max_length`` is longer
            than the sequences its backbone takes.
    """
    hub = keras_hub()
    if not isinstance(model, hub.models.CausalLM):
        raise BadArgumentError(
            "`object` must be a causal language model (gpu_causal_lm()) or its fit, "
            f"not a {type(model).__name__}."
        )
    longest = getattr(model.backbone, "max_sequence_length", None)
    if max_length is not None and longest is not None and max_length > longest:
        raise BadArgumentError(
            f"`max_length` ({max_length}) is longer than the {longest} tokens the model's backbone "
            f"takes. Give at most {longest}."
        )
    wanted = hub.samplers.get(sampler)
    # the same kind of sampler keeps the model's compiled generation
    if type(getattr(model, "sampler", None)) is not type(wanted):
        model.sampler = wanted
        model.generate_function = None
    generated = model.generate(list(prompts), max_length=max_length)
    return [str(text) for text in np.atleast_1d(generated)]


def compile_classifier(model: Any, optimizer: Any) -> None:
    """Compile a classifier as gpu_text_classifier() and gpu_image_backbone() do:
    ``optimizer``, sparse categorical cross-entropy on its logits (or on its probabilities,
    for a head with an activation), and accuracy."""
    keras = config.keras()
    model.compile(
        optimizer=optimizer,
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=gives_logits(model)),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    )


def _count(weights: list[Any]) -> int:
    """The number of values in ``weights``."""
    return sum(int(np.prod(weight.shape)) for weight in weights)


def text_dataset(
    texts: list[str],
    labels: list[int] | None = None,
    levels: list[str] | None = None,
    batch_size: int = 32,
    shuffle: bool = False,
    seed: int | None = None,
) -> Record:
    """Texts (and their class codes, from 0) as a batched tf.data dataset, which a KerasHub
    task's ``fit()`` and ``predict()`` run through its own preprocessor, and its encoding.

    R has checked the texts (no NA) and the codes (as many, from 0, of the factor's
    ``levels``). ``shuffle`` reshuffles the rows every epoch, with ``seed``.

    Returns:
        ``dataset`` and ``encoding``: the plain encoding (``data.encoding.normalized``'s
        form) of one input ``x`` of type "text" and labels of ``levels`` (None without
        labels), which gpu_fit() records, so that predict() names its columns by the
        levels and gpu_save() keeps them.
    """
    tf = tensorflow()
    rows = np.asarray(texts, dtype=object)
    parts = rows if labels is None else (rows, np.asarray(labels, dtype="int32"))
    dataset = tf.data.Dataset.from_tensor_slices(parts)
    if shuffle:
        dataset = dataset.shuffle(len(rows), seed=seed, reshuffle_each_iteration=True)
    y = None if labels is None else {"type": "factor", "levels": list(map(str, levels or []))}
    encoding = normalized({"inputs": {"x": {"type": "text"}}, "y": y, "x_dtype": "string"})
    return {"dataset": dataset.batch(batch_size), "encoding": encoding}


def gives_logits(model: Any) -> bool:
    """Whether ``model`` is a KerasHub classifier whose head has no activation (KerasHub's
    default, and gpu_text_classifier()'s and gpu_image_backbone()'s): its outputs are
    logits, not probabilities. (A text classifier keeps its activation as a function, an
    image classifier as given: None, a name or a function.)"""
    keras = config.keras()
    if not (
        type(model).__module__.startswith("keras_hub.")
        and hasattr(model, "num_classes")
        and hasattr(model, "activation")
    ):
        return False
    return bool(keras.activations.get(model.activation) is keras.activations.linear)


def probability_activation(model: Any, shape: tuple[int | None, ...]) -> str | None:
    """What makes ``model``'s outputs of ``shape`` (rows, columns) each class's probability,
    where it gives logits (``gives_logits``): "softmax" of each row for several columns,
    "sigmoid" of a single column (the second class's probability, as a sigmoid classifier's);
    None for anything else (a model that gives probabilities, outputs not of two dimensions)."""
    if len(shape) != 2 or not gives_logits(model):
        return None
    return "sigmoid" if shape[1] == 1 else "softmax"


def probabilities(model: Any, predicted: Any) -> Any:
    """``predicted`` as each class's probability (``probability_activation``), in float32;
    anything else as it is."""
    if isinstance(predicted, (dict, list, tuple)):
        return predicted
    activation = probability_activation(model, np.shape(predicted))
    if activation is None:
        return predicted
    logits = np.asarray(predicted, dtype="float32")
    if activation == "sigmoid":
        return 1.0 / (1.0 + np.exp(-logits))
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def image_converter(model: Any) -> Any:
    """The image converter of ``model``'s preprocessor (a KerasHub image classifier's: the
    preset's resizing, scale and offset, which its ``predict()`` applies to the batches in
    the input pipeline, not inside the model), or None."""
    return getattr(getattr(model, "preprocessor", None), "image_converter", None)


@contextlib.contextmanager
def _unmerged(layers: list[Any]) -> Iterator[None]:
    """``layers``' LoRA switched off meanwhile: Keras then saves their frozen kernels as they
    are, not with the adapters added."""
    for layer in layers:
        layer.lora_enabled = False
    try:
        yield
    finally:
        for layer in layers:
            layer.lora_enabled = True


def _adapted(model: Any) -> list[Any]:
    """The layers of ``model`` whose LoRA is on."""
    return [
        layer for layer in compat.flatten_layers(model) if getattr(layer, "lora_enabled", False)
    ]


def adapters_file(path: str) -> str:
    """Where ``save_weights`` keeps the adapters of the weights file ``path`` (a name
    KerasHub's save_lora_weights() takes)."""
    return str(path).removesuffix(".weights.h5") + ADAPTERS_SUFFIX


def saves_adapters(model: Any) -> bool:
    """Whether ``save_weights`` writes adapters beside ``model``'s weights: a model loaded here
    with LoRA."""
    return _PRESETS.get(model, {}).get("lora_rank") is not None and bool(_adapted(model))


def save_weights(model: Any, path: str) -> None:
    """``model.save_weights(path)`` (its optimizer's state too) and, for a model loaded here
    with LoRA (``saves_adapters``), its frozen kernels as they are and its adapters beside
    them (KerasHub's ``save_lora_weights()``, into ``adapters_file(path)``): Keras saves
    each kernel with its adapters added, and loads that sum into the kernel with zero
    adapters, which then train no more (both factors zero)."""
    adapted = _adapted(model) if saves_adapters(model) else []
    with _unmerged(adapted):
        model.save_weights(path)
    if adapted:
        model.backbone.save_lora_weights(adapters_file(path))


def load_weights(model: Any, path: str) -> None:
    """Load what ``save_weights`` saved into ``model`` (the same model, with LoRA at the same
    rank where it had it): the weights, the optimizer's state and the adapters (where their
    file is beside the weights)."""
    model.load_weights(path)
    adapters = adapters_file(path)
    if Path(adapters).is_file():
        model.backbone.load_lora_weights(adapters)


def save_model(model: Any, path: str, lora: str = "keep") -> None:
    """Save ``model`` to the .keras file ``path`` as its ``save()`` does and, for a model
    loaded here, its preset, LoRA and optimizer inside the file (``load_model`` reads them).

    With LoRA, ``lora`` = "keep" saves the frozen kernels as they are and the adapters apart
    (KerasHub's ``save_lora_weights()``), so that the model loads with LoRA at the same rank
    and the same adapters, only they trainable; "merge" saves each kernel with its adapters
    added (Keras' own save), and the model loads without LoRA, as a full fine-tune of the
    merged weights. Either way it predicts the same. Any other model is saved as it is.
    """
    loaded = _PRESETS.get(model)
    adapted = _adapted(model)
    keep = loaded is not None and bool(adapted) and lora == "keep"
    with _unmerged(adapted if keep else []):
        model.save(path)
    if loaded is None:
        return
    record = dict(loaded)
    if adapted and not keep:
        record.update(lora_rank=None, merged_rank=loaded["lora_rank"])
    optimizer = getattr(model, "optimizer", None)
    keras = config.keras()
    record["optimizer"] = optimizer and keras.saving.serialize_keras_object(optimizer)
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr(SAVED_PRESET, json.dumps(record))
        if keep:
            with tempfile.TemporaryDirectory() as folder:
                adapters = str(Path(folder) / SAVED_ADAPTERS)
                model.backbone.save_lora_weights(adapters)
                archive.write(adapters, SAVED_ADAPTERS)


def load_model(path: str) -> Any:
    """The KerasHub model saved (gpu_save()) in the .keras file at ``path``, or None when the
    file holds none (or is no zip: Keras then says what it is).

    KerasHub is imported the core's way (``keras_hub()``) first: Keras would otherwise
    import it itself, without the TensorFlow the core sets up. A model ``save_model`` saved
    comes back with its preset and LoRA as it was saved (its adapters, or the merged
    kernels). Keras cannot restore a KerasHub task's own compile() (nor, then, its
    optimizer's state), and warns of both; a text or image classifier or a causal language
    model is compiled again as gpu_text_classifier(), gpu_image_backbone() or gpu_causal_lm()
    compiles it, with the
    optimizer it was saved with (a new state; Adam at 5e-5 where none was saved), so that
    evaluate() works on it, and other tasks are left uncompiled, without the warnings."""
    try:
        with zipfile.ZipFile(path) as archive:
            config_text = archive.read("config.json").decode("utf-8", errors="replace")
            names = set(archive.namelist())
            saved = json.loads(archive.read(SAVED_PRESET)) if SAVED_PRESET in names else None
            adapters = archive.read(SAVED_ADAPTERS) if SAVED_ADAPTERS in names else None
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None
    if '"module": "keras_hub.' not in config_text:
        return None
    hub, keras = keras_hub(), config.keras()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"`compile\(\)` was not called", UserWarning)
        warnings.filterwarnings("ignore", "Skipping variable loading for optimizer", UserWarning)
        model = keras.saving.load_model(path)
    if adapters is not None:
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, SAVED_ADAPTERS).write_bytes(adapters)
            model.backbone.load_lora_weights(str(Path(folder, SAVED_ADAPTERS)))
    optimizer = (saved or {}).pop("optimizer", None)
    optimizer = (
        keras.saving.deserialize_keras_object(optimizer)
        if optimizer
        else keras.optimizers.Adam(learning_rate=5e-5)
    )
    if saved is not None:
        _PRESETS[model] = saved
    if isinstance(model, (hub.models.TextClassifier, hub.models.ImageClassifier)):
        compile_classifier(model, optimizer)
    elif isinstance(model, hub.models.CausalLM):
        model.compile(optimizer=optimizer)
    return model
