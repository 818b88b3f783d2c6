"""Setup code for a fresh Python: the CUDA driver already started, with ``four_gpus``' GPUs.

What gpu_dataset() leaves on JAX: TensorFlow listed its GPUs, so cuInit ran;
JAX has not started.
"""

from nvml_double import FakeLibcuda


def install() -> None:
    """Make gpukeras' CUDA driver calls answer as that started driver does."""
    from gpukeras.gpu import cuda_driver

    cuda_driver.load = lambda: FakeLibcuda(
        [
            (f"GPU-{letter * 4}0000-0000-0000-0000-000000000000", bus)
            for letter, bus in zip(
                "abcd", ["0000:17:00.0", "0000:65:00.0", "0000:b1:00.0", "0000:ca:00.0"]
            )
        ]
    )
