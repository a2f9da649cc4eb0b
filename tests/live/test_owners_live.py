"""Owners read live: the real `kubernetes` client lists namespaces (core group) from the test
API server, pages are kept through the snapshot allowlist as a live scan keeps them, and the
owner walk names the owner; a forbidden namespace list is a warning, never a failure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuaudit.inventory import ownership
from gpuaudit.inventory.owners import build
from gpuaudit.snapshot import fields
from gpuaudit.sources.kubernetes.kubesource import collect
from tests.support.apiserver import KubeAPIServer


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _obj(name: str, ns: str = "", uid: str = "", **meta: Any) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, **meta}
    if ns:
        m["namespace"] = ns
    if uid:
        m["uid"] = uid
    return {"metadata": m}


def _list(api: str, kind: str, *items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api, "kind": f"{kind}List", "items": list(items)}


OWNED = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm", "uid": "d1"}


def _lists() -> dict[str, dict[str, Any]]:
    container = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    pod = _obj("llm-0", "ml", "p1", ownerReferences=[{**OWNED, "controller": True}])
    pod["spec"] = {"nodeName": "n1", "containers": [container]}
    pod["status"] = {"phase": "Running"}
    plain = _obj("tool-0", "ml", "p2", labels={"app": "tool"})
    plain["spec"] = {"nodeName": "n1", "containers": [container]}
    plain["status"] = {"phase": "Running"}
    return {
        "pods": _list("v1", "Pod", pod, plain),
        "nodes": _list("v1", "Node", _obj("n1", labels={"team": "infra"})),
        "deployments": _list(
            "apps/v1",
            "Deployment",
            _obj("llm", "ml", "d1", labels={"team": "serving", "secret-ish": "x"}),
        ),
        "namespaces": _list(
            "v1",
            "Namespace",
            _obj(
                "ml",
                labels={"owner": "ml-platform", "kubernetes.io/metadata.name": "ml"},
                annotations={"gpuaudit.io/contact": "ml@example.com", "note": "dropped"},
            ),
        ),
    }


def test_owners_are_read_through_the_api_server(tmp_path: Path) -> None:
    with KubeAPIServer(_lists()) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kc"), None, keep_page=fields.PageKeeper())
    assert kc.objects["namespaces"] == "ok"
    (ns,) = [o for p in kc.kubernetes["namespaces"] for o in p["items"]]
    # Only the owner keys are kept of a namespace.
    assert ns["metadata"]["labels"] == {"owner": "ml-platform"}
    assert ns["metadata"]["annotations"] == {"gpuaudit.io/contact": "ml@example.com"}
    owners = build(kc.kubernetes, {"objects": kc.objects})
    assert ownership.of_pod(owners, "ml", "llm-0") == ownership.Owner(
        "serving", "label team of Deployment ml/llm", "ml@example.com"
    )
    assert ownership.of_pod(owners, "ml", "tool-0") == ownership.Owner(
        "ml-platform", "label owner of Namespace ml", "ml@example.com"
    )
    assert ownership.of_resource(owners, "Node", "", "n1").name == "infra"


def test_a_forbidden_namespace_list_is_a_warning(tmp_path: Path) -> None:
    with KubeAPIServer(_lists(), forbidden={"namespaces"}) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kc"), None, keep_page=fields.PageKeeper())
    assert kc.objects["namespaces"].startswith("forbidden: namespaces is forbidden")
    assert any(w.startswith("namespaces were not read") for w in kc.warnings)
    owners = build(kc.kubernetes, {"objects": kc.objects})
    assert ownership.of_pod(owners, "ml", "llm-0").name == "serving"
    assert ownership.of_pod(owners, "ml", "tool-0") == ownership.UNKNOWN
