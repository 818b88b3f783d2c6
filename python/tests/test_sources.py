"""sources: CSV files, an image folder and TFRecord files, streamed through tf.data.

Every test writes real files into tmp_path and reads them back through the
source's dataset; the errors are the classed ones R turns into conditions.
"""

from __future__ import annotations

import csv
import math
import struct
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from conftest import requires, run_core  # noqa: E402
from gpukeras.core import errors  # noqa: E402
from gpukeras.data import encoding, sources  # noqa: E402


def elements(source: sources.Source) -> list[object]:
    """Every element of a source's dataset, as NumPy."""
    return list(source.dataset.as_numpy_iterator())


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# CSV -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        (["a,b,y", "1,2,0"] + ["3,4,1"] * 150 + ["5,6,1,7"], "Line 153 of .* has 4 fields, but"),
        (["a,b,y", "1,2,0", "3,4"], "Line 3 of .* has 2 fields, but the header has 3"),
        (["a,b\x00,y", "1,2,0"], "Line 1 of .* NUL byte .* UTF-8"),
        (["a,b,y", "1,2,0", "1,\x00,1"], "Line 3 of .* NUL byte"),
        (["a,b,y", "1,2,0", "4,\"" + "x" * 140_000 + "\",1"], "Line 3 of .* longer than 131,072"),
        (["a,b,y", "1,\"2", "5\",0"], "Line 2 of .* quoted field that goes on to line 3"),
    ],
    ids=["an extra field after the sample", "a field short", "NUL in the header", "NUL in a row",
         "a field too long", "a line break in quotes"],
)  # fmt: skip
def test_a_csv_row_tensorflow_would_misread_is_refused_naming_file_and_line(
    tmp_path: Path, lines: list[str], words: str
) -> None:
    """Every row is read once before training: TensorFlow reads the fields it is asked for
    from each line, so an extra field was dropped without a word."""
    path = tmp_path / "data.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(errors.BadDataError, match=words):
        sources.csv_source(str(path), label="y")


def test_csv_rows_are_counted_over_every_file_blank_lines_left_out(tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", ["a", "y"], [[1, 0], [2, 1]])
    (tmp_path / "b.csv").write_text("a,y\n3,0\n\n4,1\n5,0\n", encoding="utf-8")
    assert sources.csv_source(str(tmp_path / "*.csv"), label="y").info["rows"] == 5


def test_csv_rows_stream_as_float_features_and_integer_label(tmp_path: Path) -> None:
    rows = [[0.5, -2, 1], [1.25, 3e3, 0], [7, 8.5, 2]]
    path = write_csv(tmp_path / "train.csv", ["a", "b", "y"], rows)
    source = sources.csv_source(str(path), label="y")
    assert source.kind == "csv"
    assert source.info == {
        "pattern": str(path),
        "files": 1,
        "columns": ["a", "b"],
        "label": "y",
        "label_dtype": "int32",
        "rows": 3,
        "sampled_rows": 3,
    }
    spec = source.dataset.element_spec
    assert spec[0].shape == (2,) and spec[0].dtype == tf.float32
    assert spec[1].shape == () and spec[1].dtype == tf.int32
    got = elements(source)
    assert len(got) == 3
    features, label = got[0]
    np.testing.assert_array_equal(features, np.array([0.5, -2.0], dtype=np.float32))
    assert features.dtype == np.float32 and label == 1 and label.dtype == np.int32
    np.testing.assert_array_equal([g[0] for g in got], np.array(rows)[:, :2].astype(np.float32))
    assert [int(g[1]) for g in got] == [1, 0, 2]


def test_csv_glob_folder_and_files_stream_every_row(tmp_path: Path) -> None:
    for part in range(3):
        rows = [[part * 10 + i, (part * 10 + i) / 4] for i in range(5)]
        write_csv(tmp_path / "data" / f"part{part}.csv", ["x", "target"], rows)
    (tmp_path / "data" / "notes.txt").write_text("not data")
    by_glob = sources.csv_source(str(tmp_path / "data" / "part*.csv"), label="target")
    by_folder = sources.csv_source(str(tmp_path / "data"), label="target")
    for source in (by_glob, by_folder):
        assert source.info["files"] == 3
        assert source.info["label_dtype"] == "float32"
        got = sorted((float(x[0]), float(y)) for x, y in elements(source))
        assert got == [(v, v / 4) for v in sorted(p * 10 + i for p in range(3) for i in range(5))]


def test_csv_without_label_gives_features_alone(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "x.csv", ["a", "b", "c"], [[1, 2, 3], [4, 5, 6]])
    source = sources.csv_source(str(path))
    assert source.info["columns"] == ["a", "b", "c"]
    assert source.info["label"] is None and source.info["label_dtype"] is None
    got = elements(source)
    assert isinstance(got[0], np.ndarray)
    np.testing.assert_array_equal(np.stack(got), [[1, 2, 3], [4, 5, 6]])


def test_csv_columns_choose_features_in_the_given_order_and_skip_text(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "x.csv",
        ["id", "city", "a", "b", "y"],
        [[1, "Paris", 2.5, 3.5, 0.25], [2, "Oslo", 4.5, 5.5, 0.75]],
    )
    source = sources.csv_source(str(path), label="y", columns=["b", "a"])
    assert source.info["columns"] == ["b", "a"]
    assert source.info["label_dtype"] == "float32"
    (f1, y1), (f2, y2) = elements(source)
    np.testing.assert_array_equal(f1, [3.5, 2.5])
    np.testing.assert_array_equal(f2, [5.5, 4.5])
    assert (y1, y2) == (np.float32(0.25), np.float32(0.75))
    # R passes a length-1 character vector as a string.
    single = sources.csv_source(str(path), columns="a")
    np.testing.assert_array_equal(np.stack(elements(single)), [[2.5], [4.5]])


def test_csv_missing_feature_is_nan_and_missing_label_stops_iteration(tmp_path: Path) -> None:
    path = tmp_path / "gaps.csv"
    path.write_text("a,b,y\n1,,0\nNA,2,1\n\n3,4,1\n")
    source = sources.csv_source(str(path), label="y")
    got = elements(source)
    assert len(got) == 3  # the blank line is not a row
    assert math.isnan(got[0][0][1]) and got[0][0][0] == 1  # empty field: NaN, never 0
    assert math.isnan(got[1][0][0]) and got[1][0][1] == 2  # R's NA: NaN
    np.testing.assert_array_equal(got[2][0], [3, 4])
    no_label = tmp_path / "no_label.csv"
    no_label.write_text("a,y\n1,0\n2,\n")
    with pytest.raises(tf.errors.InvalidArgumentError, match="required but missing"):
        elements(sources.csv_source(str(no_label), label="y"))


def test_csv_windows_line_endings_and_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "win.csv"
    path.write_bytes(b"\xef\xbb\xbfa,y\r\n1.5,2\r\n2.5,3\r\n")
    source = sources.csv_source(str(path), label="y")
    assert source.info["columns"] == ["a"]
    assert [(float(x[0]), int(y)) for x, y in elements(source)] == [(1.5, 2), (2.5, 3)]


def test_csv_text_columns_are_bad_data_with_the_fix(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "x.csv", ["a", "city", "y"], [[1, "Paris", 0], [2, "Oslo", 1]])
    with pytest.raises(errors.BadDataError) as raised:
        sources.csv_source(str(path), label="y")
    message = str(raised.value)
    assert raised.value.r_class == "gpukeras_error_bad_data"
    assert '"city"' in message and '"Paris"' in message
    assert 'columns = c("a")' in message and "read.csv()" in message and "data.frame" in message
    text_label = write_csv(tmp_path / "t.csv", ["a", "species"], [[1, "setosa"]])
    with pytest.raises(errors.BadDataError, match=r'label column "species".*"setosa".*read\.csv'):
        sources.csv_source(str(text_label), label="species")


def test_csv_unknown_names_list_the_columns(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "x.csv", ["a", "b", "y"], [[1, 2, 3]])
    with pytest.raises(errors.BadArgumentError) as raised:
        sources.csv_source(str(path), label="z")
    assert raised.value.r_class == "gpukeras_error_bad_argument"
    assert str(raised.value).startswith('label = "z" is not a column of')
    assert 'Columns: "a", "b", "y".' in str(raised.value)
    with pytest.raises(errors.BadArgumentError, match=r'columns "c", "d" not found.*"a", "b"'):
        sources.csv_source(str(path), label="y", columns=["a", "c", "d"])
    with pytest.raises(errors.BadArgumentError, match='"y" is the label; leave it out'):
        sources.csv_source(str(path), label="y", columns=["a", "y"])


def test_csv_files_with_another_header_are_bad_data(tmp_path: Path) -> None:
    write_csv(tmp_path / "a.csv", ["x", "y"], [[1, 2]])
    odd = write_csv(tmp_path / "b.csv", ["x", "z"], [[1, 2]])
    with pytest.raises(errors.BadDataError) as raised:
        sources.csv_source(str(tmp_path / "*.csv"), label="y")
    assert f'\'{odd}\' has the header "x", "z"' in str(raised.value)
    assert 'has "x", "y"' in str(raised.value)


def test_csv_row_names_column_from_write_csv_is_bad_data(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "r.csv", ["", "a", "y"], [["1", 2, 0], ["2", 3, 1]])
    with pytest.raises(errors.BadDataError, match=r"Column 1 .* has no name.*row\.names = FALSE"):
        sources.csv_source(str(path), label="y")
    chosen = sources.csv_source(str(path), label="y", columns=["a"])
    assert [float(x[0]) for x, _ in elements(chosen)] == [2.0, 3.0]


def test_missing_csv_files_are_a_missing_files_error(tmp_path: Path) -> None:
    with pytest.raises(errors.MissingFilesError) as raised:
        sources.csv_source(str(tmp_path / "nothing" / "*.csv"))
    assert raised.value.r_class == "gpukeras_error_missing_files"
    assert f"No CSV files match '{tmp_path / 'nothing' / '*.csv'}'" in str(raised.value)
    assert "working directory" in str(raised.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(errors.MissingFilesError, match=r"No CSV files in the folder .*\*\.csv"):
        sources.csv_source(str(tmp_path / "empty"))


# Image folder ----------------------------------------------------------------------------------


def bmp_bytes(pixels: np.ndarray) -> bytes:
    """A 24-bit BMP of an (h, w, 3) uint8 RGB array (bottom-up rows, BGR, padded to 4 bytes)."""
    height, width, _ = pixels.shape
    stride = (width * 3 + 3) // 4 * 4
    body = b"".join(
        pixels[row, :, ::-1].tobytes().ljust(stride, b"\0") for row in range(height - 1, -1, -1)
    )
    info = struct.pack("<IiiHHIIiiII", 40, width, height, 1, 24, 0, len(body), 0, 0, 0, 0)
    return b"BM" + struct.pack("<IHHI", 14 + 40 + len(body), 0, 0, 54) + info + body


@pytest.fixture
def image_folder(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """cats/ (a PNG, a JPEG named .JPG, a BMP), dogs/ (2 PNGs, one nested), a note to skip."""
    rng = np.random.default_rng(7)
    pixels = {}
    root = tmp_path / "pets"
    for name in ("cats/a.png", "cats/b.JPG", "cats/c.bmp", "dogs/d.png", "dogs/more/e.png"):
        image = rng.integers(0, 256, size=(8, 6, 3), dtype=np.uint8)
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".JPG"):
            data = tf.io.encode_jpeg(image, quality=95).numpy()
            image = tf.io.decode_jpeg(data).numpy()  # lossy: expect what the JPEG holds
        elif name.endswith(".bmp"):
            data = bmp_bytes(image)
        else:
            data = tf.io.encode_png(image).numpy()
        target.write_bytes(data)
        pixels[name] = image
    (root / "dogs" / "README.txt").write_text("not an image")
    (root / ".hidden").mkdir()
    return root, pixels


def test_image_folder_labels_follow_sorted_class_folders(image_folder: tuple) -> None:
    root, pixels = image_folder
    source = sources.image_folder_source(str(root), image_size=(8, 6))
    assert source.kind == "image_folder"
    assert source.info == {
        "path": str(root),
        "files": 5,
        "rows": 5,
        "label": "class",
        "class_names": ["cats", "dogs"],
        "class_counts": [3, 2],
        "image_size": [8, 6],
        "color_mode": "rgb",
        "channels": 3,
        "rescale": None,
        "pixel_range": [0.0, 255.0],
        "skipped_files": 1,
        "vocabulary": {"y": ["cats", "dogs"]},
        "encoding": encoding.image_encoding(["cats", "dogs"], (8, 6), 3, "rgb", None),
        "warnings": [],
    }
    spec = source.dataset.element_spec
    assert spec[0].shape == (8, 6, 3) and spec[0].dtype == tf.float32
    assert spec[1].shape == () and spec[1].dtype == tf.int32
    assert int(source.dataset.cardinality()) == 5
    got = elements(source)
    assert [int(label) for _, label in got] == [0, 0, 0, 1, 1]
    # Same size: no resampling, so every file reads back exactly, as floats in [0, 255].
    names = ["cats/a.png", "cats/b.JPG", "cats/c.bmp", "dogs/d.png", "dogs/more/e.png"]
    for (image, _), name in zip(got, names):
        assert image.dtype == np.float32
        np.testing.assert_array_equal(image, pixels[name].astype(np.float32))


def test_image_files_stream_unlabelled_in_the_order_given(image_folder: tuple) -> None:
    root, pixels = image_folder
    files = [str(root / "dogs" / "d.png"), str(root / "cats" / "a.png")]
    source = sources.image_files_source(files, image_size=(8, 6), rescale=0.5)
    assert source.kind == "image_files"
    assert source.info["rows"] == 2 and source.info["pixel_range"] == [0.0, 127.5]
    got = [image for image in source.dataset.as_numpy_iterator()]
    for image, name in zip(got, ["dogs/d.png", "cats/a.png"]):
        np.testing.assert_array_equal(image, pixels[name].astype(np.float32) * 0.5)
    with pytest.raises(errors.MissingFilesError, match="1 image file"):
        sources.image_files_source([*files, str(root / "gone.png")])
    with pytest.raises(errors.BadImageError, match=r"README\.txt"):
        sources.image_files_source([str(root / "dogs" / "README.txt")])
    with pytest.raises(errors.MissingFilesError, match="No image files"):
        sources.image_files_source([])


def test_links_back_up_the_folder_are_followed_once(image_folder: tuple) -> None:
    """A link to a parent (a loop) and a second link to a folder already walked: each
    folder is read once, so the images are the five of the folder, not hundreds."""
    root, _ = image_folder
    (root / "cats" / "loop").symlink_to(root / "cats", target_is_directory=True)
    (root / "dogs" / "more" / "up").symlink_to(root / "dogs", target_is_directory=True)
    (root / "dogs" / "again").symlink_to(root / "dogs" / "more", target_is_directory=True)
    source = sources.image_folder_source(str(root), image_size=(8, 6))
    assert source.info["class_counts"] == [3, 2]
    assert source.info["rows"] == 5


def test_image_folder_resizes_and_converts_to_grayscale(image_folder: tuple) -> None:
    root, pixels = image_folder
    gray = sources.image_folder_source(str(root), image_size=(8, 6), color_mode="grayscale")
    assert gray.info["channels"] == 1
    first = elements(gray)[0][0]
    expected = tf.image.rgb_to_grayscale(pixels["cats/a.png"].astype(np.float32)).numpy()
    np.testing.assert_allclose(first, expected, rtol=1e-6)
    small = sources.image_folder_source(str(root), image_size=[4.0, 5.0], color_mode="grayscale")
    assert small.info["image_size"] == [4, 5]  # R's c(4, 5) arrives as doubles
    images = np.stack([image for image, _ in elements(small)])
    assert images.shape == (5, 4, 5, 1) and images.dtype == np.float32
    assert images.min() >= 0 and images.max() <= 255 and images.max() > 1


def test_image_folder_rescales_and_labels_by_the_training_classes(image_folder: tuple) -> None:
    root, pixels = image_folder
    scaled = sources.image_folder_source(str(root), image_size=(8, 6), rescale=1 / 255)
    assert scaled.info["rescale"] == pytest.approx(1 / 255)
    assert scaled.info["pixel_range"] == pytest.approx([0.0, 1.0])
    first = elements(scaled)[0][0]
    np.testing.assert_allclose(first, pixels["cats/a.png"].astype(np.float32) / 255, rtol=1e-6)
    # New data labelled as the training folder was: its classes in the training order.
    trained = sources.image_folder_source(
        str(root), image_size=(8, 6), class_names=["birds", "dogs", "cats"]
    )
    assert trained.info["class_names"] == ["birds", "dogs", "cats"]
    assert trained.info["class_counts"] == [0, 2, 3]
    assert [int(label) for _, label in elements(trained)] == [1, 1, 2, 2, 2]
    with pytest.raises(errors.DataFieldsError, match='did not have: "cats"') as refused:
        sources.image_folder_source(str(root), image_size=(8, 6), class_names=["dogs"])
    assert refused.value.r_classes == ["gpukeras_error_new_levels"]
    assert refused.value.fields == {"column": "class", "levels": ["cats"]}
    assert refused.value.details == ['The model knows "dogs".']
    with pytest.raises(errors.BadArgumentError, match="rescale must be one positive number"):
        sources.image_folder_source(str(root), image_size=(8, 6), rescale=-1)


def test_a_training_folders_class_folder_without_images_is_kept_and_warned_of(
    image_folder: tuple,
) -> None:
    """As a factor's level no row has: a class of the labels (a unit of the output), said by
    gpu_dataset() with the class of that warning; a new folder labelled by the training
    classes lacks some without a word."""
    from gpukeras.data import pipeline

    root, _ = image_folder
    (root / "owls").mkdir()
    (root / "owls" / "notes.txt").write_text("not an image")
    source = {"path": str(root), "image_size": [8, 6]}
    built = pipeline.from_source("image_folder", source, batch_size=2, shuffle=False)
    assert built["info"]["class_names"] == ["cats", "dogs", "owls"]
    assert built["info"]["encoding"]["y"]["levels"] == ["cats", "dogs", "owls"]
    [said] = built["warnings"]
    assert said["class"] == "empty_levels"
    assert said["message"][0] == (
        f"The image folder '{root}' has 1 class folder(s) without images: \"owls\"."
    )
    assert "an output of 3 units, one per class" in said["message"][1]
    labelled = {**source, "class_names": ["cats", "dogs", "owls"]}
    assert pipeline.from_source("image_folder", labelled, batch_size=2)["warnings"] == []


def test_image_channels_are_converted_whatever_the_file_holds(tmp_path: Path) -> None:
    """Gray, RGBA and JPEG files in one folder, read in every color mode."""
    rng = np.random.default_rng(3)
    gray = rng.integers(0, 256, size=(4, 4, 1), dtype=np.uint8)
    rgba = rng.integers(0, 256, size=(4, 4, 4), dtype=np.uint8)
    folder = tmp_path / "mixed" / "only"
    folder.mkdir(parents=True)
    (folder / "1_gray.png").write_bytes(tf.io.encode_png(gray).numpy())
    (folder / "2_rgba.png").write_bytes(tf.io.encode_png(rgba).numpy())
    jpeg = tf.io.encode_jpeg(rng.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)).numpy()
    (folder / "3_photo.jpeg").write_bytes(jpeg)
    decoded_jpeg = tf.io.decode_jpeg(jpeg).numpy().astype(np.float32)

    def read(mode: str) -> list[np.ndarray]:
        source = sources.image_folder_source(str(tmp_path / "mixed"), (4, 4), mode)
        return [image for image, _ in elements(source)]

    g, a, j = read("rgb")
    np.testing.assert_array_equal(g, np.repeat(gray, 3, axis=-1).astype(np.float32))
    np.testing.assert_array_equal(a, rgba[..., :3].astype(np.float32))
    np.testing.assert_array_equal(j, decoded_jpeg)
    g, a, j = read("rgba")
    assert g.shape == a.shape == j.shape == (4, 4, 4)
    np.testing.assert_array_equal(a, rgba.astype(np.float32))
    assert (j[..., 3] == 255).all() and (g[..., 3] == 255).all()
    np.testing.assert_array_equal(j[..., :3], decoded_jpeg)
    g, a, _ = read("grayscale")
    np.testing.assert_array_equal(g, gray.astype(np.float32))
    assert a.shape == (4, 4, 1)


def test_bad_image_file_is_a_bad_image_error(image_folder: tuple) -> None:
    root, _ = image_folder
    corrupt = root / "dogs" / "broken.png"
    corrupt.write_bytes(np.random.default_rng(1).integers(0, 256, 64, dtype=np.uint8).tobytes())
    (root / "cats" / "empty.jpg").write_bytes(b"")
    with pytest.raises(errors.BadImageError) as raised:
        sources.image_folder_source(str(root))
    message = str(raised.value)
    assert raised.value.r_class == "gpukeras_error_bad_image"
    assert message.startswith("2 file(s) in")
    assert repr(str(corrupt)) in message and "empty.jpg" in message
    assert "Remove them from the folder, or convert them to PNG or JPEG." in message


def test_image_folder_layout_errors_say_the_expected_layout(tmp_path: Path) -> None:
    layout = "folder/class_a/image1.png"
    with pytest.raises(errors.MissingFilesError) as raised:
        sources.image_folder_source(str(tmp_path / "nowhere"))
    assert raised.value.r_class == "gpukeras_error_missing_files"
    assert "does not exist" in str(raised.value) and layout in str(raised.value)
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.png").write_bytes(
        tf.io.encode_png(np.zeros((2, 2, 3), np.uint8)).numpy()
    )
    with pytest.raises(errors.MissingFilesError, match=f"has no sub-folders.*{layout}"):
        sources.image_folder_source(str(tmp_path / "flat"))
    with pytest.raises(errors.MissingFilesError, match=f"is a file, not a folder.*{layout}"):
        sources.image_folder_source(str(tmp_path / "flat" / "a.png"))
    (tmp_path / "textonly" / "cats").mkdir(parents=True)
    (tmp_path / "textonly" / "cats" / "a.txt").write_text("x")
    with pytest.raises(errors.MissingFilesError, match=f'No images .*"cats".*{layout}'):
        sources.image_folder_source(str(tmp_path / "textonly"))


def test_pixels_plainly_out_of_the_training_range_are_warned_of_with_the_scale() -> None:
    """One rule for predict()'s R arrays and the service's rows: above 0-255 times rescale
    (by more than 1%), or within [0, 1] for a folder not rescaled."""
    from gpukeras.data.image_source import pixel_range

    scaled = encoding.image_encoding(["a", "b"], (4, 4), 3, "rgb", 1 / 255)["images"]
    [said] = pixel_range(scaled, 254.9)
    assert said == {
        "class": "pixel_range",
        "message": [
            "`newdata`'s pixels reach 254.9, but the model was trained on pixels in [0, 1]: "
            "its predictions would mean little.",
            "Scale them as in training: predict(fit, newdata * 0.003922).",
        ],
    }
    assert pixel_range(scaled, 1.0) == [] and pixel_range(scaled, 1.009) == []
    raw = encoding.image_encoding(["a", "b"], (4, 4), 3, "rgb", None)["images"]
    assert pixel_range(raw, 0.98)[0]["message"][1].endswith("predict(fit, newdata * 255).")
    assert pixel_range(raw, 200.0) == []


def test_images_to_score_are_a_flat_folders_images_named_cleanly_or_the_paths_given(
    tmp_path: Path,
) -> None:
    from gpukeras.data.image_source import images_to_score

    new = tmp_path / "new"
    new.mkdir()
    for name in ("h_2.png", "h_1.PNG", ".hidden.png", "notes.txt"):
        (new / name).write_bytes(b"")
    (new / "sub.png").mkdir()
    folder = str(new)
    # however many slashes end the folder's path: folder/file, not folder//file
    for given in (folder, folder + "/", folder + "//"):
        assert images_to_score([given]) == {"files": [f"{folder}/h_1.PNG", f"{folder}/h_2.png"]}
    paths = [f"{folder}/h_2.png", "gone.png"]
    assert images_to_score(paths) == {"files": paths}
    (tmp_path / "classes" / "cats").mkdir(parents=True)
    assert images_to_score([str(tmp_path / "classes")]) == {"files": None}
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("x")
    with pytest.raises(errors.MissingFilesError) as raised:
        images_to_score([str(tmp_path / "empty") + "/"])
    # what predict() takes, not the class-folder layout of a training folder
    assert str(raised.value) == (
        f"The folder '{tmp_path / 'empty'}' (`newdata`) holds no images (.png, .jpg, .jpeg, "
        ".bmp, .gif): predict() takes a folder of the images themselves, or their file paths; "
        "evaluate() a folder of class sub-folders, as the training folder was."
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"image_size": (0, 4)}, "image_size must be two whole numbers"),
        ({"image_size": (4.5, 4)}, "image_size must be two whole numbers"),
        ({"image_size": 64}, "image_size must be two whole numbers"),
        ({"color_mode": "cmyk"}, 'color_mode must be "rgb", "grayscale" or "rgba", not "cmyk"'),
    ],
)
def test_image_folder_bad_arguments(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(errors.BadArgumentError, match=match):
        sources.image_folder_source(str(tmp_path), **kwargs)


# TFRecord --------------------------------------------------------------------------------------


def write_records(path: Path, records: list[dict[str, object]]) -> Path:
    """TFRecords of tf.train.Example: float lists, int64 lists and bytes lists by Python type."""

    def feature(values: list) -> tf.train.Feature:
        if isinstance(values[0], float):
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        if isinstance(values[0], bytes):
            return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))

    options = "GZIP" if path.suffix == ".gz" else None
    with tf.io.TFRecordWriter(str(path), options=options) as writer:
        for record in records:
            features = {name: feature(values) for name, values in record.items()}
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
    return path


def records(count: int, start: int = 0) -> list[dict[str, object]]:
    return [
        {
            "pixels": [float(i), i + 0.5, -float(i)],
            "weight": [i / 8],
            "id": [b"row-%d" % i],
            "class": [i % 3],
        }
        for i in range(start, start + count)
    ]


def test_tfrecord_features_round_trip_with_a_label(tmp_path: Path) -> None:
    write_records(tmp_path / "a.tfrecord", records(4))
    write_records(tmp_path / "b.tfrecord", records(3, start=4))
    source = sources.tfrecord_source(str(tmp_path / "*.tfrecord"), label="class")
    assert source.kind == "tfrecord"
    assert source.info == {
        "pattern": str(tmp_path / "*.tfrecord"),
        "files": 2,
        "features": [
            {"name": "id", "dtype": "string", "shape": []},
            {"name": "pixels", "dtype": "float32", "shape": [3]},
            {"name": "weight", "dtype": "float32", "shape": [1]},
        ],
        "label": "class",
        "label_dtype": "int32",
        "rows": None,
        "compression": None,
        "skipped_features": [],
    }
    features_spec, label_spec = source.dataset.element_spec
    assert label_spec.dtype == tf.int32 and label_spec.shape == ()
    assert features_spec["pixels"].shape == (3,) and features_spec["weight"].shape == (1,)
    got = sorted(elements(source), key=lambda element: element[0]["id"])
    assert len(got) == 7
    for i, (features, label) in enumerate(got):
        assert features["id"] == b"row-%d" % i
        np.testing.assert_array_equal(features["pixels"], [i, i + 0.5, -i])
        assert features["pixels"].dtype == np.float32
        np.testing.assert_array_equal(features["weight"], [i / 8])
        assert label == i % 3 and label.dtype == np.int32


def test_tfrecord_without_label_and_gzip(tmp_path: Path) -> None:
    write_records(tmp_path / "part.tfrecord.gz", records(2))
    source = sources.tfrecord_source(str(tmp_path))
    assert source.info["compression"] == "GZIP"
    assert [f["name"] for f in source.info["features"]] == ["class", "id", "pixels", "weight"]
    first = elements(source)[0]
    assert isinstance(first, dict)
    assert first["class"].shape == (1,) and first["class"].dtype == np.int32
    np.testing.assert_array_equal(first["pixels"], [0.0, 0.5, 0.0])


def test_tfrecord_errors(tmp_path: Path) -> None:
    with pytest.raises(errors.MissingFilesError, match="No TFRecord files match"):
        sources.tfrecord_source(str(tmp_path / "*.tfrecord"))
    path = write_records(tmp_path / "a.tfrecord", records(1))
    with pytest.raises(errors.BadArgumentError) as raised:
        sources.tfrecord_source(str(path), label="target")
    assert str(raised.value) == (
        f"label = \"target\" is not a feature of '{path}'. "
        'Features: "class", "id", "pixels", "weight".'
    )
    not_records = tmp_path / "x.tfrecord"
    not_records.write_text("a,b\n1,2\n" * 10)
    with pytest.raises(errors.BadDataError) as raised:
        sources.tfrecord_source(str(not_records))
    assert raised.value.r_class == "gpukeras_error_bad_data"
    assert f"Could not read a record from '{not_records}'" in str(raised.value)
    assert "Is it a TFRecord file" in str(raised.value)
    empty = tmp_path / "none.tfrecord"
    write_records(empty, [])
    with pytest.raises(errors.BadDataError, match="hold no records"):
        sources.tfrecord_source(str(empty))


# Without TensorFlow, and on the JAX backend -----------------------------------------------------


def test_importing_sources_does_not_start_tensorflow() -> None:
    run = run_core("core.runtime:configured_backend", after="import gpukeras.data.sources")
    assert run.result["ok"] is True
    assert "tensorflow" not in run.loaded and "keras" not in run.loaded


def test_missing_tensorflow_is_a_classed_error_with_the_install_hint(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "x.csv", ["a"], [[1]])
    run = run_core(
        "data.sources:csv_source",
        {"pattern": str(path)},
        env={"KERAS_BACKEND": "jax"},
        setup="sys.modules['tensorflow'] = None",
    )
    assert run.result["r_class"] == "gpukeras_error_tensorflow_missing"
    assert run.result["message"].startswith(
        "gpu_dataset() builds tf.data pipelines, which need TensorFlow (also when "
        "the Keras backend is jax)"
    )
    assert "install_gpukeras()" in run.result["message"]


def test_csv_source_on_the_jax_backend(tmp_path: Path) -> None:
    """tf.data reads the files while JAX trains: TensorFlow starts with its GPUs hidden."""
    path = write_csv(tmp_path / "x.csv", ["a", "b", "y"], [[1.5, 2, 7], [3, 4.5, 8]])
    after = f"""
from gpukeras.data import sources
source = sources.csv_source({str(path)!r}, label="y")
import tensorflow as tf
readback["rows"] = [[x.tolist(), int(y)] for x, y in source.dataset.as_numpy_iterator()]
readback["tensorflow_gpus"] = len(tf.config.get_visible_devices("GPU"))
"""
    requires("jax")
    run = run_core("start", env={"KERAS_BACKEND": "jax"}, after=after)
    assert run.value["backend"] == "jax"
    assert "oneDNN" not in run.stderr and "absl" not in run.stderr  # started quietly
    assert run.readback["rows"] == [[[1.5, 2.0], 7], [[3.0, 4.5], 8]]
    assert run.readback["tensorflow_gpus"] == 0


@pytest.mark.gpu
def test_on_jax_gpu_setup_after_a_file_source_is_refused(tmp_path: Path) -> None:
    """A file source on JAX starts TensorFlow, which lists (and hides) its GPUs: CUDA starts,
    so CUDA_VISIBLE_DEVICES written by a later gpu_setup(devices = ) would change nothing."""
    requires("jax")
    if not tf.test.is_built_with_cuda():
        pytest.skip("a CPU-only TensorFlow does not start CUDA")
    path = write_csv(tmp_path / "x.csv", ["a", "y"], [[1.5, 7]])
    after = f"""
from gpukeras.data import sources
from gpukeras.gpu import cuda_driver
readback["before"] = cuda_driver.started()
sources.csv_source({str(path)!r}, label="y")
readback["after"] = cuda_driver.started()
readback["setup"] = bridge.call("setup", {{"devices": ["CPU:0"]}})
"""
    run = run_core("core.runtime:configured_backend", env={"KERAS_BACKEND": "jax"}, after=after)
    assert (run.readback["before"], run.readback["after"]) == (False, True)
    refused = run.readback["setup"]
    assert refused["r_class"] == "gpukeras_error_runtime_started"
    assert "call gpu_setup() before gpu_dataset()" in refused["message"]
