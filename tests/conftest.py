"""The test run's hooks and shared fixtures. Helpers that tests import live in tests/support."""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from tests.support import servers

SERVER_FOLDERS = ("live",)
"""Folders under tests/ whose every test runs a real server."""
SERVER_FIXTURES = frozenset({"chromium", "captures", "hostile_cluster", "tls"})
"""Fixtures that run a real server or program (Chromium, tmux, Prometheus, openssl): every test
that uses one, directly or through another fixture, is marked `server`."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="Rewrite golden files under tests/goldens from current output.",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests = Path(__file__).parent
    folders = [tests / name for name in SERVER_FOLDERS]
    server = getattr(pytest.mark, servers.MARKER)
    for item in items:
        in_folder = any(item.path.is_relative_to(folder) for folder in folders)
        if in_folder or SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(server)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    # `servers.require` refuses a program to a test without the marker (fixtures included,
    # which run inside the protocol of the first test that needs them).
    servers.running(None if item.get_closest_marker(servers.MARKER) else item.nodeid)
    try:
        return (yield)
    finally:
        servers.running(None)


def pytest_report_header(config: pytest.Config) -> list[str]:
    return servers.real_servers()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Tests skipped for a missing server, counted by reason at the end of the run, so that a
    run without them never looks like a full one."""
    reasons: Counter[str] = Counter()
    for rep in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(rep, "longrepr", None)
        text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else ""
        if "not installed" in text:
            reasons[text.removeprefix("Skipped: ")] += 1
    if reasons:
        terminalreporter.section("real servers missing", sep="=", yellow=True)
        for why, n in sorted(reasons.items()):
            terminalreporter.line(f"{n} tests skipped: {why}")
        terminalreporter.line(f"install as root: {servers.INSTALL}")


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))
