"""gpu_report()'s facts (issue #27, item 1): the CUDA libraries a process maps, the variables
that decide devices, and what a fresh ``python -c`` of the same Python sees beside this one."""

from __future__ import annotations

import ctypes.util
import os
from pathlib import Path

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
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    found = report.environment()
    assert found["CUDA_VISIBLE_DEVICES"] == "1"
    assert found["XLA_FLAGS"].startswith("--xla")
    assert found["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert "UNRELATED_SECRET" not in found


@pytest.mark.parametrize(
    "name",
    [
        "TF_TOKEN_app_terraform_io",  # Terraform's API token
        "TF_VAR_db_password",  # a Terraform input variable
        "TF_CLI_CONFIG_FILE",
        "NVIDIA_API_KEY",  # NVIDIA's API key
        "NVIDIA_NGC_API_KEY",
        "CUDA_SOMETHING_NEW",
        "JAX_COORDINATOR_TOKEN",
    ],
)
def test_variables_outside_the_allow_list_never_reach_the_report(name: str) -> None:
    """Prefixes hold other programs' secrets: only the allow-list is reported."""
    assert report.environment({name: "s3cr3t", "KERAS_BACKEND": "jax"}) == {"KERAS_BACKEND": "jax"}


def test_an_allowed_variable_whose_name_says_secret_is_masked() -> None:
    found = report.environment({"GPUKERAS_API_TOKEN": "s3cr3t", "GPUKERAS_PYTHON": "/x/python"})
    assert found == {"GPUKERAS_API_TOKEN": report.MASKED, "GPUKERAS_PYTHON": "/x/python"}


def test_python_c_does_not_import_from_the_working_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A keras.py in the folder R runs in would shadow the real Keras in ``python -c``."""
    (tmp_path / "keras.py").write_text("raise ImportError('the working folder was on sys.path')\n")
    monkeypatch.chdir(tmp_path)
    fresh = report.python_sees()["fresh"]
    assert "error" not in fresh and "keras_error" not in fresh, fresh
    assert fresh["keras"]


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


def test_a_difference_the_table_marks_comes_with_what_commonly_causes_it() -> None:
    here = {"executable": "/x/python", "python": "3.12.3", "keras_backend": "tensorflow"}
    fresh = {**here, "python": "3.12.1", "cuda_visible_devices": "0", "jax": "0.4"}
    table = report.sees_table({"here": {**here, "cuda_visible_devices": ""}, "fresh": fresh})
    assert table["header"] == ["", "R (this session)", "`python -c`"] and table["lead"] is None
    assert table["rows"] == [
        ["Python executable", "/x/python", "/x/python"],
        ["**Python version** (differs)", "3.12.3", "3.12.1"],
        ["Keras backend", "tensorflow", "tensorflow"],
        ["**CUDA_VISIBLE_DEVICES** (differs)", "", "0"],
        ["JAX", "not imported", "0.4"],  # not imported here: no difference
    ]
    assert len(table["notes"]) == 2
    assert "LD_LIBRARY_PATH" in table["notes"][0]
    assert "CUDA_VISIBLE_DEVICES changed in this session" in table["notes"][1]
    same = report.sees_table({"here": here, "fresh": here})
    assert same["notes"] == [] and not any("differs" in row[0] for row in same["rows"])


def test_without_python_c_the_table_has_rs_side_alone() -> None:
    here = {"executable": "/x/python", "tensorflow_gpus": [], "keras_backend_variable": None}
    alone = report.sees_table({"here": here, "fresh": None})
    assert alone["lead"] == "`python -c` not run (`compare = FALSE`)."
    assert alone["header"] == ["", "R"]
    assert alone["rows"] == [
        ["Python executable", "/x/python"],
        ["GPUs TensorFlow sees", "none"],
        ["KERAS_BACKEND", "unset"],
    ]
    failed = report.sees_table({"here": here, "fresh": {"error": "exit status 1: boom"}})
    assert failed["lead"] == "`python -c` failed: exit status 1: boom"


def test_a_table_cell_keeps_bars_and_line_breaks_out_of_the_table() -> None:
    assert report.markdown_table(["a", "b"], [["x|y", "1\n2"]]) == [
        "| a | b |",
        "| --- | --- |",
        "| x\\|y | 1 2 |",
    ]
    assert report.markdown_items([]) == ["- (none)"]


def test_the_report_has_every_section_from_the_checks_words() -> None:
    check = {
        "gpukeras": "1.0",
        "verdict": "no_gpu",
        "reasons": ["no GPU | here"],
        "advice": [],
        "stack": {
            "r": "4.4",
            "keras": "3.15.1",
            "keras_backend": "jax",
            "jax_build": None,
            "keras_hub": None,
            "os": "Linux",
            "os_release": "6.1",
            "machine": "x86_64",
            "python_executable": "/x/python",
            "python_chosen_by": None,
            "nvidia_driver": "550.1",
            "cuda_driver_version": "12.4",
        },
        "nvml": {
            "available": True,
            "devices": {
                "index": [0, 1],
                "name": ["H100", "A100"],
                "memory_total_mib": [81920.0, float("nan")],
                "visible": [True, False],
                "in_use": [False, None],
            },
        },
        "full": ["<gpukeras check> Verdict: no_gpu"],
    }
    lines = report.report_markdown(check, ["/x/"], ["nobody"], compare=False)
    assert lines[0] == "## gpukeras report"
    assert [line for line in lines if line.startswith("### ")] == [
        "### Verdict: `no_gpu` (no GPU is used)",
        "### Versions",
        "### Which Python R uses",
        "### What R sees, and what `python -c` sees",
        "### CUDA libraries loaded by this process",
        "### NVIDIA driver and GPUs (NVML)",
        "### Environment variables",
    ]
    assert "- no GPU \\| here" in lines and "**Advice**" not in lines
    assert "| R | 4.4 |" in lines and "| OS | Linux 6.1 x86_64 |" in lines
    assert "| Keras | 3.15.1 (backend jax) |" in lines and "| JAX | not installed |" in lines
    assert "| NumPy | none |" in lines and not any("KerasHub" in line for line in lines)
    assert "`~/python`, chosen by an unknown rule (see `?gpukeras_python`)." in lines
    assert "Driver 550.1 (CUDA 12.4)." in lines and "| 0 | H100 | 80.0 GiB | yes | no |" in lines
    assert "| 1 | A100 | ? | no | no |" in lines
    no_nvml = {"available": False, "reason": "no driver", "devices": {}}
    assert "NVML: no driver" in report.report_markdown(
        {**check, "nvml": no_nvml}, [], [], compare=False
    )
    assert "`python -c` not run (`compare = FALSE`)." in lines
    assert lines[-4:] == ["<gpukeras check> Verdict: no_gpu", "```", "", "</details>"]


def test_the_user_name_is_masked_as_a_word_the_home_folder_as_tilde() -> None:
    masked = report.mask_private(
        [
            "/home/alice/.virtualenvs/r-gpukeras/bin/python",
            "run by alice; malice is not alice.x",
            "/opt/alice/lib",
        ],
        ["/home/alice", "/home/alice/"],
        ["alice", "", "alice"],
    )
    assert masked == [
        "~/.virtualenvs/r-gpukeras/bin/python",
        "run by <user>; malice is not <user>.x",
        "/opt/<user>/lib",
    ]


def test_the_home_folder_is_masked_on_path_boundaries_only() -> None:
    lines = ["/home/alice/x", "/home/al/x", "/home/al", "PATH=/home/al/bin:/usr/bin", "`/home/al`"]
    masked = report.mask_private([*lines, "/opt/home/al/x"], ["/home/al"], ["al"])
    assert masked == [
        "/home/alice/x",
        "~/x",
        "~",
        "PATH=~/bin:/usr/bin",
        "`~`",
        "/opt/home/<user>/x",
    ]
    assert report.mask_private(["/usr/bin"], ["/"], []) == ["/usr/bin"]
