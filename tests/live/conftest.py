from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.promserver import Backfilled, backfill, prometheus


@pytest.fixture(scope="session")
def scenario_tsdb(tmp_path_factory: pytest.TempPathFactory) -> Backfilled:
    return backfill(tmp_path_factory.mktemp("scn"), gpus=60, days=2, seed=5, scrape_s=300)


@pytest.fixture(scope="session")
def prom_url(scenario_tsdb: Backfilled) -> Iterator[str]:
    with prometheus(scenario_tsdb.tsdb) as url:
        yield url


@pytest.fixture(scope="session")
def small_prom_url(scenario_tsdb: Backfilled) -> Iterator[str]:
    # 400 samples: less than one series' window (576 samples at 300 s over 2 days), and far
    # less than any whole-window range query: every query must be cut to fit.
    with prometheus(scenario_tsdb.tsdb, "--query.max-samples=400") as url:
        yield url


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return tmp_path
