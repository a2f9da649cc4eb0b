"""A check's `VIEWS` (the row-long shared views it reads) lets the audit let go of a view once
no check still to run reads it. The lists must be true: each check, run on the demo, reads no
row-long view it does not declare (through its helpers too); and the audit lets go of each
view after its last reader."""

from __future__ import annotations

from typing import Any

import pytest

from gpuaudit import snapshot
from gpuaudit.audit.assemble import run_checks
from gpuaudit.audit.settings import Settings
from gpuaudit.checks import discover
from gpuaudit.inventory import Inventory, Views, build
from tests.support.paths import DEMO


class _Reading(Views):
    """Views that note every row-long view asked for, however deep the asker."""

    seen: set[str]

    def __getattribute__(self, name: str) -> Any:
        if name in Views.ROW_LONG:
            object.__getattribute__(self, "seen").add(name)
        return super().__getattribute__(name)


@pytest.fixture(scope="module")
def demo() -> Inventory:
    return build(snapshot.read(DEMO))


def test_every_check_declares_the_row_long_views_it_reads(demo: Inventory) -> None:
    settings = Settings()
    views = _Reading(demo, settings.prices)
    read: dict[str, set[str]] = {}
    for check in discover():
        assert check.views is not None, f"{check.code} declares no VIEWS"
        views.seen = set()
        check.run(views, check.configure(settings.checks))
        read[check.code] = set(views.seen)
        assert views.seen <= check.views, f"{check.code} reads {sorted(views.seen - check.views)}"
    # The demo exercises the reads the lists are for.
    assert {"pod_hours", "whole_rows"} <= set().union(*read.values())


class _Looking:
    """A check that looks at which row-long views are kept before it runs."""

    def __init__(self, check: Any, kept: dict[str, set[str]]) -> None:
        self.check, self.kept = check, kept

    def __getattr__(self, name: str) -> Any:
        return getattr(self.check, name)

    def run(self, views: Views, cfg: Any) -> Any:
        self.kept[self.check.code] = {n for n in Views.ROW_LONG if n in vars(views)}
        return self.check.run(views, cfg)


def test_the_audit_lets_go_of_a_view_after_its_last_reader(demo: Inventory) -> None:
    kept: dict[str, set[str]] = {}
    checks = [_Looking(c, kept) for c in discover()]
    whole = run_checks(demo, Settings())
    looked = run_checks(demo, Settings(), checks=checks)  # type: ignore[arg-type]
    assert looked.findings == whole.findings
    assert "whole_rows" in kept["GPU031"]  # GPU030 made it, GPU031 reads it
    assert "whole_rows" not in kept["GPU040"]  # no check after GPU031 reads it
    assert "pod_hours" in kept["GPU040"]  # GPU090 still reads it
