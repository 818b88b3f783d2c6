"""gpu_report()'s facts (issue #27, item 1): the CUDA libraries a process maps, the variables
that decide devices, and what a fresh ``python -c`` of the same Python sees beside this one."""

from __future__ import annotations

import ctypes.util
import os

import pytest

from gpukeras.tools import report

MAPS = """\
7f00-7f01 r-xp 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6
7f02-7f03 r-xp 00000000 08:01 2 /opt/venv/nvidia/cudnn/lib/libcudnn.so.9
7f03-7f04 r--p 00001000 08:01 2 /opt/venv/nvidia/cudnn/lib/libcudnn.so.9
7f04-7f05 r-xp 00000000 08:01 3 /usr/local/cuda/lib64/libcudart.so.12.4.127
7f06-7f07 r-xp 00000000 08:01 4 /opt/venv/nvidia/nccl/lib/libnccl.so.2
7f08-7f09 r-xp 00000000 08:01 5 /opt/venv/nvidia/cublas/lib/libcublasLt.so.12
7f0a-7f0b rw-p 00000000 00:00 0 [heap]
7f0c-7f0d r-xp 00000000 08:01 6 /usr/lib/libcudaextra.so.1
"""


def test_cuda_libraries_are_read_from_the_maps_once_each_with_their_versions() -> None:
    found = report.loaded_cuda_libraries(MAPS)
    assert [(row["library"], row["version"]) for row in found] == [
        ("cublasLt", "12"),
        ("cudart", "12.4.127"),
        ("cudnn", "9"),
        ("nccl", "2"),
    ]
    assert found[1]["path"] == "/usr/local/cuda/lib64/libcudart.so.12.4.127"


def test_a_library_linked_to_a_versioned_file_gets_that_version(tmp_path) -> None:
    real = tmp_path / "libcudart.so.12.8.90"
    real.write_bytes(b"")
    link = tmp_path / "libcudart.so.12"
    link.symlink_to(real)
    maps = f"7f00-7f01 r-xp 00000000 08:01 1 {link}\n"
    assert report.loaded_cuda_libraries(maps)[0]["version"] == "12.8.90"


def test_this_process_maps_are_read() -> None:
    # No CUDA here, or some: either way a list of rows that each name a mapped file.
    for row in report.loaded_cuda_libraries():
        assert os.path.isabs(str(row["path"]))
    if ctypes.util.find_library("cudart") is None:
        assert all(row["library"] != "cudart" for row in report.loaded_cuda_libraries())


def test_the_variables_that_decide_devices_are_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    found = report.environment()
    assert found["CUDA_VISIBLE_DEVICES"] == "1"
    assert found["XLA_FLAGS"].startswith("--xla")
    assert "UNRELATED_SECRET" not in found


def test_python_c_sees_the_same_python_and_what_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    seen = report.python_sees()
    here, fresh = seen["here"], seen["fresh"]
    assert "error" not in fresh, fresh
    assert fresh["executable"] == here["executable"]
    assert fresh["cuda_visible_devices"] == "" == here["cuda_visible_devices"]
    assert fresh["keras"]  # imported there, whatever this process imported
    assert fresh.get("tensorflow_gpus", []) == [] or "jax_devices" in fresh


def test_a_python_that_does_not_answer_is_reported_not_raised() -> None:
    fresh = report.python_sees(timeout=0.01)["fresh"]
    assert fresh["error"].startswith("TimeoutExpired")
