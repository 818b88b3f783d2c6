"""An image folder as a gpu_dataset() source: one sub-folder per class, images decoded as read.

Every file is checked to be an image tf.io.decode_image reads (by its first
bytes) when the source is made, so a stray file is a classed error before
training rather than a failed batch in the middle of an epoch.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

import numpy as np

from gpukeras.core.errors import (
    BadArgumentError,
    BadImageError,
    DataFieldsError,
    MissingFilesError,
)
from gpukeras.core.handles import Record, Tensor
from gpukeras.data.encoding import MESSAGE_LEVELS, image_encoding
from gpukeras.data.source_files import Source, expand, quoted, tensorflow

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
# The formats tf.io.decode_image reads, by the bytes their files start with.
IMAGE_MAGIC = {
    "PNG": (b"\x89PNG\r\n\x1a\n",),
    "JPEG": (b"\xff\xd8\xff",),
    "GIF": (b"GIF87a", b"GIF89a"),
    "BMP": (b"BM",),
}
COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}
IMAGE_LAYOUT = "folder/class_a/image1.png, folder/class_b/image2.jpg, ..."


def _image_format(path: str) -> str | None:
    """'PNG', 'JPEG', 'GIF' or 'BMP' from a file's first bytes; None for anything else."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(16)
    except OSError:
        return None  # unreadable: reported with the files that are not images
    for name, starts in IMAGE_MAGIC.items():
        if head.startswith(starts):
            return name
    return None


def _check_image_size(image_size: Any) -> tuple[int, int]:
    try:
        height, width = (int(side) for side in image_size)
        whole = all(float(side) == int(side) for side in image_size)
    except (TypeError, ValueError):
        height, width, whole = 0, 0, False
    if not whole or height < 1 or width < 1:
        raise BadArgumentError(
            f"image_size must be two whole numbers >= 1, c(height, width), not {image_size!r}."
        )
    return height, width


def _to_channels(tf: ModuleType, image: Tensor, channels: int) -> Tensor:
    """A float image of 1 (gray), 2 (gray, alpha), 3 (RGB) or 4 (RGBA) channels as ``channels``.

    Gray becomes RGB by repeating it, RGB becomes gray by luma weights
    (tf.image.rgb_to_grayscale), a missing alpha channel is opaque (255).
    """
    count = tf.shape(image)[-1]
    has_color = count >= 3
    if channels == 1:
        return tf.cond(
            has_color, lambda: tf.image.rgb_to_grayscale(image[..., :3]), lambda: image[..., :1]
        )
    rgb = tf.cond(
        has_color, lambda: image[..., :3], lambda: tf.image.grayscale_to_rgb(image[..., :1])
    )
    if channels == 3:
        return rgb
    alpha = tf.cond(
        tf.equal(count % 2, 0),
        lambda: image[..., -1:],
        lambda: tf.fill(tf.shape(image[..., :1]), 255.0),
    )
    return tf.concat([rgb, alpha], axis=-1)


def _check_rescale(rescale: object) -> float | None:
    if rescale is None:
        return None
    if (
        not isinstance(rescale, (int, float))
        or isinstance(rescale, bool)
        or not 0 < rescale < float("inf")
    ):
        raise BadArgumentError(
            f"rescale must be one positive number (1/255 gives pixels in [0, 1]), not {rescale!r}."
        )
    return float(rescale)


def _loader(
    tf: ModuleType, size: tuple[int, int], channels: int, scale: float | None
) -> Callable[[Tensor], Tensor]:
    """Decode one image file (a path tensor), resize it and scale it, as the sources give it."""

    def image_of(file: Tensor) -> Tensor:
        # Decoded with the file's own channels (1 to 4), then converted here:
        # decode_image cannot convert every format (a BMP to 1 channel, a JPEG to 4).
        image = tf.io.decode_image(tf.io.read_file(file), expand_animations=False)
        image = tf.image.resize(_to_channels(tf, tf.cast(image, tf.float32), channels), size)
        if scale is not None:
            image = image * scale
        image.set_shape((*size, channels))
        return image

    return image_of


def image_files_source(
    files: list[str],
    image_size: tuple[int, int] = (64, 64),
    color_mode: str = "rgb",
    rescale: object = None,
) -> Source:
    """Stream unlabelled images, in the order given: new images to score (predict() of a
    flat folder, or of image paths), read as a training folder's images were.

    Each file's first bytes are checked here: a file that is missing or not an image
    fails now, named, not in the middle of scoring.

    Returns:
        A Source of images alone whose info holds files, rows, image_size,
        color_mode, channels, rescale and pixel_range.
    """
    size = _check_image_size(image_size)
    scale = _check_rescale(rescale)
    if color_mode not in COLOR_MODES:
        raise BadArgumentError(
            f'color_mode must be "rgb", "grayscale" or "rgba", not "{color_mode}".'
        )
    paths = [expand(str(file)) for file in files]
    if not paths:
        raise MissingFilesError("No image files were given to score.")
    missing = [file for file in paths if not os.path.isfile(file)]
    if missing:
        raise MissingFilesError(
            f"{len(missing)} image file(s) do not exist: {', '.join(map(repr, missing[:5]))}."
        )
    bad = [file for file in paths if _image_format(file) is None]
    if bad:
        raise BadImageError(
            f"{len(bad)} file(s) are not PNG, JPEG, GIF or BMP images (or cannot be read), "
            f"whatever their names say: {', '.join(map(repr, bad[:5]))}."
        )
    tf = tensorflow()
    channels = COLOR_MODES[color_mode]
    dataset = tf.data.Dataset.from_tensor_slices(paths).map(
        _loader(tf, size, channels, scale), num_parallel_calls=tf.data.AUTOTUNE
    )
    return Source(
        dataset,
        "image_files",
        {
            "files": len(paths),
            "rows": len(paths),
            "image_size": list(size),
            "color_mode": color_mode,
            "channels": channels,
            "rescale": scale,
            "pixel_range": [0.0, 255.0 * (scale or 1.0)],
        },
    )


def pixel_range(images: Mapping[str, Any], highest: float, request: bool = False) -> list[Record]:
    """The warning (class "pixel_range") for images to score whose pixels reach ``highest``,
    plainly not in the range an image folder read as ``images`` (its encoding's) was trained
    in: above 0-255 times its ``rescale``, or within [0, 1] when it was not rescaled. The
    message's lines: what is wrong, then how to scale them, in predict()'s words, or in an
    HTTP client's where ``request`` (the service's rows); none when they fit. Images given
    as numbers (predict()'s R arrays, the service's rows) are scored as they are, not rescaled.
    """
    rescale = images.get("rescale")
    top = 255 * (rescale or 1)
    factor = top / 255 if highest > top * 1.01 else 255 if rescale is None and highest <= 1 else 1
    if factor == 1:
        return []
    what, fix = (
        (
            "The request's",
            f"multiply each pixel by {factor:.4g} before sending them "
            "(/metadata's input.pixels is the range the model takes)",
        )
        if request
        else ("`newdata`'s", f"predict(fit, newdata * {factor:.4g})")
    )
    message = [
        f"{what} pixels reach {highest:.4g}, but the model was trained on pixels in "
        f"[0, {top:.4g}]: its predictions would mean little.",
        f"Scale them as in training: {fix}.",
    ]
    return [{"class": "pixel_range", "message": message}]


def images_to_score(paths: list[str]) -> dict[str, list[str] | None]:
    """What predict() scores of image ``paths`` (one folder, or files): ``files``, the
    images directly in the one folder given (sorted by name, hidden files left out, each
    named folder/file however many slashes end the folder's path), or the paths as given;
    None for a folder of class sub-folders alone, read labelled as a training folder is.
    A folder of neither is a MissingFilesError that says what predict() takes."""
    folder = paths[0] if len(paths) == 1 else ""
    if not folder or not os.path.isdir(expand(folder)):
        return {"files": list(paths)}
    folder = folder.rstrip("/") or "/"
    root = expand(folder)
    names = sorted(name for name in os.listdir(root) if not name.startswith("."))
    folders = {name for name in names if os.path.isdir(os.path.join(root, name))}
    images = [
        os.path.join(folder, name)
        for name in names
        if name not in folders and name.lower().endswith(IMAGE_EXTENSIONS)
    ]
    if images or folders:
        return {"files": images or None}
    raise MissingFilesError(
        f"The folder '{folder}' (`newdata`) holds no images ({', '.join(IMAGE_EXTENSIONS)}): "
        "predict() takes a folder of the images themselves, or their file paths; evaluate() "
        "a folder of class sub-folders, as the training folder was."
    )


def _folder_identity(folder: str) -> tuple[int, int]:
    """The folder itself, whatever link led to it: its device and inode."""
    found = os.stat(folder)
    return found.st_dev, found.st_ino


def _class_folders(root: str, path: str, class_names: list[str] | None) -> list[str]:
    """The classes, in label order: the sub-folders sorted by name, or ``class_names``
    (the training data's, which must hold every sub-folder: else DataFieldsError
    gpukeras_error_new_levels, fields ``column`` "class" and ``levels``, the new ones)."""
    found = sorted(
        entry.name
        for entry in os.scandir(root)
        if entry.is_dir() and not entry.name.startswith(".")
    )
    if class_names is None:
        return found
    names = [str(name) for name in class_names]
    new = [name for name in found if name not in names]
    if new:
        raise DataFieldsError(
            f"The image folder '{path}' has class folders the training data did not have: "
            f"{quoted(new)}.",
            [f"The model knows {quoted(names[:MESSAGE_LEVELS])}."],
            ["gpukeras_error_new_levels"],
            column="class",
            levels=new,
        )
    return names


def image_folder_source(
    path: str,
    image_size: tuple[int, int] = (64, 64),
    color_mode: str = "rgb",
    rescale: object = None,
    class_names: list[str] | None = None,
) -> Source:
    """Stream labelled images from a folder with one sub-folder per class.

    Class names are the sub-folders sorted by name, and a label is its class's
    index (int32). Images are found by extension (png, jpg, jpeg, bmp, gif, any
    case, also in nested folders), other files are skipped, and the file list
    is sorted: shuffling is the pipeline's job. Each file's first bytes are
    checked here, so a file that is not an image fails now, not mid-epoch.

    Each image is decoded, resized (bilinear) to ``image_size`` and returned as
    float32 in [0, 255], shape (height, width, channels), times ``rescale`` when
    given (1/255 for [0, 1]). Animated GIFs give their first frame.

    Args:
        path: the folder.
        image_size: (height, width) every image is resized to.
        color_mode: "rgb" (3 channels), "grayscale" (1) or "rgba" (4).
        rescale: a factor the pixels are multiplied by, or None.
        class_names: the classes in label order (new data scored as the training
            folder was labelled); None for the sub-folders sorted by name.

    Returns:
        A Source whose info holds path, files, rows, class_names, class_counts,
        image_size, color_mode, channels, rescale, pixel_range, skipped_files (not
        images by name), the classes as the labels' ``vocabulary``, the folder's
        ``encoding`` (``encoding.image_encoding``) and ``warnings``: for a training
        folder (``class_names`` None), its class folders without an image, which are
        kept as classes as a factor keeps a level no row has (``empty_classes``).
    """
    size = _check_image_size(image_size)
    scale = _check_rescale(rescale)
    if color_mode not in COLOR_MODES:
        raise BadArgumentError(
            f'color_mode must be "rgb", "grayscale" or "rgba", not "{color_mode}".'
        )
    root = expand(path)
    if not os.path.exists(root):
        raise MissingFilesError(
            f"The image folder '{path}' does not exist (a relative path starts at the "
            f"working directory, {os.getcwd()}). Expected one sub-folder per class: "
            f"{IMAGE_LAYOUT}"
        )
    if not os.path.isdir(root):
        raise MissingFilesError(
            f"'{path}' is a file, not a folder. Give the folder that holds one sub-folder "
            f"per class: {IMAGE_LAYOUT}"
        )
    training = class_names is None
    class_names = _class_folders(root, path, class_names)
    if not class_names:
        raise MissingFilesError(
            f"The image folder '{path}' has no sub-folders; each class needs its own: "
            f"{IMAGE_LAYOUT}"
        )
    paths: list[str] = []
    labels: list[int] = []
    counts: list[int] = []
    skipped = 0
    # Links to folders are followed, each folder visited once: a link back up the tree
    # made 8 images 168, and two such links walked for minutes to 4.6 GB of file names.
    seen: set[tuple[int, int]] = set()
    for class_index, name in enumerate(class_names):
        found = []
        for folder, subfolders, names in os.walk(os.path.join(root, name), followlinks=True):
            identity = _folder_identity(folder)
            if identity in seen:
                subfolders[:] = []
                continue
            seen.add(identity)
            subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
            for file_name in sorted(names):
                if file_name.startswith("."):
                    continue
                if file_name.lower().endswith(IMAGE_EXTENSIONS):
                    found.append(os.path.join(folder, file_name))
                else:
                    skipped += 1
        paths.extend(found)
        labels.extend([class_index] * len(found))
        counts.append(len(found))
    if not paths:
        raise MissingFilesError(
            f"No images ({', '.join(IMAGE_EXTENSIONS)}) in the class folders of '{path}' "
            f"({quoted(class_names)}). Expected: {IMAGE_LAYOUT}"
        )
    bad = [file for file in paths if _image_format(file) is None]
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise BadImageError(
            f"{len(bad)} file(s) in '{path}' are not PNG, JPEG, GIF or BMP images (or cannot be "
            f"read), whatever their names say: {', '.join(map(repr, bad[:5]))}{more}. "
            "Remove them from the folder, or convert them to PNG or JPEG."
        )

    tf = tensorflow()
    channels = COLOR_MODES[color_mode]
    image_of = _loader(tf, size, channels, scale)

    def load(file: Tensor, label: Tensor) -> tuple[Tensor, Tensor]:
        return image_of(file), label

    dataset = tf.data.Dataset.from_tensor_slices((paths, np.asarray(labels, dtype=np.int32))).map(
        load, num_parallel_calls=tf.data.AUTOTUNE
    )
    return Source(
        dataset,
        "image_folder",
        {
            "path": path,
            "files": len(paths),
            "rows": len(paths),
            "label": "class",
            "class_names": class_names,
            "class_counts": counts,
            "image_size": list(size),
            "color_mode": color_mode,
            "channels": channels,
            "rescale": scale,
            "pixel_range": [0.0, 255.0 * (scale or 1.0)],
            "skipped_files": skipped,
            "vocabulary": {"y": class_names},
            "encoding": image_encoding(class_names, size, channels, color_mode, scale),
            "warnings": empty_classes(path, class_names, counts) if training else [],
        },
    )


def empty_classes(path: str, class_names: list[str], counts: list[int]) -> list[Record]:
    """The warning (class "empty_levels", as for a factor's level no row has) for a training
    folder's class folders that hold no image: they are kept, a class of the labels, a unit
    of the model's output and a column of predict()'s; none when every class has images."""
    empty = [name for name, count in zip(class_names, counts) if count == 0]
    if not empty:
        return []
    message = [
        f"The image folder '{path}' has {len(empty)} class folder(s) without images: "
        f"{quoted(empty)}.",
        f"They are kept as classes: the model needs an output of {len(class_names)} units, "
        "one per class, and predict() gives each class a column. Remove the empty folder(s) "
        "to train without them.",
    ]
    return [{"class": "empty_levels", "message": message}]
