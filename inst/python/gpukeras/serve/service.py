"""The prediction service: one request (method, path, query, headers, body) to its answer.

Contract. ``service()`` builds a ``Service`` from a model, its encoding (the plain form
gpu_save() writes; None: rows of numbers) and the service's settings; ``answer()`` takes a
request whose body was read whole and returns ``{"status", "body", "headers"}``, ``body``
JSON text. gpu_serve()'s server (server.py) and gpu_api()'s plumber routes both answer
through it, so both answer alike; ``answer`` is ``begin`` (all but the model's call) and
``complete`` (the model's call and the predictions as JSON), which the server's event loop
also calls apart. The routes, under ``prefix``: ``POST /predict`` (JSON
records ``[{"col": value}, ...]``, columns ``{"col": [values]}`` or one record, rows of
numbers ``[[...], ...]`` for a model of a matrix or array, or texts ``["...", ...]`` for a
KerasHub preset's text model, which tokenizes them), ``GET /metadata`` and
``GET /health``. Every refusal is ``{"error": <code>, "message": ...}`` with a 4xx status
(see service_checks.py for the header checks and service_body.py for the body's).

The body is encoded as predict() encodes R data: a data.frame input through the core's
one encoding (``data.encoding.encode_frame``: levels matched by name, ``unknown``), rows
of numbers as float32 (read straight from the body's bytes where they are plain numbers);
the model runs on one batch per ``batch_size`` rows. The limits ``max_rows`` and
``max_bytes`` not given follow what a request costs (``default_max_rows``,
``request_byte_limit``): an image model's keep one request within FEATURE_BYTES of
float32 rows and a body read in bounded time.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import sys
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import parse_qs

import numpy as np

from gpukeras.core.errors import BadArgumentError
from gpukeras.core.handles import Model, Record
from gpukeras.data import class_rule
from gpukeras.data.encoding import part_width, plain_encoding
from gpukeras.serve import batching, model_io, service_body, service_checks, service_spec
from gpukeras.serve.service_body import Refused, client_text, columns_of, refuse
from gpukeras.train import pretrained

ROUTES = "POST /predict, GET /metadata and GET /health"


class Service:
    """A model served with its encoding and settings: what ``answer`` needs."""

    def __init__(self, model: Model, encoding: Mapping[str, Any] | None, settings: Record):
        self.model = model
        self.encoding = encoding
        self.part = served_input(encoding, model)
        self.settings = settings
        self.max_rows = int(settings.get("max_rows") or default_max_rows(self.part))
        self.max_bytes = int(
            settings.get("max_bytes") or request_byte_limit(self.part, self.max_rows)
        )
        self.hosts = service_checks.served_hosts(
            settings.get("host"), settings.get("allowed_hosts")
        )
        prefix = str(settings.get("prefix") or "")
        self.paths = {f"{prefix}/predict": "predict", f"{prefix}/metadata": "metadata"}
        self.paths[f"{prefix}/health"] = "health"
        if settings.get("openapi"):
            self.paths[f"{prefix}/openapi.json"] = "openapi"
        self.model_lock = threading.Lock()
        self.batch_size = int(settings.get("batch_size") or 1024)
        window = float(settings.get("batch_window") or 0)
        self.batcher = None
        if window > 0:
            self.batcher = batching.Batcher(
                self.predict_inputs,
                window,
                self.batch_size,
                prepare=functools.partial(service_body.model_features, self),
                stack=service_body.stack,
            )
        self.levels = (encoding or {}).get("y", None) and (encoding or {})["y"].get("levels")
        self.outputs = model_io.describe(model)["outputs"]
        self.metadata = json.dumps(metadata(self))

    def predict(self, features: Any) -> list[np.ndarray]:
        """The model's outputs for ``features`` (``Pending.features``): ``predict_inputs``
        of their encoding (``service_body.model_features``, Refused where the rows cannot be
        encoded)."""
        return self.predict_inputs(service_body.model_features(self, features))

    def predict_inputs(self, features: Any) -> list[np.ndarray]:
        """The model's outputs for its input ``features``, one batch of ``batch_size`` rows
        at a time (one call of the model at a time); a KerasHub classifier's logits as each
        class's probability, as predict() gives them."""
        batch = self.batch_size
        with self.model_lock:
            parts = [
                _as_list(
                    pretrained.probabilities(
                        self.model, self.model.predict_on_batch(features[i : i + batch])
                    )
                )
                for i in range(0, len(features), batch)
            ]
        return [np.concatenate([part[i] for part in parts]) for i in range(len(parts[0]))]


def served_input(encoding: Mapping[str, Any] | None, model: Model) -> Record:
    """The one input the model is served with: its part of the encoding, or rows of numbers
    of the model's input shape where no encoding was recorded. BadArgumentError for a model
    of several inputs."""
    inputs = (encoding or {}).get("inputs") or {}
    if (encoding or {}).get("several") or len(inputs) > 1:
        raise BadArgumentError(
            f"gpu_serve() serves a model with one input; this one has {len(inputs)} "
            f"({', '.join(inputs)}). Score it with predict(fit, list(...)) in R, or build the "
            "service with plumber around predict()."
        )
    if inputs:
        part = dict(next(iter(inputs.values())))
        if part["type"] == "array":
            part["shape"] = [int(d) for d in np.asarray(part["shape"]).reshape(-1)]
        return part
    shapes = model_io.describe(model)["inputs"]
    dims = shapes[0]["shape"][1:] if len(shapes) == 1 else [None]
    return {"type": "array", "shape": None if None in dims else dims, "names": None}


ROWS = 10000  # max_rows by default, for a model whose rows are small
FEATURE_BYTES = 16 * 2**20  # the most bytes one request's rows take by default as float32
NUMBER_BYTES = 12  # a number in rows of numbers by default: 11 characters and a comma
TEXT_BYTES = 1024  # a text by default, its quotes and comma included


def default_max_rows(part: Mapping[str, Any]) -> int:
    """The most rows one request may have by default: ROWS, or fewer where they would take
    more than FEATURE_BYTES as the model's float32 input (an image model's: 1,365 images
    of 32 x 32 x 3), one at least."""
    return max(1, min(ROWS, FEATURE_BYTES // (4 * max(1, part_width(part)))))


def request_byte_limit(part: Mapping[str, Any], max_rows: int) -> int:
    """The most bytes a request's body may have by default, 64 KiB at least: ``max_rows``
    rows of the input as JSON records (a number 24 characters at most, a level each
    character escaped as \\uXXXX, each name quoted), twice over for spaces and ignored
    fields; or, for an input of unnamed rows of numbers (an image model's), ``max_rows``
    such rows with NUMBER_BYTES a number and their brackets; for texts, ``max_rows`` of
    TEXT_BYTES; so that a request within it
    is read in bounded time and memory."""

    def named(names: list[str], values: list[int]) -> float:
        return sum(len(name.encode()) + 4 for name in names) + sum(values)

    if part["type"] == "data.frame":
        specs = part["columns"]
        order = columns_of(part) or []
        widths = [
            6 * max([len(str(level).encode()) for level in specs[c]["levels"]] + [1]) + 2
            if specs[c]["type"] == "factor"
            else 24
            for c in order
        ]
        records = 2 * max_rows * (named(order, widths) + 2)
    elif columns_of(part):
        records = 2 * max_rows * (named(columns_of(part) or [], [25 * part_width(part)]) + 2)
    elif part["type"] == "text":
        records = max_rows * TEXT_BYTES
    else:
        shape = part.get("shape") or [1]
        brackets = 2 * sum(math.prod(shape[:depth]) for depth in range(len(shape)))
        records = max_rows * (NUMBER_BYTES * part_width(part) + brackets + 2)
    return int(max(64 * 1024, records))


def service(model: Model, encoding: Mapping[str, Any] | None, settings: object) -> Service:
    """The service of ``model`` with its ``encoding`` (plain, or None) and ``settings``
    (``token``, ``max_rows`` or None, ``max_bytes`` or None, ``batch_size``, ``unknown``,
    ``allowed_hosts``, ``host`` (None: unknown), ``prefix``, ``versions``); the encoding as
    R sends it (``encoding.plain_encoding``)."""
    plain = None if encoding is None else plain_encoding(encoding)
    return Service(model, plain, dict(settings))  # type: ignore[call-overload]


class Pending(NamedTuple):
    """A POST /predict read and checked (``begin``), its rows yet to be predicted: what
    ``complete`` needs."""

    features: Any  # an array, or service_body.FrameRows: encoded at the model's call
    kind: str
    keep: np.ndarray | None
    rows: int
    warnings: list[str]


def answer(
    served: Service, method: str, path: str, query: str, headers: object, body: object
) -> Record:
    """The answer to one request: ``{"status", "body", "headers"}``. ``headers``: the
    request's, by lower-case name; ``body``: its bytes (or text). A POST /predict, with a
    batcher, is on its way to a batch from its start, its body read meanwhile
    (``batching.Batcher.request``)."""
    batched = method == "POST" and served.paths.get(path) == "predict"
    with (
        served.batcher.request()
        if batched and served.batcher is not None
        else contextlib.nullcontext(served.predict)
    ) as predict:
        started = begin(served, method, path, query, headers, body)
        return complete(served, started, predict) if isinstance(started, Pending) else started


def begin(
    served: Service, method: str, path: str, query: str, headers: object, body: object
) -> Record | Pending:
    """``answer`` but for the model's call: the answer, or for a POST /predict whose body
    was read and checked, what ``complete`` then answers once its rows are predicted."""
    given = {str(k).lower(): str(v) for k, v in dict(headers or {}).items()}  # type: ignore[call-overload]
    raw = body.encode("utf-8", "surrogateescape") if isinstance(body, str) else bytes(body or b"")  # type: ignore[call-overload]
    try:
        route = served.paths.get(path)
        if route is None:
            refuse(
                404,
                "not_found",
                f"No route {method} {client_text(path, 100)}: this service has {ROUTES}.",
            )
        service_checks.check_request(
            served, given, route in ("predict", "metadata"), route == "predict" and method == "POST"
        )
        wanted = "POST" if route == "predict" else "GET"
        if method != wanted:
            refuse(405, "method_not_allowed", f"{path} takes {wanted} requests, not {method}.")
        if route == "health":
            status, text = 200, '{"status":"ok"}'
        elif route == "openapi":
            status, text = 200, json.dumps(service_spec.document(served))
        elif route == "metadata":
            status, text = 200, served.metadata
        else:
            return predict_request(served, query, raw)
    except Refused as refused:
        status, text = refused.status, json.dumps(refused.problem, ensure_ascii=False)
    return _answered(status, text)


def complete(served: Service, pending: Pending, predict: batching.Predict) -> Record:
    """The answer to the POST /predict ``pending`` (``begin``), its rows predicted by
    ``predict``."""
    try:
        predicted = run_model(served, pending.features, predict)
        status, text = 200, predictions_json(served, predicted, *pending[1:])
    except Refused as refused:
        status, text = refused.status, json.dumps(refused.problem, ensure_ascii=False)
    return _answered(status, text)


def _answered(status: int, text: str) -> Record:
    headers_out = {"Content-Type": "application/json"}
    if status == 401:
        headers_out["WWW-Authenticate"] = "Bearer"
    return {"status": status, "body": text, "headers": headers_out}


def predict_request(served: Service, query: str, raw: bytes) -> Pending:
    """POST /predict's query and body read and checked (``Pending``), or Refused."""
    types = parse_qs(query or "", keep_blank_values=True).get("type", ["raw"])
    kind = ",".join(types)
    if kind not in ("raw", "class"):
        refuse(
            400,
            "bad_type",
            f'The query\'s type must be "raw" or "class", not "{client_text(kind)}".',
        )
    features, keep, rows, warnings = service_body.features(raw, served)
    return Pending(features, kind, keep, rows, warnings)


def run_model(served: Service, features: Any, predict: batching.Predict) -> list[np.ndarray]:
    """The model's outputs for ``features`` by ``predict``, each rows x columns (with a
    batcher's, predicted with other requests' rows); the rows' own refusal (``Refused``,
    an unseen level) as it is, any other refusal of the data a 400 bad_data, any other
    failure a 500 prediction_failed."""
    if not len(features):
        return [np.zeros((0, int(np.prod(o["shape"][1:] or [1])))) for o in served.outputs]
    try:
        return predict(features)
    except Refused:  # the rows' own refusal (an unseen level): the request's answer
        raise
    except (ValueError, TypeError) as error:
        refuse(400, "bad_data", client_text(service_body.one_line(str(error)), 300))
    except Exception as error:  # the model itself failed
        refuse(500, "prediction_failed", client_text(service_body.one_line(str(error)), 300))


def _as_list(predicted: object) -> list[np.ndarray]:
    if isinstance(predicted, dict):
        return [np.asarray(p, dtype="float64") for p in predicted.values()]
    if isinstance(predicted, (list, tuple)):
        return [np.asarray(p, dtype="float64") for p in predicted]
    return [np.asarray(predicted, dtype="float64")]


def _number(value: float) -> float | None:
    return None if math.isnan(value) else float(f"{value:.15g}")


def _rows_json(array: np.ndarray) -> Any:
    if array.ndim == 1:
        return [_number(v) for v in array.tolist()]
    return [_rows_json(row) for row in array]


def _output_json(output: np.ndarray, levels: list[str] | None) -> Any:
    """One output as predict() gives it, as JSON: records named by the levels for a
    classifier's one column per level, numbers for one column, arrays of numbers per row."""
    if output.ndim == 1:
        output = output.reshape(-1, 1)
    if output.ndim == 2 and levels is not None and output.shape[1] == len(levels):
        return [
            None if math.isnan(row[0]) else dict(zip(levels, (_number(v) for v in row)))
            for row in output.tolist()
        ]
    if output.ndim == 2 and output.shape[1] == 1:
        return [_number(v) for v in output[:, 0].tolist()]
    return [None if np.isnan(row).all() else _rows_json(row) for row in output]


def predictions_json(
    served: Service,
    outputs: list[np.ndarray],
    kind: str,
    keep: np.ndarray | None,
    rows: int,
    warnings: list[str],
) -> str:
    """``{"predictions": ...}`` (and ``"warnings"``) for the request's ``rows``: the rows left
    out (``keep`` False: NA where the NA rule is "drop") as null."""
    if keep is not None:
        full = []
        for output in outputs:
            whole = np.full((rows, *output.shape[1:]), np.nan)
            whole[keep] = output
            full.append(whole)
        outputs = full
    levels = [str(level) for level in served.levels] if served.levels else None
    if kind == "class":
        if len(outputs) != 1 or outputs[0].ndim != 2:
            refuse(400, "bad_type", class_rule.NOT_CLASSES)
        width = outputs[0].shape[1]
        names = class_rule.class_names(width, levels) or range(class_rule.class_count(width))
        value: Any = [
            None if code < 0 else names[code]
            for code in class_rule.class_codes(outputs[0]).tolist()
        ]
    elif len(outputs) == 1:
        value = _output_json(outputs[0], levels)
    else:
        value = {o["name"]: _output_json(part, levels) for o, part in zip(served.outputs, outputs)}
    answer: Record = {"predictions": value}
    if warnings:
        answer["warnings"] = warnings
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def metadata(served: Service) -> Record:
    """What GET /metadata answers: the input (its form; its columns with their types and
    levels, the shape of a row of numbers, taken as float32, or "texts": an array of
    strings; for an image model how its images were read, size, color mode and rescale, and
    the pixel range it takes), the outputs, the rules, the limits, the versions."""
    part = served.part
    names = columns_of(part)
    if part["type"] == "data.frame":
        columns: list[Record] | None = []
        for name in names or []:
            spec = part["columns"][name]
            entry: Record = {"name": name, "type": spec["type"]}
            if spec["type"] == "factor":
                entry["levels"] = list(spec["levels"])
            columns.append(entry)  # type: ignore[union-attr]
        form = "records"
    elif names:
        columns, form = [{"name": name, "type": "numeric"} for name in names], "records or rows"
    elif part["type"] == "text":  # a KerasHub preset's model, which tokenizes them
        columns, form = None, "texts"
    else:
        columns, form = None, "rows"
    described: Record = {"form": form}
    if columns is not None:
        described["columns"] = columns
    if not names and part.get("shape") is not None:
        described.update(shape=part["shape"], dtype="float32")
    from gpukeras.core.runtime import config

    keras = config.keras()
    versions = dict(served.settings.get("versions") or {})
    versions.update(
        python=".".join(str(v) for v in sys.version_info[:3]),
        keras=str(keras.__version__),
        backend=str(keras.backend.backend()),
    )
    result: Record = {
        "input": described,
        "outputs": [{"name": o["name"], "shape": o["shape"]} for o in served.outputs],
    }
    if served.levels:
        result["classes"] = [str(level) for level in served.levels]
    result.update(
        na=(served.encoding or {}).get("na") or "error",
        unknown_levels=served.settings.get("unknown") or "error",
        max_rows=served.max_rows,
        max_bytes=served.max_bytes,
        token_required=served.settings.get("token") is not None,
        versions=versions,
    )
    images = (served.encoding or {}).get("images")
    if images:
        result["input"]["image"] = {
            "size": list(images["image_size"]),
            "color_mode": images["color_mode"],
            "rescale": images.get("rescale"),
        }
        result["input"]["pixels"] = [0, 255 * float(images.get("rescale") or 1)]
    return result
