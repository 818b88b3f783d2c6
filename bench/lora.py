"""KerasHub's own side of bench/lora.R (issue #79's GPU goal): a causal LM's preset with random
weights, its token ids, and KerasHub's own ``fit()`` of it with LoRA, timed.

Two steps, each in a fresh process so that each one's GPU memory peak is its own:

- ``prepare --folder F --size gemma3_1b|tiny``: a Gemma3 causal LM of gemma3_1b's
  configuration (26 layers, hidden 1152, 4 query heads and 1 key-value head of 256,
  intermediate 6912, a 262,144-token vocabulary, a sliding window of 512: the published
  preset's config.json) or a tiny one for a smoke run, built with random weights under the
  ``bfloat16`` policy and saved with KerasHub's own ``save_to_preset()`` into ``F/preset``
  without a preprocessor (the machines that run this have no TensorFlow, which KerasHub's
  tokenizers need: token ids go in); and ``F/token_ids.npy``, ``rows`` sequences of
  ``length + 1`` random token ids (the inputs are the first ``length``, the targets the
  last, as KerasHub's own preprocessor shifts them);
- ``keras-hub --folder F --batch B --epochs E --rank R``: KerasHub's ``CausalLM.from_preset``
  under ``bfloat16``, ``backbone.enable_lora(rank=R)``, compiled as gpu_causal_lm() compiles
  it (KerasHub's default loss and metric, Adam at 5e-5), then ``model.fit()`` on the arrays
  (KerasHub batches them itself: Grain where TensorFlow is absent): a warm-up call of one
  epoch, then a timed call of E epochs; the device's peak memory read from JAX
  (``memory_stats()``).

Both steps may be named in one process (a smoke run: nothing is measured there). The result
is printed as one JSON line.

Run by bench/lora.R (which runs the same fine-tune from R and compares them); not alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "jax")

# gemma3_1b's configuration, from its published config.json (HF gemma-3-1b; KerasHub's
# convert_gemma3 maps the names), and a tiny one of the same architecture for a smoke run
SIZES: dict[str, dict[str, Any]] = {
    "gemma3_1b": {
        "vocabulary_size": 262144,
        "num_layers": 26,
        "num_query_heads": 4,
        "num_key_value_heads": 1,
        "hidden_dim": 1152,
        "intermediate_dim": 6912,
        "head_dim": 256,
        "sliding_window_size": 512,
    },
    "tiny": {
        "vocabulary_size": 256,
        "num_layers": 2,
        "num_query_heads": 2,
        "num_key_value_heads": 1,
        "hidden_dim": 64,
        "intermediate_dim": 128,
        "head_dim": 32,
        "sliding_window_size": 16,
    },
}


def prepare(folder: Path, size: str, rows: int, length: int, seed: int) -> dict[str, Any]:
    """Write ``folder/preset`` (random weights, bfloat16) and ``folder/token_ids.npy``."""
    import keras
    import keras_hub

    keras.config.set_dtype_policy("bfloat16")
    keras.utils.set_random_seed(seed)
    began = time.perf_counter()
    backbone = keras_hub.models.Gemma3Backbone(
        image_size=None,
        query_head_dim_normalize=True,
        use_query_key_norm=True,
        use_post_ffw_norm=True,
        use_post_attention_norm=True,
        use_sliding_window_attention=True,
        **SIZES[size],
    )
    model = keras_hub.models.Gemma3CausalLM(backbone=backbone, preprocessor=None)
    model.save_to_preset(str(folder / "preset"))
    ids = np.random.default_rng(seed).integers(
        1, SIZES[size]["vocabulary_size"], size=(rows, length + 1), dtype=np.int32
    )
    np.save(folder / "token_ids.npy", ids)
    return {"parameters": int(backbone.count_params()), "seconds": time.perf_counter() - began}


def peak_bytes() -> int | None:
    """The first device's peak memory in use since this process started (None on a CPU)."""
    import jax

    return (jax.devices()[0].memory_stats() or {}).get("peak_bytes_in_use")


def keras_hub_fit(folder: Path, batch: int, epochs: int, rank: int) -> dict[str, Any]:
    """KerasHub's own fit() of the preset with LoRA at ``rank``: a warm-up fit() of one epoch
    (XLA compiles the step), then a timed fit() of ``epochs`` epochs, each call's seconds."""
    import keras
    import keras_hub

    keras.config.set_dtype_policy("bfloat16")
    ids = np.load(folder / "token_ids.npy")
    x = {"token_ids": ids[:, :-1], "padding_mask": np.ones_like(ids[:, :-1])}
    y = ids[:, 1:]
    model = keras_hub.models.CausalLM.from_preset(str(folder / "preset"))
    model.backbone.enable_lora(rank=rank)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=5e-5))
    seconds = []
    for n in (1, epochs):
        began = time.perf_counter()
        history = model.fit(x, y, batch_size=batch, epochs=n, verbose=0)
        seconds.append(time.perf_counter() - began)
    return {
        "warmup_seconds": seconds[0],
        "seconds": seconds[1],
        "tokens": int(y.size) * epochs,
        "loss": [float(v) for v in history.history["loss"]],
        "trainable": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
        "weights_dtype": str(model.backbone.weights[0].dtype),
        "peak_bytes": peak_bytes(),
        "keras_hub": keras_hub.__version__,
        "keras": keras.__version__,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps", nargs="+", choices=["prepare", "keras-hub"])
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--size", choices=sorted(SIZES), default="gemma3_1b")
    parser.add_argument("--rows", type=int, default=128)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    result: dict[str, Any] = {}
    if "prepare" in args.steps:
        result["prepare"] = prepare(args.folder, args.size, args.rows, args.length, args.seed)
    if "keras-hub" in args.steps:
        result["keras_hub"] = keras_hub_fit(args.folder, args.batch, args.epochs, args.rank)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
