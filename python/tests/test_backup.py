"""backup: reading the committed backup of a run (training and resuming are in test_fit.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpukeras import backup
from gpukeras.errors import BackupMismatchError


def commit(folder: Path, weights: str, **fields: object) -> None:
    state = {"epoch": 1, "batches_done": 3, "weights": weights, "generation": 2, **fields}
    (folder / backup.STATE_FILE).write_text(json.dumps(state))


def test_no_state_file_is_a_fresh_start(tmp_path: Path) -> None:
    assert backup.read_state(str(tmp_path)) is None


def test_the_committed_state_is_read_with_its_weights(tmp_path: Path) -> None:
    (tmp_path / "weights-000002.weights.h5").write_bytes(b"")
    commit(tmp_path, "weights-000002.weights.h5", history=[{"epoch": 1, "loss": 0.5}])
    state = backup.read_state(str(tmp_path))
    assert (state.epoch, state.batches_done, state.generation) == (1, 3, 2)
    assert state.history == [{"epoch": 1, "loss": 0.5}]


def test_a_state_naming_missing_weights_says_to_delete_it(tmp_path: Path) -> None:
    commit(tmp_path, "weights-000002.weights.h5")
    with pytest.raises(
        BackupMismatchError, match=r"names weights-000002\.weights\.h5, which is missing"
    ):
        backup.read_state(str(tmp_path))


def test_an_unreadable_state_says_to_delete_it(tmp_path: Path) -> None:
    (tmp_path / backup.STATE_FILE).write_text("{not json")
    with pytest.raises(BackupMismatchError, match="cannot be read"):
        backup.read_state(str(tmp_path))
