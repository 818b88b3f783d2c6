"""core.files.write_atomic: a file written whole or not at all, on the real file system."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gpukeras.core.files import write_atomic


def listing(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir())


def test_text_and_bytes_become_the_file_private_by_default(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    write_atomic(target, "é\n")
    assert target.read_bytes() == "é\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    write_atomic(target, b"\x00\x01", mode=0o640, sync=True)
    assert target.read_bytes() == b"\x00\x01"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert listing(tmp_path) == ["a.txt"]


def test_no_mode_gives_what_the_umask_gives_a_new_file(tmp_path: Path) -> None:
    before = os.umask(0o027)
    try:
        write_atomic(tmp_path / "a.txt", "x", mode=None)
    finally:
        os.umask(before)
    assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o640


def test_a_writer_writes_the_temporary_file_named_as_asked(tmp_path: Path) -> None:
    seen: list[str] = []

    def write(temp: str) -> None:
        seen.append(os.path.basename(temp))
        Path(temp).write_text("written")

    write_atomic(tmp_path / "m.keras", write, prefix=".saving-", suffix=".keras")
    assert (tmp_path / "m.keras").read_text() == "written"
    assert seen[0].startswith(".saving-") and seen[0].endswith(".keras")
    write_atomic(tmp_path / "n.csv", write)
    assert seen[1].startswith(f".n.csv.tmp-{os.getpid()}-")


def test_a_failed_writer_leaves_the_old_file_and_no_temporary_one(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")

    def fail(temp: str) -> None:
        Path(temp).write_text("half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, fail)
    assert target.read_text() == "old"
    assert listing(tmp_path) == ["a.txt"]


def test_without_replace_an_existing_file_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    write_atomic(target, "first", replace=False)
    assert target.read_text() == "first"
    with pytest.raises(FileExistsError):
        write_atomic(target, "second", replace=False)
    assert target.read_text() == "first"
    assert listing(tmp_path) == ["a.txt"]
