"""Power figures by GPU model: the maximum board power (TDP) and an approximate idle draw, the
fallback for judging whether a GPU that shows no engine activity also draws idle power.

Where dcgm-exporter exports `DCGM_FI_DEV_POWER_MGMT_LIMIT` (not in its default counters), the
GPU's own management limit is the maximum and this table gives only the idle draw.

Maximum board power is NVIDIA's published figure for the board (the datasheet's "Max thermal
design power (TDP)" or the product brief's "maximum power"):

- H100 SXM5 700 W, H100 PCIe 350 W, H100 NVL 400 W: NVIDIA H100 Tensor Core GPU datasheet
  (nvidia.com/en-us/data-center/h100), and the H100 PCIe product brief PB-11133-001 ("maximum
  thermal design power (TDP) level of 350 W");
- H200 SXM 700 W, H200 NVL 600 W: NVIDIA H200 Tensor Core GPU datasheet;
- A100 SXM4 400 W, A100 80GB PCIe 300 W, A100 40GB PCIe 250 W: NVIDIA A100 Tensor Core GPU
  datasheet, product briefs PB-10577-001 (80GB PCIe) and PB-10137-001 (40GB PCIe);
- A30 165 W, A10 150 W, A40 300 W: the NVIDIA A30, A10 and A40 datasheets (A40 product brief
  PB-09976-001);
- L40S 350 W, L40 300 W, L4 72 W: the NVIDIA L40S, L40 and L4 datasheets;
- T4 70 W: the NVIDIA T4 datasheet; V100 SXM2 300 W, V100 PCIe 250 W: the NVIDIA V100 datasheet.

The idle figures are APPROXIMATE: the draw of a GPU with nothing running, as commonly reported
by `nvidia-smi` on such boards, rounded. NVIDIA publishes no idle figure; a GPU's real idle
draw varies with its clocks, temperature, firmware and whether a process holds a CUDA context
(which keeps it in a higher performance state: a T4 draws about 10 W in P8 and near 30 W idle in
P0). Checks therefore never compare the draw with the idle figure itself: they ask whether it
lies more than a margin of the span from idle to maximum above it (see `gpuaudit.checks.idle`).
Models not listed have no figures: the power corroboration of their findings is reported as
unavailable, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PowerSpec:
    """The power figures of one GPU model."""

    max_w: float
    """Maximum board power (TDP) in watts, as NVIDIA publishes it."""
    idle_w: float
    """Approximate idle draw in watts (see the module's docstring)."""


POWER_SPECS: dict[str, PowerSpec] = {
    "H100 NVL": PowerSpec(400.0, 60.0),
    "H100 PCIE": PowerSpec(350.0, 50.0),
    "H100": PowerSpec(700.0, 70.0),
    "H200 NVL": PowerSpec(600.0, 70.0),
    "H200": PowerSpec(700.0, 75.0),
    "A100-SXM4": PowerSpec(400.0, 55.0),
    "A100-SXM": PowerSpec(400.0, 55.0),
    "A100 80GB PCIE": PowerSpec(300.0, 45.0),
    "A100-PCIE-80GB": PowerSpec(300.0, 45.0),
    "A100-PCIE-40GB": PowerSpec(250.0, 35.0),
    "A100 PCIE 40GB": PowerSpec(250.0, 35.0),
    "A30": PowerSpec(165.0, 30.0),
    "A40": PowerSpec(300.0, 30.0),
    "A10": PowerSpec(150.0, 20.0),
    "L40S": PowerSpec(350.0, 35.0),
    "L40": PowerSpec(300.0, 35.0),
    "L4": PowerSpec(72.0, 16.0),
    "T4": PowerSpec(70.0, 10.0),
    "V100-SXM2": PowerSpec(300.0, 40.0),
    "V100-PCIE": PowerSpec(250.0, 35.0),
}
"""Power figures by model-name substring (upper case), matched as whole words (see
`spec_for`): the longest key found wins, so an `H100 NVL` is not read as an H100 SXM."""


def _norm(text: str) -> str:
    return text.upper().replace("_", "-")


def spec_for(model: str) -> PowerSpec | None:
    """The power figures of `model` (as DCGM's `modelName` spells it, with or without blanks
    replaced by `-`), or None when no key matches: the longest key found in the name wins.
    A key matches only as whole words (no letter or digit just before or after it), so an
    `A10G` or an `A100` is not read as an A10, an `L40S` as an L40, nor a `GH200` as an H200."""
    name = _norm(model)
    spaced = name.replace("-", " ")
    best_key, best = "", None
    for key, spec in POWER_SPECS.items():
        k = _norm(key)
        if len(k) <= len(best_key):
            continue
        if _whole(k, name) or _whole(k.replace("-", " "), spaced):
            best_key, best = k, spec
    return best


def _whole(key: str, name: str) -> bool:
    """Whether `key` occurs in `name` with no letter or digit just before or after it."""
    at = name.find(key)
    while at >= 0:
        end = at + len(key)
        before = at == 0 or not name[at - 1].isalnum()
        if before and (end == len(name) or not name[end].isalnum()):
            return True
        at = name.find(key, at + 1)
    return False
