"""Score exported models as a server would, in a fresh Python that never imports gpukeras.

Usage: python serve_export.py REQUEST.json ANSWER.json

REQUEST: {"savedmodels": {label: {"path": folder, "requests": {name: {column: [values]}}}},
          "onnx": {"path": file, "rows": [[...], ...]}}  (either part may be absent)
ANSWER:  {"savedmodels": {label: {"signature": {input: dtype}, "answers": {name:
          {"outputs": {output: values}, "dtypes": {output: dtype}} or {"error": message}}}},
          "onnx": {"inputs": [...], "outputs": [values of the first output]},
          "gpukeras_imported": bool}

A SavedModel is read with tf.saved_model.load() alone, its signature serving_default
called with each column as a tensor of the dtype the signature declares; an ONNX file
is run by an onnxruntime session on the encoded rows.
"""

import json
import sys

import numpy as np


def saved_model_answers(spec):
    import tensorflow as tf

    served = tf.saved_model.load(spec["path"]).signatures["serving_default"]
    inputs = served.structured_input_signature[1]
    found = {"signature": {name: inputs[name].dtype.name for name in inputs}, "answers": {}}
    for name, columns in spec["requests"].items():
        tensors = {
            column: tf.constant(np.asarray(values, dtype=inputs[column].dtype.as_numpy_dtype))
            if inputs[column].dtype != tf.string
            else tf.constant([str(v) for v in values])
            for column, values in columns.items()
        }
        try:
            outputs = served(**tensors)
        except Exception as error:  # the request fails, as a server's would
            found["answers"][name] = {"error": str(error)}
            continue
        found["answers"][name] = {
            "outputs": {
                key: [v.decode() if isinstance(v, bytes) else v for v in value.numpy().tolist()]
                for key, value in outputs.items()
            },
            "dtypes": {key: value.dtype.name for key, value in outputs.items()},
        }
    return found


def onnx_answer(spec):
    import onnxruntime

    session = onnxruntime.InferenceSession(spec["path"], providers=["CPUExecutionProvider"])
    rows = np.asarray(spec["rows"], dtype=np.float32)
    first = session.get_inputs()[0].name
    return {
        "inputs": [i.name for i in session.get_inputs()],
        "outputs": session.run(None, {first: rows})[0].tolist(),
    }


def main():
    with open(sys.argv[1], encoding="utf-8") as file:
        request = json.load(file)
    answer = {
        "savedmodels": {
            label: saved_model_answers(spec)
            for label, spec in request.get("savedmodels", {}).items()
        }
    }
    if request.get("onnx"):
        answer["onnx"] = onnx_answer(request["onnx"])
    answer["gpukeras_imported"] = any(name.startswith("gpukeras") for name in sys.modules)
    with open(sys.argv[2], "w", encoding="utf-8") as file:
        json.dump(answer, file)


if __name__ == "__main__":
    main()
