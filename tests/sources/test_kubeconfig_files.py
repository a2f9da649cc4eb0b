"""What asks for the Kubernetes API (`connect.asked`), how the files `KUBECONFIG` names are
checked (several files as `kubectl` reads them), and which recorded list states mean that a
source that was asked for could not be read (`collect.unread`, what `--strict` refuses)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.core.errors import SourceError
from gpuaudit.scenario import generate, k8s_lists
from gpuaudit.sources.collect import NOT_ASKED, unread
from gpuaudit.sources.kubernetes import connect
from gpuaudit.sources.kubernetes.kubesource import collect
from tests.support.apiserver import KubeAPIServer
from tests.support.paths import DEMO


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No kubeconfig, in-cluster setting or proxy of the machine running the tests leaks in."""
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr(connect, "SERVICE_ACCOUNT_DIR", tmp_path / "serviceaccount")
    return home


@pytest.fixture(scope="module")
def lists() -> dict[str, dict[str, Any]]:
    return k8s_lists(generate(12, 1, 3))


def test_what_asks_for_the_kubernetes_api(
    tmp_path: Path, _clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not connect.asked(None, None)
    assert connect.asked(tmp_path / "missing", None)
    assert connect.asked(None, "prod")
    # In a pod without a service account mounted: nothing asks.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert not connect.asked(None, None)
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text("t")
    assert connect.asked(None, None)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join(["", " "]))
    assert not connect.asked(None, None)  # no file named: as if unset
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    assert connect.asked(None, None)
    monkeypatch.delenv("KUBECONFIG")
    (_clean_env / ".kube").mkdir()
    (_clean_env / ".kube" / "config").write_text("")
    assert connect.asked(None, None)


def test_of_several_files_missing_and_empty_ones_are_passed_over(
    tmp_path: Path, lists: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with KubeAPIServer(lists) as srv:
        good = srv.write_kubeconfig(tmp_path / "good")
        paths = [str(tmp_path / "missing"), str(empty), str(good)]
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join(paths))
        kc = collect(None, None)
    assert kc.objects["pods"] == "ok"


def test_of_several_files_a_broken_one_is_an_error(
    tmp_path: Path, lists: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken"
    broken.write_bytes(b"\xff\xfe not text")
    with KubeAPIServer(lists) as srv:
        good = srv.write_kubeconfig(tmp_path / "good")
        monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(good), str(broken)]))
        with pytest.raises(SourceError) as err:
            collect(None, None)
    assert str(err.value) == (
        f"KUBECONFIG names {broken}, which is not a kubeconfig (it is not UTF-8 text); check "
        "KUBECONFIG, or pass --no-kubernetes to audit without the Kubernetes API"
    )


def test_several_files_none_of_them_a_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty"
    empty.write_text("# nothing here\n")
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(empty)]))
    with pytest.raises(SourceError) as err:
        collect(None, None)
    assert str(err.value).startswith(
        f"KUBECONFIG names 2 files and none holds a kubeconfig ({missing} does not exist; "
        f"{empty} is empty (comments only)); check KUBECONFIG, or pass --no-kubernetes"
    )


def test_a_folder_or_a_dangling_link_is_named_as_such(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match=r"^--kubeconfig names .+, which is not a file; "):
        collect(tmp_path, None)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(SourceError, match=r"^--kubeconfig names .+, which is a link to nothing"):
        collect(link, None)


@pytest.mark.parametrize(
    ("state", "is_unread"),
    [
        ("ok", False),
        ("absent: the CRD podgroups.scheduling.volcano.sh is not installed", False),
        ("incomplete: there are more than 10 pods (--max-objects)", False),
        ("forbidden: nodes is forbidden: User cannot list resource", True),
        ("failed: no complete answer within 1 s (--timeout)", True),
        ("not read: --no-kubernetes", False),
        ("not read: --cluster-label cluster audits every cluster, and one ...", False),
        (NOT_ASKED, False),
        ("not read: kubeconfig /x cannot be used: Invalid kube-config file", True),
        # Skipped checks' reasons quote the states of the lists they lack.
        ("no Kueue ClusterQueues (kueue_clusterqueues: not read; kueue_workloads: ok)", False),
        ("no Kueue ClusterQueues (kueue_clusterqueues: forbidden: cannot list)", True),
        (f"{NOT_ASKED}; failed: the answer was not a Kubernetes list", True),
        ("recorded series not used: reading the heartbeat failed: timeout", False),
    ],
)
def test_which_recorded_states_say_a_source_could_not_be_read(state: str, is_unread: bool) -> None:
    assert unread(state) is is_unread


def test_strict_fails_a_snapshot_whose_kubernetes_could_not_be_read(tmp_path: Path) -> None:
    # As a collection before this rule recorded a KUBECONFIG it could not read: the manifest
    # said complete, the checks that need Kubernetes were skipped.
    why = "not read: kubeconfig KUBECONFIG (/ci/kubeconfig) cannot be used: no configuration"
    snap = snapshot.read(DEMO).with_manifest(objects={"pods": why, "nodes": why})
    snap = dataclasses.replace(snap, kubernetes={})
    path = tmp_path / "unread.snapshot.json"
    snapshot.write(snap, path)
    runner = CliRunner()
    res = runner.invoke(app, ["scan", "-q", "-f", "json", "--snapshot", str(path)])
    assert res.exit_code == 0, res.stderr
    res = runner.invoke(app, ["scan", "-q", "-f", "json", "--snapshot", str(path), "--strict"])
    assert res.exit_code == 2, res.stderr
    (line,) = res.stderr.splitlines()
    assert line.startswith(f"gpuaudit: exit code 2: the audit is incomplete: {why}"), line
    assert line.endswith(" skipped for it)") and "GPU010" in line, line
