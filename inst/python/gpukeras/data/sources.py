"""File sources for gpu_dataset(): CSV files, an image folder, TFRecord files, streamed.

Each source is an *unbatched* ``tf.data.Dataset`` that reads its files as it
is iterated, so data larger than memory trains without ever calling back into
R; ``pipeline`` then maps, caches, shuffles, batches and prefetches it.
Everything that can be checked cheaply is checked when the source is made
(files exist, CSV headers agree, column types, image magic bytes, the first
TFRecord), so a user mistake is a classed error with the fix before training
starts, not a TensorFlow error in the middle of an epoch.

tf.data needs TensorFlow whatever the Keras backend; TensorFlow is imported
only when a source is made, never when this module is imported.

One module per kind of source (``csv_source``, ``image_source``,
``tfrecord_source``), on what they share (``source_files``); this module
names them all, as ``pipeline.from_source`` and R reach them.
"""

from __future__ import annotations

from gpukeras.data.csv_source import csv_source
from gpukeras.data.image_source import image_files_source, image_folder_source
from gpukeras.data.source_files import Source, tensorflow
from gpukeras.data.tfrecord_source import tfrecord_source

__all__ = [
    "Source",
    "csv_source",
    "image_files_source",
    "image_folder_source",
    "tensorflow",
    "tfrecord_source",
]
