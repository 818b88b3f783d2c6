"""The OpenAPI description of the service, from the encoding.

Contract. ``predict_spec(served)`` is the description of ``POST /predict``: its ``type``
query, its body's JSON schema (the model's columns with their JSON types, a factor's
levels as an enum, as records or as columns; rows of numbers for a model of a matrix or
array) and its answers. gpu_api() sets it into plumber's description; ``document(served)``
is the whole description gpu_serve()'s server answers at ``GET /openapi.json``.
"""

from __future__ import annotations

import json
from typing import Any

from gpukeras.core.handles import Record
from gpukeras.serve.service_body import Served, columns_of


def _column(spec: Record, nullable: bool) -> Record:
    cell: Record
    if spec["type"] == "numeric":
        cell = {"type": "number"}
    elif spec["type"] == "logical":
        cell = {"type": "boolean"}
    else:
        cell = {"type": "string", "enum": list(spec["levels"])}
    return {**cell, "nullable": True} if nullable else cell


def request_schema(served: Served) -> Record:
    """The JSON schema of a request's body for the served input."""
    part = served.part
    nullable = (served.encoding or {}).get("na", "error") != "error"
    numbers = {"type": "number"}
    rows = {
        "type": "array",
        "items": {"type": "array", "items": numbers},
        "minItems": 1,
        "maxItems": served.max_rows,
    }
    names = columns_of(part)
    if part["type"] == "text":
        texts = {"type": "array", "items": {"type": "string"}, "minItems": 1}
        return {**texts, "maxItems": served.max_rows}
    if part["type"] != "data.frame":
        if not names:
            return rows
        columns: dict[str, Any] = {name: dict(numbers) for name in names}
    else:
        columns = {name: _column(part["columns"][name], nullable) for name in names or []}
    record = {"type": "object", "properties": columns, "required": list(columns)}
    arrays = {name: {"type": "array", "items": cell} for name, cell in columns.items()}
    by_column = {"type": "object", "properties": arrays, "required": list(columns)}
    forms: list[Any] = [
        {"type": "array", "items": record, "minItems": 1, "maxItems": served.max_rows},
        by_column,
    ]
    if part["type"] != "data.frame":
        forms.append(rows)
    return {"oneOf": forms}


def predict_spec(served: Served) -> Record:
    """The OpenAPI operation of POST /predict."""
    return {
        "summary": "Predictions of the model for JSON records, columns or rows",
        "parameters": [
            {
                "name": "type",
                "in": "query",
                "required": False,
                "description": '"raw": the model\'s outputs; "class": the classes (see '
                "predict()'s type).",
                "schema": {"type": "string", "enum": ["raw", "class"], "default": "raw"},
            }
        ],
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": request_schema(served)}},
        },
        "responses": {
            "200": {
                "description": '{"predictions": ...}, one entry per row (and "warnings": [...] '
                "where predict() warned)."
            },
            "400": {
                "description": 'A body the model cannot score: {"error", "message"}, and the '
                "column or levels."
            },
            "401": {"description": "A missing or wrong bearer token."},
            "413": {
                "description": f"More than {served.max_rows} rows, or {served.max_bytes} bytes."
            },
        },
    }


def predict_spec_json(served: Served) -> str:
    """``predict_spec`` as JSON text (R reads it with its arrays kept as arrays)."""
    return json.dumps(predict_spec(served))


def document(served: Served) -> Record:
    """The whole OpenAPI document of the service."""
    paths = {route: path for path, route in served.paths.items()}
    return {
        "openapi": "3.0.3",
        "info": {"title": "gpukeras prediction service", "version": "1"},
        "paths": {
            paths["predict"]: {"post": predict_spec(served)},
            paths["metadata"]: {
                "get": {
                    "summary": "The model's inputs, outputs, rules and versions",
                    "responses": {"200": {"description": "The metadata."}},
                }
            },
            paths["health"]: {
                "get": {
                    "summary": "Whether the service answers",
                    "responses": {"200": {"description": '{"status": "ok"}'}},
                }
            },
        },
    }
