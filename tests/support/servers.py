"""The programs the tests run as real servers and tools, how a test asks for one, and what the
test run says about the ones it found.

A test that runs one carries the `server` marker (tests/conftest.py applies it to whole folders
and to the tests that use given fixtures), so that `pytest -m "not server"` runs the rest on a
machine without them. `require` refuses to start a program for a test without the marker,
so that a missing marker shows on every machine, not only on one without the program.
"""

from __future__ import annotations

import os
import shutil

import pytest

REAL_SERVERS = (
    "prometheus",
    "promtool",
    "victoria-metrics",
    "vmalert",
    "chromium",
    "openssl",
    "kubectl",
)
"""The programs the tests run as real servers and tools (scripts/test.sh installs them)."""
INSTALL = (
    "apt-get install -y --no-install-recommends prometheus victoria-metrics chromium openssl "
    "kubernetes-client"
)

MARKER = "server"
"""The marker of a test that runs one of `REAL_SERVERS` (or tmux)."""

_unmarked_test: str | None = None


def running(nodeid: str | None) -> None:
    """Name the test about to run when it lacks the `server` marker (None when it has it, and
    between tests); tests/conftest.py calls this around each test."""
    global _unmarked_test
    _unmarked_test = nodeid


def require(binary: str) -> str:
    """The path of `binary`; the test is skipped without it (failed with CI set)."""
    if _unmarked_test is not None:
        pytest.fail(
            f"{_unmarked_test} runs {binary} but is not marked `{MARKER}`: add "
            f"`pytestmark = pytest.mark.{MARKER}` or `@pytest.mark.{MARKER}` to it, or name its "
            "fixture in tests/conftest.py"
        )
    path = shutil.which(binary)
    if path:
        return path
    if os.environ.get("CI"):
        pytest.fail(f"{binary} is not installed; scripts/test.sh installs it")
    pytest.skip(f"{binary} is not installed (scripts/test.sh installs it)")


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
