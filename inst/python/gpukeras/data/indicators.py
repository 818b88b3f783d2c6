"""A data.frame's indicator columns where they are made (issue #76): the one rule of a
one-hot factor's columns (``indicator_table``, applied by ``expand`` with NumPy, jax.numpy or
TensorFlow's NumPy), the coded form a frame is kept in until then (``FrameCodes``: its number
columns and each one-hot factor's int32 codes), and the host's aligned matrix, filled a block
of rows at a time. ``encoding`` makes the coded form from R's columns; the device's adapter
(``data.adapters.resident``) and the pipeline (``data.pipeline``) expand it inside the step
or as batches are gathered, and where an array is wanted it is expanded on the host once."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

# The matrix is filled a block of rows at a time (the block's rows in cache while each
# column is written), in threads from this many rows (NumPy releases the GIL).
BLOCK_ROWS = 65536
PARALLEL_ROWS = 4 * BLOCK_ROWS
THREADS = min(4, os.cpu_count() or 1)
# TensorFlow's CPU kernels want tensor memory aligned to 64 bytes (array_source.py).
ALIGNMENT = 64


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialized C-ordered array of ``shape`` and ``dtype`` whose memory starts at a
    multiple of ALIGNMENT bytes, so that a tensor can share it."""
    size = math.prod(shape) * dtype.itemsize
    buffer = np.empty(size + ALIGNMENT, dtype=np.uint8)
    start = -buffer.ctypes.data % ALIGNMENT
    return buffer[start : start + size].view(dtype).reshape(shape)


def in_blocks(fill: Callable[[int], None], count: int) -> None:
    """``fill(begin)`` for each block of BLOCK_ROWS rows, in threads from PARALLEL_ROWS rows."""
    starts = range(0, count, BLOCK_ROWS)
    if count < PARALLEL_ROWS or THREADS < 2:
        for begin in starts:
            fill(begin)
    else:
        with ThreadPoolExecutor(THREADS, thread_name_prefix="gpukeras-encode") as pool:
            list(pool.map(fill, starts))


def indicator_table(levels: int) -> np.ndarray:
    """A one-hot factor's indicator columns, by table index (``levels + 2`` rows x ``levels``,
    float32): row k (a level) 1 in column k, row ``levels`` (an unseen level scored with
    ``unknown = "zero"``) all 0, row ``levels + 1`` (NA) all NaN. The one definition of the
    indicator columns: ``expand`` takes them from here wherever they are made."""
    table = np.zeros((levels + 2, levels), np.float32)
    table[np.arange(levels), np.arange(levels)] = 1
    table[levels + 1] = np.nan
    return table


def expand(dense: Any, codes: Any, layout: Sequence[tuple[str, int, int]], xp: Any) -> Any:
    """The model's columns from a frame's coded form (``FrameCodes``): ``dense`` (rows x its
    number and code columns, float32) and ``codes`` (rows x its one-hot factors, int32 table
    indices), in ``layout``'s order (``("dense", first column, width)`` or ``("one_hot",
    factor, levels)``), each one-hot factor its ``indicator_table`` rows (rows along every axis
    but the last: a chunk of batches expands as a batch does). ``xp``: the array
    module the arrays are of (numpy, jax.numpy, tf.experimental.numpy): the same expansion
    on the host, inside a step on the device, or in a tf.data map."""
    pieces = [
        dense[..., at : at + width]
        if kind == "dense"
        else xp.take(indicator_table(width), codes[..., at], axis=0)
        for kind, at, width in layout
    ]
    return pieces[0] if len(pieces) == 1 else xp.concatenate(pieces, axis=-1)


class FrameCodes:
    """A data.frame with one-hot factors as it is kept until its indicator columns are needed:
    ``dense`` (rows x its number and code columns, float32, aligned), ``codes`` (rows x its
    one-hot factors: each row's ``indicator_table`` index, int32: 4 bytes a row per factor)
    and ``layout`` (``expand``'s). ``width``: the model columns it becomes.

    Where an array is wanted (``np.asarray``) it is the float32 matrix ``encode_frame`` gives,
    made on the host once; rows trained on the device keep this form there and expand each
    batch inside the step (``data.adapters.resident``)."""

    def __init__(
        self, dense: np.ndarray, codes: np.ndarray, layout: list[tuple[str, int, int]]
    ) -> None:
        self.dense = dense
        self.codes = codes
        self.layout = layout
        self.width = sum(width for _, _, width in layout)
        self._host: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.dense)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.dense), self.width)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    @property
    def ndim(self) -> int:
        return 2

    @property
    def nbytes(self) -> int:
        """The bytes this form holds (its dense columns and codes)."""
        return int(self.dense.nbytes + self.codes.nbytes)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        host = self.host()
        return host if dtype is None else host.astype(dtype, copy=False)

    def host(self) -> np.ndarray:
        """The float32 matrix (rows x ``width``, C order, aligned), made once, a block of
        rows at a time."""
        if self._host is None:
            count = len(self)
            matrix = aligned_empty((count, self.width), np.dtype(np.float32))

            def fill(begin: int) -> None:
                block = slice(begin, min(begin + BLOCK_ROWS, count))
                matrix[block] = self.rows(block)

            in_blocks(fill, count)
            self._host = matrix
        return self._host

    def rows(self, rows: slice | np.ndarray) -> np.ndarray:
        """Some of the rows expanded on the host (a model's build reads a batch of them)."""
        matrix: np.ndarray = expand(self.dense[rows], self.codes[rows], self.layout, np)
        return matrix

    def na_codes(self) -> np.ndarray:
        """Each one-hot factor's NA index (``indicator_table``'s NaN row)."""
        return np.array([width + 1 for kind, _, width in self.layout if kind == "one_hot"])

    def missing_rows(self) -> np.ndarray:
        """Which rows hold NA (a NaN among the dense columns, NA in a one-hot factor)."""
        return np.isnan(self.dense).any(axis=1) | (self.codes == self.na_codes()).any(axis=1)


def split_codes(x: object) -> tuple[object, object]:
    """Features ``x`` (an array, a ``FrameCodes``, or a dict of them by input) as the arrays
    they are kept as (a ``FrameCodes`` as its ``(dense, codes)``), and their expansion: what
    ``expand_inputs`` needs to make a batch of those the model's ``x`` (hashable; None where
    nothing is coded)."""
    if isinstance(x, FrameCodes):
        return (x.dense, x.codes), tuple(x.layout)
    if isinstance(x, dict):
        split = {name: split_codes(part) for name, part in x.items()}
        layouts = tuple((name, layout) for name, (_, layout) in split.items() if layout is not None)
        return {name: kept for name, (kept, _) in split.items()}, layouts or None
    return x, None


def expand_inputs(kept: Any, expansion: Any, xp: Any) -> Any:
    """A batch of features kept as ``split_codes`` keeps them, as the model's ``x``: each
    coded frame ``expand``-ed with ``xp`` (its array module), arrays as they are."""
    if expansion is None:
        return kept
    if isinstance(kept, dict):
        layouts = dict(expansion)
        return {
            name: expand(part[0], part[1], layouts[name], xp) if name in layouts else part
            for name, part in kept.items()
        }
    return expand(kept[0], kept[1], expansion, xp)


def rows_of(part: object, rows: slice) -> object:
    """Some rows of features or labels (an array, a ``FrameCodes`` expanded on the host, or a
    dict of them by input)."""
    if isinstance(part, dict):
        return {name: rows_of(value, rows) for name, value in part.items()}
    return part.rows(rows) if isinstance(part, FrameCodes) else part[rows]  # type: ignore[index]


def is_coded(part: object) -> bool:
    """Whether features hold a ``FrameCodes`` (as one array, or as one input of a dict)."""
    if isinstance(part, dict):
        return any(isinstance(value, FrameCodes) for value in part.values())
    return isinstance(part, FrameCodes)


def host_form(part: object) -> object:
    """Features as Keras reads arrays on the host (an array, or a dict of them by input): each
    ``FrameCodes`` its float32 matrix (``np.asarray``), made there once."""
    if isinstance(part, dict):
        return {name: host_form(value) for name, value in part.items()}
    return np.asarray(part) if isinstance(part, FrameCodes) else part
