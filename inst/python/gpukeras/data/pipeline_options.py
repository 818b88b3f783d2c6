"""What gpu_dataset() asks of a pipeline, and how a source hands its start to it.

``PipelineOptions`` carries gpu_dataset()'s arguments through every step
(``pipeline.build`` says what each does); ``Started`` is what a source gives
back when it starts a pipeline, so ``pipeline`` knows which steps are done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class PipelineOptions:
    """How gpu_dataset() turns a source into batches; see ``pipeline.build`` for each step."""

    batch_size: int = 32
    shuffle: bool = True
    seed: int | None = None
    cache: bool | str = True
    map: Callable | None = None
    augment: dict[str, dict[str, object]] | None = None
    validation_split: float = 0.0
    drop_remainder: bool = False
    deterministic: bool | None = None
    prefetch: str | int = "auto"
    to_device: str = "auto"
    training: bool = True


# How a source starts a pipeline: the dataset, the steps it did when it comes
# batched already (None when not), and the augment presets it ran.
Started = tuple[object, "list[str] | None", "list[str]"]
