"""A scan of every cluster (`--cluster-label NAME`) without a server: the option, the PromQL it
writes, the identities it keeps apart, and the Kubernetes options it refuses. The live test
against VictoriaMetrics holding 20 clusters is `tests/live/test_many_clusters.py`."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.app import config
from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.cli import app
from gpuaudit.core.errors import ConfigError
from gpuaudit.inventory import prom
from gpuaudit.sources.prometheus.catalogue import BY_ID, CATALOGUE, ClusterLabel

runner = CliRunner()


def test_a_name_alone_means_every_cluster_and_name_value_one() -> None:
    assert ClusterLabel.parse("cluster") == ClusterLabel("cluster", None)
    assert ClusterLabel.parse(" cluster = prod ") == ClusterLabel("cluster", "prod")
    assert ClusterLabel.parse("cluster=") == ClusterLabel("cluster", "")
    assert ClusterLabel.parse(None) is None and ClusterLabel.parse("  ") is None
    assert ClusterLabel("cluster").selector() == 'cluster!=""'
    assert ClusterLabel("c", 'a"b\\').selector() == 'c="a\\"b\\\\"'


@pytest.mark.parametrize("text", ["1cluster", "clu-ster", "=prod", 'c"){x}', "cl uster=a"])
def test_a_label_name_promql_cannot_hold_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="label name"):
        ClusterLabel.parse(text)


def test_every_query_groups_by_the_cluster_label_in_a_scan_of_every_cluster() -> None:
    for q in CATALOGUE:
        one = q.promql(3600, "exported", 'cluster="a"', first=0)
        every = q.promql(3600, "exported", 'cluster!=""', first=0, group="cluster")
        # The same query, each `by` clause with the cluster label first.
        assert every.count("by (cluster, ") == one.count("by (") > 0, q.id
        # A join of another exporter's series to the GPU pods (`catalogue.gpu_pods`) matches
        # on the cluster label too.
        plain = every.replace("by (cluster, ", "by (").replace("on (cluster, ", "on (")
        assert plain.replace('cluster!=""', 'cluster="a"') == one


def test_the_unless_and_changes_forms_keep_the_cluster_apart() -> None:
    text = BY_ID["util_count_hourly"].promql(3600, "pod", 'k!=""', first=7200, group="k")
    # Now (twice) and the bucket before, each with its `unless`: every `by` has the label.
    assert text.count("by (k, ") == text.count("by (") == 6


def test_identities_of_two_clusters_never_meet() -> None:
    labels = {
        "UUID": "GPU-1",
        "gpu": "0",
        "Hostname": "node-1",
        "instance": "10.0.0.1:9400",
        "exported_pod": "train-0",
        "exported_namespace": "ml",
    }
    a = prom.identity({**labels, "cluster": "a"}, "exported", cluster_label="cluster")
    b = prom.identity({**labels, "cluster": "b"}, "exported", cluster_label="cluster")
    one = prom.identity({**labels, "cluster": "a"}, "exported")
    assert (a.cluster, a.host, a.namespace, a.uuid, a.slot) == (
        "a",
        "a/node-1",
        "a/ml",
        "a/GPU-1",
        "a/GPU-1",
    )
    assert {a.slot, a.host, a.namespace, a.instance}.isdisjoint(
        {b.slot, b.host, b.namespace, b.instance}
    )
    assert (one.cluster, one.host, one.namespace, one.slot) == ("", "node-1", "ml", "GPU-1")
    assert prom.cluster_of(a.namespace) == "a" and prom.cluster_of(one.namespace) == ""
    # Without a UUID, the slot is the cluster's node and index; a MIG slot adds its instance.
    bare = {k: v for k, v in labels.items() if k != "UUID"}
    mig = prom.identity(
        {**bare, "cluster": "eu/west", "GPU_I_ID": "3"}, "exported", cluster_label="cluster"
    )
    assert mig.slot == "eu/west/node-1:gpu0/3" and prom.cluster_of(mig.host) == "eu/west"


def test_overlapping_findings_of_one_cluster_pod_are_recognised() -> None:
    f = Finding(
        code="GPU070",
        severity=Severity.HIGH,
        resource=Resource("GPU", "", "a/GPU-1", "a/node-1", 1.0),
        message="m",
        impact=Impact(1.0, 1.0),
        recommendation="r",
        pods=("a/ml/train-0",),
    )
    assert "Pod|a/ml|train-0" in f.overlap_keys()


def _scan(label: str, **kw: object) -> None:
    config.for_scan({"prometheus_url": "http://p", "cluster_label": label, **kw})


@pytest.mark.parametrize(
    ("kw", "named"),
    [
        ({"kubeconfig": Path("k")}, "--kubeconfig"),
        ({"context": "prod"}, "--context"),
        ({"namespace": ["ml"]}, "--namespace"),
    ],
)
def test_kubernetes_options_are_refused_with_every_cluster(
    kw: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError, match=f"{named} names one cluster's") as exc:
        _scan("cluster", **kw)
    assert "--no-kubernetes" in str(exc.value) and "cluster=VALUE" in str(exc.value)
    _scan("cluster", **kw, no_kubernetes=True)  # said not to read it: nothing to refuse
    _scan("cluster=prod", **kw)


def test_the_cli_refuses_a_context_with_every_cluster_before_any_request() -> None:
    res = runner.invoke(
        app,
        [
            "scan",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--cluster-label",
            "cluster",
            "--context",
            "prod",
        ],
    )
    assert res.exit_code == 2
    assert "--context names one cluster's Kubernetes API" in res.output
    assert "Traceback" not in res.output
