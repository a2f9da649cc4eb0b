"""An API server cannot make the Kubernetes source wait, grow or list without end, and a token
written with a Windows line end still works and never shows. The real `kubernetes` client
against the test API server (tests/support/apiserver.py) and its faults."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuaudit.core.errors import SourceError
from gpuaudit.scenario import generate, k8s_lists
from gpuaudit.sources.bounds import MIB, Limits
from gpuaudit.sources.kubernetes.kubesource import collect
from tests.support.apiserver import DEFAULT_TOKEN, KubeAPIServer
from tests.support.promfault import gzip_bomb

PAGE = 50


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    for var in ("http_proxy", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def lists() -> dict[str, dict[str, Any]]:
    return k8s_lists(generate(120, 1, 3))


def test_fresh_continue_tokens_for_ever_are_cut_off_at_the_object_bound(
    lists: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    limits = Limits(objects=400)
    with KubeAPIServer(lists, endless_continue={"pods"}) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kc"), None, page_size=PAGE, limits=limits)
        served = srv.pages_served("pods")
    assert kc.objects["pods"].startswith("incomplete: there are more than 400 pods")
    assert "--max-objects" in kc.objects["pods"]
    assert sum(len(p["items"]) for p in kc.kubernetes["pods"]) == 400
    assert 400 // PAGE <= served <= limits.pages(PAGE)
    assert any(w.startswith("The list of pods is incomplete") for w in kc.warnings)
    assert kc.objects["nodes"] == "ok"


def test_empty_pages_with_fresh_tokens_are_cut_off_at_the_page_bound(
    lists: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    # The scenario may hold PodGroups; here the list is empty, so every page is an empty one.
    empty = {**lists, "volcano_podgroups": {**lists["volcano_podgroups"], "items": []}}
    limits = Limits(objects=1000)
    with KubeAPIServer(empty, endless_continue={"volcano_podgroups"}) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kc"), None, page_size=PAGE, limits=limits)
        served = srv.pages_served("volcano_podgroups")
    assert served == limits.pages(PAGE)
    state = kc.objects["volcano_podgroups"]
    assert state.startswith("incomplete: the server was still handing out continue tokens")
    assert kc.objects["pods"] == "ok"


def test_a_dripped_list_does_not_outlive_the_timeout(
    lists: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    # Every byte comes within 0.05 s, so no read ever times out; the whole would take minutes.
    with KubeAPIServer(lists, drip={"pods": 0.05}) as srv:
        with pytest.raises(SourceError) as info:
            collect(srv.write_kubeconfig(tmp_path / "kc"), None, page_size=PAGE, timeout_s=1)
    msg = str(info.value)
    assert "cannot list pods" in msg and "no complete answer within 1 s (--timeout)" in msg
    assert "\n" not in msg


def test_a_dripped_optional_list_fails_alone(
    lists: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    with KubeAPIServer(lists, drip={"pytorchjobs": 0.05}) as srv:
        kc = collect(
            srv.write_kubeconfig(tmp_path / "kc"),
            None,
            page_size=PAGE,
            limits=Limits(timeout_s=1),
        )
    assert kc.objects["pytorchjobs"] == "failed: no complete answer within 1 s (--timeout)"
    assert kc.objects["pods"] == "ok"


def test_a_gzip_bomb_list_stops_at_the_cap(
    lists: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    bomb = gzip_bomb(256 * MIB, b'{"kind":"PodList","apiVersion":"v1","items":[]', b"}")
    raw = ({"Content-Encoding": "gzip"}, bomb)
    with KubeAPIServer(lists, raw_answer={"pods": raw}) as srv:
        with pytest.raises(SourceError) as info:
            collect(
                srv.write_kubeconfig(tmp_path / "kc"),
                None,
                limits=Limits(answer_bytes=8 * MIB),
            )
    assert "larger than 8 MiB once decompressed (--max-answer-mib)" in str(info.value)


def test_an_answer_over_the_cap_without_compression(
    lists: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    big = json.dumps({"kind": "NodeList", "apiVersion": "v1", "items": [], "pad": "x" * MIB})
    with KubeAPIServer(lists, raw_answer={"nodes": ({}, big.encode())}) as srv:
        with pytest.raises(SourceError, match="larger than 1 MiB"):
            collect(srv.write_kubeconfig(tmp_path / "kc"), None, limits=Limits(answer_bytes=MIB))


def test_a_token_with_a_windows_line_end_works_and_is_never_shown(
    lists: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    with KubeAPIServer(lists) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kc", token=DEFAULT_TOKEN + "\r\n"), None)
        assert kc.objects["pods"] == "ok"
        bad = srv.write_kubeconfig(tmp_path / "bad", token="gpuaudit-\r\nsecret-9f8e7d6c")
        with pytest.raises(SourceError) as info:
            collect(bad, None)
    msg = str(info.value)
    assert "control character" in msg
    assert "secret-9f8e7d6c" not in msg and "gpuaudit-" not in msg
