from __future__ import annotations

import pytest

from gpuaudit.domain.power import POWER_SPECS, spec_for


@pytest.mark.parametrize(
    ("model", "max_w"),
    [
        ("NVIDIA H100 80GB HBM3", 700.0),
        ("NVIDIA-H100-80GB-HBM3", 700.0),
        ("NVIDIA H100 PCIe", 350.0),
        ("NVIDIA H100 NVL", 400.0),
        ("NVIDIA-H100-NVL", 400.0),
        ("NVIDIA H200 NVL", 600.0),
        ("NVIDIA A100-SXM4-80GB", 400.0),
        ("NVIDIA A100 80GB PCIe", 300.0),
        ("NVIDIA A100-PCIE-40GB", 250.0),
        ("NVIDIA L40S", 350.0),
        ("NVIDIA L4", 72.0),
        ("Tesla T4", 70.0),
        ("Tesla V100-SXM2-16GB", 300.0),
    ],
)
def test_models_by_whole_words(model: str, max_w: float) -> None:
    spec = spec_for(model)
    assert spec is not None and spec.max_w == max_w


@pytest.mark.parametrize("model", ["NVIDIA A10G", "NVIDIA GH200 480GB", "NVIDIA GB200", "", "x"])
def test_unknown_models_have_no_figures(model: str) -> None:
    assert spec_for(model) is None


def test_idle_under_max_everywhere() -> None:
    assert all(0 < s.idle_w < s.max_w for s in POWER_SPECS.values())
