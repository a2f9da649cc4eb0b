"""The scrape interval measured before a live collection (`discovery.interval_from_counts`,
`interval_query`) and the refusal of a `--step` below it (`interface.check_step`)."""

from __future__ import annotations

import pytest

from gpuaudit.core.errors import ConfigError
from gpuaudit.sources.interface import check_step, span
from gpuaudit.sources.prometheus.discovery import (
    ScrapeInterval,
    interval_from_counts,
    interval_query,
)


def test_every_gpu_with_the_same_count_gives_the_interval_exactly() -> None:
    got = interval_from_counts({12: 60}, 3600)
    assert got == ScrapeInterval(seconds=300.0, at_least=3600 / 13, gpus=60)


def test_an_interval_that_does_not_divide_the_range_is_the_mean_count() -> None:
    # 57 s: 63 or 64 samples an hour, depending on where a GPU's scrapes fall.
    got = interval_from_counts({63: 84, 64: 16}, 3600)
    assert got is not None
    assert got.seconds == pytest.approx(3600 / 63.16)
    assert got.at_least < 57 < got.seconds * 1.01


def test_missed_scrapes_and_young_gpus_do_not_move_it() -> None:
    # Most GPUs have 60 samples (60 s); a few missed a scrape or two (rarer than a tenth of
    # the most common count: left out), a node came up late.
    got = interval_from_counts({60: 500, 59: 20, 58: 2, 31: 8, 5: 1}, 3600)
    assert got == ScrapeInterval(seconds=60.0, at_least=3600 / 61, gpus=531)


def test_no_counts_tell_nothing() -> None:
    assert interval_from_counts({}, 3600) is None
    assert interval_from_counts({0: 4}, 3600) is None


def test_the_query_counts_each_gpu_over_two_hours_of_its_series() -> None:
    q = interval_query("DCGM_FI_DEV_GPU_UTIL", 'cluster="a"', "UUID", 3600)
    assert q == (
        'count_values("samples", sum by (UUID, GPU_I_ID) '
        '(count_over_time(DCGM_FI_DEV_GPU_UTIL{cluster="a"}[3600s])) and on (UUID, GPU_I_ID) '
        'sum by (UUID, GPU_I_ID) (count_over_time(DCGM_FI_DEV_GPU_UTIL{cluster="a"}[3600s] '
        "offset 3600s)))"
    )


@pytest.mark.parametrize(
    ("step_s", "interval", "at_least", "refused"),
    [
        (120, 300.0, 3600 / 13, True),
        (300, 300.0, 3600 / 13, False),
        (280, 300.0, 3600 / 13, False),  # within one sample an hour of the measured interval
        (600, 300.0, 3600 / 13, False),
        (30, 60.0, None, True),
    ],
)
def test_check_step_refuses_only_what_the_counts_rule_out(
    step_s: int, interval: float, at_least: float | None, refused: bool
) -> None:
    if not refused:
        check_step(step_s, interval, at_least_s=at_least)
        return
    with pytest.raises(ConfigError) as exc:
        check_step(step_s, interval, at_least_s=at_least)
    assert str(exc.value).startswith(f"--step {span(step_s)} is shorter than the scrape interval")
