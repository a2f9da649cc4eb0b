"""`scripts/test.sh` run as a user who cannot install anything says what to install and goes on;
the test run says which real servers it found."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.servers import REAL_SERVERS

ROOT = Path(__file__).resolve().parent.parent


def _bin(tmp: Path, uid: int, have: tuple[str, ...]) -> Path:
    """A PATH with `dirname`, an `id` that says `uid`, and stand-ins for the servers in `have`
    (no sudo, no apt-get)."""
    d = tmp / "bin"
    d.mkdir()
    dirname = shutil.which("dirname")
    assert dirname
    (d / "dirname").symlink_to(dirname)
    (d / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    for name in have:
        (d / name).write_text("#!/bin/sh\nexit 0\n")
    for f in d.iterdir():
        if not f.is_symlink():
            f.chmod(0o755)
    return d


def _deps(tmp: Path, uid: int, have: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("bash is not installed")
    env = {"PATH": str(_bin(tmp, uid, have)), "HOME": str(tmp)}
    return subprocess.run(
        [bash, str(ROOT / "scripts" / "test.sh"), "--deps-only"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_without_root_or_sudo_it_says_what_to_install_and_goes_on(tmp_path: Path) -> None:
    got = _deps(tmp_path, 1000, ("openssl", "chromium"))
    assert got.returncode == 0, got.stderr
    assert "missing: prometheus promtool victoria-metrics vmalert" in got.stderr
    assert "not root and no sudo" in got.stderr
    assert "apt-get install -y --no-install-recommends prometheus victoria-metrics" in got.stderr
    assert "skipped, each named" in got.stderr


def test_with_everything_there_it_says_nothing(tmp_path: Path) -> None:
    have = (*REAL_SERVERS, "tmux")
    got = _deps(tmp_path, 1000, have)
    assert got.returncode == 0 and got.stderr == "" and got.stdout == ""


def test_the_run_names_the_real_servers_it_found_or_missed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tests.support.servers as conf

    real = shutil.which
    monkeypatch.setattr(
        conf.shutil, "which", lambda n: None if n == "victoria-metrics" else real(n)
    )
    lines = conf.real_servers()
    assert "victoria-metrics MISSING" in lines[0]
    assert "skipped, each named in the summary" in lines[1] and conf.INSTALL in lines[1]
    monkeypatch.setattr(conf.shutil, "which", lambda n: f"/usr/bin/{n}")
    assert conf.real_servers() == [
        "real servers: prometheus found, promtool found, victoria-metrics found, "
        "vmalert found, chromium found, openssl found, kubectl found"
    ]
