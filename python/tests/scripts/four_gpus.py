"""Setup code for a fresh Python: NVML shows a node with four GPUs (``nvml_double``),
in PCI bus order, the first one of the name and compute capability given."""

import sys

from nvml_double import FakeGpu, fake_pynvml


def install(first: str = "NVIDIA H100 80GB HBM3", capability: tuple[int, int] = (9, 0)) -> None:
    """Put the double in pynvml's place, before gpukeras imports it."""
    sys.modules["pynvml"] = fake_pynvml(
        [
            FakeGpu(
                name=first,
                uuid="GPU-aaaa0000-0000-0000-0000-000000000000",
                capability=capability,
                pci_bus_id="00000000:17:00.0",
            ),
            FakeGpu(uuid="GPU-bbbb0000-0000-0000-0000-000000000000", pci_bus_id="00000000:65:00.0"),
            FakeGpu(uuid="GPU-cccc0000-0000-0000-0000-000000000000", pci_bus_id="00000000:B1:00.0"),
            FakeGpu(uuid="GPU-dddd0000-0000-0000-0000-000000000000", pci_bus_id="00000000:CA:00.0"),
        ]
    )
