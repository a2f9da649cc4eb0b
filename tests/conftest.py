from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "fixtures" / "demo.snapshot.json.gz"
DEMO_TRUTH = ROOT / "fixtures" / "demo.truth.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="Rewrite golden files under tests/goldens from current output.",
    )


REAL_SERVERS = ("prometheus", "promtool", "victoria-metrics", "chromium", "openssl")
"""The programs the tests run as real servers and tools (scripts/test.sh installs them)."""
INSTALL = "apt-get install -y --no-install-recommends prometheus victoria-metrics chromium openssl"


def real_servers() -> list[str]:
    """Which real servers this run has, for the header of the test run."""
    found = {name: shutil.which(name) for name in REAL_SERVERS}
    lines = [
        "real servers: " + ", ".join(f"{n} {'found' if p else 'MISSING'}" for n, p in found.items())
    ]
    if not all(found.values()):
        lines.append(
            "the tests that need a missing one are skipped, each named in the summary "
            f"(with CI set they fail); install as root: {INSTALL}"
        )
    return lines


def pytest_report_header(config: pytest.Config) -> list[str]:
    return real_servers()


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
        terminalreporter.line(f"install as root: {INSTALL}")


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


def raw_snapshot(path: Path) -> dict[str, Any]:
    """A snapshot file read with plain Python (no gpuaudit code), as one version 1 document:
    `{"manifest": ..., "prometheus": {id: [entry, ...]}, "kubernetes": {res: [page, ...]}}`."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    lines = [json.loads(line) for line in data.decode().splitlines() if line.strip()]
    if lines[0].get("version") == 1:
        return dict(lines[0])
    doc: dict[str, Any] = {"manifest": lines[0]["manifest"], "prometheus": {}, "kubernetes": {}}
    for rec in lines[1:]:
        if "prometheus" in rec:
            qid = rec.pop("prometheus")
            doc["prometheus"].setdefault(qid, []).append(rec)
        elif "kubernetes" in rec:
            doc["kubernetes"].setdefault(rec["kubernetes"], []).append(rec["page"])
    return doc
