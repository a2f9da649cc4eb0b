"""The Kubernetes source against a test API server, through the real `kubernetes` client.

Nothing in the client is patched: every test writes a kubeconfig for a `KubeAPIServer` on
127.0.0.1 and calls `collect`, which loads it the way a user's kubeconfig is loaded.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from gpuaudit.core.errors import SourceError
from gpuaudit.scenario import generate, k8s_lists
from gpuaudit.sources.kubernetes import connect
from gpuaudit.sources.kubernetes.kubesource import collect
from gpuaudit.sources.kubernetes.pager import MAX_RESTARTS, KubeCollection
from gpuaudit.sources.kubernetes.resources import RESOURCES
from tests.support.apiserver import (
    DEFAULT_TOKEN,
    KubeAPIServer,
    TLSFiles,
    have_openssl,
    make_tls,
    write_kubeconfig,
)

PAGE = 50


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No proxy, kubeconfig or in-cluster setting of the machine running the tests leaks in."""
    for var in (
        "KUBECONFIG",
        "KUBERNETES_SERVICE_HOST",
        "KUBERNETES_SERVICE_PORT",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(scope="module")
def lists() -> dict[str, dict[str, Any]]:
    return k8s_lists(generate(120, 1, 3))


@pytest.fixture(scope="session")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    if not have_openssl():
        pytest.skip("openssl is not installed: the tests make their certificates with it")
    return make_tls(tmp_path_factory.mktemp("tls"))


def merged(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [obj for page in pages for obj in page["items"]]


def names(objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return sorted((o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objs)


def dumped(kc: KubeCollection) -> str:
    return json.dumps(dataclasses.asdict(kc))


def assert_matches_scenario(kc: KubeCollection, lists: dict[str, dict[str, Any]]) -> None:
    """Every scenario list came back whole; every other resource is recorded as absent."""
    assert {"pods", "nodes", "priorityclasses", "pytorchjobs"} <= set(lists)
    for res in RESOURCES:
        if res.key in lists:
            assert kc.objects[res.key] == "ok", res.key
            assert merged(kc.kubernetes[res.key]) == lists[res.key]["items"], res.key
        else:
            assert kc.objects[res.key].startswith("absent: "), res.key
            assert res.key not in kc.kubernetes


# --- reading -------------------------------------------------------------------------------


def test_http_collects_every_page_as_served(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    progress: list[str] = []
    with KubeAPIServer(lists) as srv:
        kc = collect(
            srv.write_kubeconfig(tmp_path / "kubeconfig"),
            None,
            page_size=PAGE,
            on_progress=progress.append,
        )
        pages = srv.pages_served("pods")
        seen = srv.list_requests("pods")
        methods = srv.methods()
    assert_matches_scenario(kc, lists)
    n_pods = len(lists["pods"]["items"])
    assert n_pods > 2 * PAGE
    assert pages == len(kc.kubernetes["pods"]) == math.ceil(n_pods / PAGE)
    assert all(r.query["limit"] == [str(PAGE)] for r in seen)
    assert [("continue" in r.query) for r in seen] == [False] + [True] * (pages - 1)
    # Raw pages, as the server sent them: list envelope and paging metadata included.
    first = kc.kubernetes["pods"][0]
    assert first["kind"] == "PodList" and first["apiVersion"] == "v1"
    assert first["metadata"]["remainingItemCount"] == n_pods - PAGE
    assert "continue" not in kc.kubernetes["pods"][-1]["metadata"]
    assert methods == {"GET"}
    assert kc.cluster == "gpuaudit-test"
    assert kc.server == srv.url
    assert kc.api_versions["pytorchjobs"] == "kubeflow.org/v1"
    assert kc.api_versions["priorityclasses"] == "scheduling.k8s.io/v1"
    assert set(kc.objects) == {r.key for r in RESOURCES}
    if "rayclusters" not in lists:
        assert kc.objects["rayclusters"] == (
            "absent: the CRD rayclusters.ray.io is not installed (API group ray.io is not served)"
        )
    if "mpijobs" not in lists:
        assert kc.objects["mpijobs"] == (
            "absent: the CRD mpijobs.kubeflow.org is not installed (kubeflow.org/v1 has no mpijobs)"
        )
    for dra_key in ("resourceclaims", "resourceslices"):
        if dra_key not in lists:
            assert kc.objects[dra_key] == (
                "absent: the API group resource.k8s.io is not served by this cluster"
            )
    assert any("plain HTTP" in w for w in kc.warnings)
    assert progress[pages - 1] == f"pods: {n_pods} read ({pages} pages)"
    assert DEFAULT_TOKEN not in dumped(kc)


@pytest.mark.parametrize("ca", ["data", "file"])
def test_https_verifies_the_generated_ca_and_keeps_secrets_out(
    tmp_path: Path, lists: dict[str, dict[str, Any]], tls: TLSFiles, ca: str
) -> None:
    with KubeAPIServer(lists, tls=tls) as srv:
        config = srv.write_kubeconfig(tmp_path / "kubeconfig", ca=ca, client_cert=True)
        kc = collect(config, "gpuaudit-test", page_size=PAGE)
        certs = {r.client_cert_cn for r in srv.requests}
        pages = srv.pages_served("pods")
        methods = srv.methods()
    assert_matches_scenario(kc, lists)
    assert pages >= 3
    assert methods == {"GET"}
    assert certs == {"gpuaudit-tester"}, "the client certificate from the kubeconfig was used"
    assert kc.server.startswith("https://127.0.0.1:")
    assert kc.warnings == []
    text = dumped(kc)
    key_pem = tls.client_key.read_text()
    key_body = "".join(key_pem.strip().splitlines()[1:-1])
    assert DEFAULT_TOKEN not in text
    assert key_body[:40] not in text and key_body[-40:] not in text


def test_https_without_the_ca_is_refused(
    tmp_path: Path, lists: dict[str, dict[str, Any]], tls: TLSFiles
) -> None:
    with KubeAPIServer(lists, tls=tls) as srv:
        config = srv.write_kubeconfig(tmp_path / "kubeconfig", ca="none")
        with pytest.raises(SourceError) as err:
            collect(config, None)
        seen = list(srv.requests)
    msg = str(err.value)
    assert msg.startswith(f"cannot reach the Kubernetes API at {srv.url}: TLS certificate")
    assert "\n" not in msg and DEFAULT_TOKEN not in msg
    assert seen == [], "no request went over an unverified connection"


def test_insecure_skip_tls_verify_is_honoured_only_when_set(
    tmp_path: Path, lists: dict[str, dict[str, Any]], tls: TLSFiles
) -> None:
    with KubeAPIServer(lists, tls=tls) as srv:
        config = write_kubeconfig(
            tmp_path / "kubeconfig", srv.url, token=DEFAULT_TOKEN, insecure=True
        )
        kc = collect(config, None)
    assert kc.objects["pods"] == "ok"
    assert any("not verified" in w for w in kc.warnings)


def test_forbidden_and_not_found_are_recorded_and_the_scan_goes_on(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    with KubeAPIServer(
        lists, forbidden={"nodes", "priorityclasses"}, not_found={"pytorchjobs"}
    ) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=PAGE)
    assert kc.objects["pods"] == "ok"
    assert merged(kc.kubernetes["pods"]) == lists["pods"]["items"]
    assert kc.objects["nodes"] == (
        'forbidden: nodes is forbidden: User "system:serviceaccount:gpuaudit:gpuaudit" '
        'cannot list resource "nodes" in API group "" at the cluster scope'
    )
    assert kc.objects["priorityclasses"].startswith(
        "forbidden: priorityclasses.scheduling.k8s.io is forbidden"
    )
    assert kc.objects["pytorchjobs"] == (
        "absent: the API server answered 404 Not Found for /apis/kubeflow.org/v1/pytorchjobs"
    )
    for key in ("nodes", "priorityclasses", "pytorchjobs"):
        assert key not in kc.kubernetes
    assert any(w.startswith("nodes were not read") for w in kc.warnings)
    assert any(w.startswith("PriorityClasses were not read") for w in kc.warnings)


def test_dra_lists_absent_or_forbidden_are_skipped_with_the_reason(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    older = {k: v for k, v in lists.items() if k not in ("resourceclaims", "resourceslices")}
    with KubeAPIServer(older) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=PAGE)
    for key in ("resourceclaims", "resourceslices"):
        assert (
            kc.objects[key] == "absent: the API group resource.k8s.io is not served by this cluster"
        )
    assert lists["resourceslices"]["items"]
    with KubeAPIServer(lists, forbidden={"resourceslices"}) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=PAGE)
    assert kc.objects["resourceclaims"] == "ok"
    assert kc.objects["resourceslices"].startswith(
        "forbidden: resourceslices.resource.k8s.io is forbidden"
    )
    assert "resourceslices" not in kc.kubernetes
    assert any(w.startswith("DRA ResourceSlices were not read") for w in kc.warnings)


def test_pods_forbidden_is_an_error(tmp_path: Path, lists: dict[str, dict[str, Any]]) -> None:
    with KubeAPIServer(lists, forbidden={"pods"}) as srv:
        with pytest.raises(SourceError) as err:
            collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None)
    msg = str(err.value)
    assert msg.startswith(f"the Kubernetes API at {srv.url} does not allow listing pods (pods is")
    assert "docs/rbac.yaml" in msg and "--namespace" in msg and "\n" not in msg


def test_expired_continue_token_restarts_the_list(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    with KubeAPIServer(lists, expire_continue={"pods": 2}) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=PAGE)
        statuses = [r.status for r in srv.list_requests("pods")]
        starts = ["continue" not in r.query for r in srv.list_requests("pods")]
    assert statuses.count(410) == 2
    assert starts.count(True) == 3, "the list was started again after each 410"
    assert kc.objects["pods"] == "ok"
    assert merged(kc.kubernetes["pods"]) == lists["pods"]["items"]
    assert len(kc.kubernetes["pods"]) == math.ceil(len(lists["pods"]["items"]) / PAGE)


def test_a_list_that_keeps_expiring_is_marked_incomplete(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    with KubeAPIServer(lists, expire_continue={"pods": 100}) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=PAGE)
        statuses = [r.status for r in srv.list_requests("pods")]
    assert statuses.count(410) == MAX_RESTARTS + 1
    assert kc.objects["pods"].startswith("incomplete: a continue token expired 4 times")
    assert merged(kc.kubernetes["pods"]) == lists["pods"]["items"][:PAGE]
    assert any(w.startswith("The list of pods is incomplete") for w in kc.warnings)
    assert kc.objects["nodes"] == "ok"


def test_namespaces_narrow_namespaced_lists_only(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    # One namespace with a PyTorchJob, one with the most pods.
    counts = Counter(p["metadata"]["namespace"] for p in lists["pods"]["items"])
    job_ns = lists["pytorchjobs"]["items"][0]["metadata"]["namespace"]
    wanted = [job_ns, next(ns for ns, _ in counts.most_common() if ns != job_ns)]
    with KubeAPIServer(lists) as srv:
        kc = collect(
            srv.write_kubeconfig(tmp_path / "kubeconfig"),
            None,
            wanted + wanted[:1],
            page_size=PAGE,
        )
        paths = {r.path for r in srv.requests if r.path.endswith(("/pods", "/pytorchjobs"))}
        node_paths = {r.path for r in srv.list_requests("nodes")}
    expected = [p for p in lists["pods"]["items"] if p["metadata"]["namespace"] in wanted]
    assert names(merged(kc.kubernetes["pods"])) == names(expected)
    assert {p["metadata"]["namespace"] for p in merged(kc.kubernetes["pods"])} == set(wanted)
    assert paths == {f"/api/v1/namespaces/{ns}/pods" for ns in wanted} | {
        f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs" for ns in wanted
    }
    assert node_paths == {"/api/v1/nodes"}
    assert merged(kc.kubernetes["nodes"]) == lists["nodes"]["items"]
    jobs = [j for j in lists["pytorchjobs"]["items"] if j["metadata"]["namespace"] in wanted]
    assert names(merged(kc.kubernetes["pytorchjobs"])) == names(jobs)


# --- CRDs and discovery --------------------------------------------------------------------


def _crd_list(api_version: str, kind: str, names_: list[str], ns: str | None) -> dict[str, Any]:
    items = []
    for n in names_:
        meta: dict[str, Any] = {"name": n, "uid": f"uid-{n}"}
        if ns:
            meta["namespace"] = ns
        items.append({"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": {}})
    return {"kind": f"{kind}List", "apiVersion": api_version, "metadata": {}, "items": items}


def _gang_lists(lists: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        "pods": lists["pods"],
        "nodes": lists["nodes"],
        "volcano_podgroups": _crd_list(
            "scheduling.volcano.sh/v1beta1", "PodGroup", ["pg-a", "pg-b"], "ml-train"
        ),
        "coscheduling_podgroups": _crd_list(
            "scheduling.x-k8s.io/v1alpha1", "PodGroup", ["cg-a"], "vision"
        ),
        "kueue_workloads": _crd_list("kueue.x-k8s.io/v1beta1", "Workload", ["wl-1"], "batch"),
        "kueue_clusterqueues": _crd_list("kueue.x-k8s.io/v1beta1", "ClusterQueue", ["cq"], None),
        "kueue_localqueues": _crd_list("kueue.x-k8s.io/v1beta1", "LocalQueue", ["lq"], "batch"),
        "mpijobs": _crd_list("kubeflow.org/v2beta1", "MPIJob", ["mpi-1"], "ml-train"),
        "pytorchjobs": lists["pytorchjobs"],
        "jobsets": _crd_list("jobset.x-k8s.io/v1alpha2", "JobSet", ["js"], "ml-train"),
        "leaderworkersets": _crd_list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", ["l"], "s"),
        "rayclusters": _crd_list("ray.io/v1", "RayCluster", ["rc"], "ml-train"),
        "resourceclaims": _crd_list("resource.k8s.io/v1beta1", "ResourceClaim", ["c"], "vision"),
        "resourceslices": _crd_list("resource.k8s.io/v1beta1", "ResourceSlice", ["s"], None),
    }


def test_gang_objects_are_read_at_the_versions_discovery_lists(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    served = _gang_lists(lists)
    with KubeAPIServer(served) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=PAGE)
        cq_paths = {r.path for r in srv.list_requests("kueue_clusterqueues")}
        methods = srv.methods()
    for key, lst in served.items():
        assert kc.objects[key] == "ok", key
        assert merged(kc.kubernetes[key]) == lst["items"], key
        assert kc.api_versions[key] == lst["apiVersion"], key
    assert kc.objects["priorityclasses"].startswith("absent: the API group scheduling.k8s.io")
    assert cq_paths == {"/apis/kueue.x-k8s.io/v1beta1/clusterqueues"}
    assert methods == {"GET"}


def test_without_discovery_each_api_is_tried_directly(
    tmp_path: Path, lists: dict[str, dict[str, Any]]
) -> None:
    served = _gang_lists(lists)
    with KubeAPIServer(served, forbid_discovery=True) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=PAGE)
    assert any(w.startswith("API discovery (GET /apis) failed") for w in kc.warnings)
    # Found by trying the versions in order: v1beta2 answers 404, v1beta1 works.
    assert kc.api_versions["kueue_workloads"] == "kueue.x-k8s.io/v1beta1"
    assert kc.api_versions["mpijobs"] == "kubeflow.org/v2beta1"
    assert kc.api_versions["resourceclaims"] == "resource.k8s.io/v1beta1"
    assert kc.api_versions["resourceslices"] == "resource.k8s.io/v1beta1"
    assert merged(kc.kubernetes["volcano_podgroups"]) == served["volcano_podgroups"]["items"]
    assert kc.objects["priorityclasses"] == (
        "absent: the API server answered 404 Not Found for "
        "/apis/scheduling.k8s.io/v1/priorityclasses"
    )


def test_serves_a_directory_written_by_the_scenario_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gpuaudit.cli import app

    out = tmp_path / "k8s"
    result = CliRunner().invoke(
        app,
        ["scenario", "--gpus", "60", "--days", "1", "--seed", "3"]
        + ["--output", str(tmp_path / "s.json.gz"), "--k8s-dir", str(out)],
    )
    assert result.exit_code == 0, result.output
    expected = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    with KubeAPIServer.from_dir(out) as srv:
        kc = collect(srv.write_kubeconfig(tmp_path / "kubeconfig"), None, page_size=20)
    assert expected
    for key, lst in expected.items():
        assert kc.objects[key] == "ok", key
        assert merged(kc.kubernetes[key]) == lst["items"], key


# --- configuration and failures ------------------------------------------------------------


def test_wrong_token_is_refused_without_echoing_it(
    tmp_path: Path, lists: dict[str, dict[str, Any]], tls: TLSFiles
) -> None:
    wrong = "wrong-token-8c1d4f0b9e2a77"
    with KubeAPIServer(lists, tls=tls) as srv:
        config = srv.write_kubeconfig(tmp_path / "kubeconfig", token=wrong)
        with pytest.raises(SourceError) as err:
            collect(config, None)
    msg = str(err.value)
    assert msg == (
        f"the Kubernetes API at {srv.url} refused the credentials (401 Unauthorized: "
        "Unauthorized); check --kubeconfig/--context, or log in again"
    )
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_unreachable_server_is_one_line_without_secrets(
    tmp_path: Path, lists: dict[str, dict[str, Any]], tls: TLSFiles
) -> None:
    with KubeAPIServer(lists, tls=tls) as srv:
        url = srv.url
        config = srv.write_kubeconfig(tmp_path / "kubeconfig", client_cert=True)
    # The server is gone; its port refuses connections now.
    with pytest.raises(SourceError) as err:
        collect(config, None)
    msg = str(err.value)
    assert msg == (
        f"cannot reach the Kubernetes API at {url}: connection refused; "
        "check --kubeconfig/--context"
    )
    key_body = "".join(tls.client_key.read_text().strip().splitlines()[1:-1])
    assert DEFAULT_TOKEN not in msg and key_body[:40] not in msg


def test_missing_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nope" / "config"
    with pytest.raises(SourceError) as err:
        collect(missing, None)
    assert str(err.value) == (
        f"--kubeconfig names {missing}, which does not exist; check --kubeconfig, or pass "
        "--no-kubernetes to audit without the Kubernetes API"
    )

    monkeypatch.setenv("KUBECONFIG", str(missing))
    with pytest.raises(SourceError) as err:
        collect(None, None)
    assert str(err.value).startswith(f"KUBECONFIG names {missing}, which does not exist; ")

    monkeypatch.delenv("KUBECONFIG")
    with pytest.raises(SourceError, match=r"^no kubeconfig: .*\.kube/config does not exist"):
        collect(None, None)


def test_kubeconfig_from_the_environment(
    tmp_path: Path, lists: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    with KubeAPIServer(lists) as srv:
        monkeypatch.setenv("KUBECONFIG", str(srv.write_kubeconfig(tmp_path / "kc.yaml")))
        kc = collect(None, None)
    assert kc.objects["pods"] == "ok" and kc.cluster == "gpuaudit-test"


def test_unknown_context(tmp_path: Path) -> None:
    config = write_kubeconfig(tmp_path / "kubeconfig", "http://127.0.0.1:9", token="t0ken-abc")
    with pytest.raises(SourceError) as err:
        collect(config, "prod")
    assert str(err.value) == (
        f"context 'prod' is not in kubeconfig {config} (it has: gpuaudit-test)"
    )


def test_no_current_context(tmp_path: Path) -> None:
    config = write_kubeconfig(
        tmp_path / "kubeconfig", "http://127.0.0.1:9", token="t0ken-abc", current=False
    )
    with pytest.raises(SourceError) as err:
        collect(config, None)
    assert str(err.value) == (
        f"kubeconfig {config} sets no current-context; pass --context (it has: gpuaudit-test)"
    )


def test_malformed_kubeconfig(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nusers:\n- name: u\n  user: {token: s3cret-token-value\n")
    with pytest.raises(SourceError) as err:
        collect(bad, None)
    msg = str(err.value)
    assert msg.startswith(f"--kubeconfig names {bad}, which is not valid YAML (line ")
    assert "s3cret" not in msg and "\n" not in msg

    bad.write_text("just a string\n")
    with pytest.raises(SourceError) as err:
        collect(bad, None)
    assert str(err.value).startswith(f"--kubeconfig names {bad}, which is not a kubeconfig ")
    assert "\n" not in str(err.value)


def test_in_cluster_service_account(
    tmp_path: Path,
    lists: dict[str, dict[str, Any]],
    tls: TLSFiles,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sa = tmp_path / "serviceaccount"
    sa.mkdir()
    (sa / "token").write_text(DEFAULT_TOKEN + "\n")
    (sa / "ca.crt").write_bytes(tls.ca_cert.read_bytes())
    monkeypatch.setattr(connect, "SERVICE_ACCOUNT_DIR", sa)
    with KubeAPIServer(lists, tls=tls) as srv:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(srv.port))
        kc = collect(None, None, page_size=PAGE)
    assert kc.cluster == "in-cluster"
    assert kc.server == srv.url
    assert_matches_scenario(kc, lists)
    assert DEFAULT_TOKEN not in dumped(kc)


def test_in_cluster_without_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connect, "SERVICE_ACCOUNT_DIR", tmp_path / "serviceaccount")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
    with pytest.raises(SourceError, match=r"^KUBERNETES_SERVICE_HOST is set but the service"):
        collect(None, None)


def test_the_server_is_named_without_credentials_query_or_trailing_slash(tmp_path: Path) -> None:
    server = "https://user:pw@127.0.0.1:9/base/?q=1#f"
    config = write_kubeconfig(tmp_path / "kubeconfig", server, token="t0ken-abc")
    with pytest.raises(SourceError) as err:
        collect(config, None)
    assert str(err.value).startswith("cannot reach the Kubernetes API at https://127.0.0.1:9/base:")


def test_rbac_example_grants_exactly_what_collect_reads() -> None:
    import yaml  # type: ignore[import-untyped,unused-ignore]

    docs = list(yaml.safe_load_all((Path(__file__).parents[2] / "docs" / "rbac.yaml").read_text()))
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    granted = {
        (group, res)
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for res in rule.get("resources", [])
    }
    assert granted == {(r.group, r.plural) for r in RESOURCES}
    for rule in role["rules"]:
        assert set(rule["verbs"]) <= {"get", "list"}, "read-only"
    assert any("/apis" in r.get("nonResourceURLs", []) for r in role["rules"])
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpuaudit", "namespace": "gpuaudit"}
    ]
