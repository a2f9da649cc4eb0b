"""The cAdvisor queries of the catalogue (GPU041's CPU): per container of GPU pods only, one
query whatever the cluster size, in every pod label spelling."""

from __future__ import annotations

import pytest

from gpuaudit.sources.prometheus import catalogue as queries
from gpuaudit.sources.prometheus.planner import SHARDS

CPU = ("cpu_usage_hourly", "cpu_periods_hourly", "cpu_throttled_hourly")


@pytest.mark.parametrize("qid", CPU)
def test_a_cpu_query_is_kept_to_the_containers_of_gpu_pods(qid: str) -> None:
    q = queries.BY_ID[qid]
    text = q.promql(3600, "exported")
    assert text.startswith(
        f"sum by (namespace, pod, container) (increase({q.metric}"
        '{container!="",container!="POD"}[3600s])) and on (namespace, pod) ('
    )
    # The GPU pods: DCGM's pod labels renamed to the kubelet's.
    assert 'DCGM_FI_DEV_FB_USED{exported_pod!=""}[3600s]' in text
    assert '"namespace", "$1", "exported_namespace", "(.*)"' in text


def test_the_gpu_pods_in_each_spelling() -> None:
    exported = queries.gpu_pods(3600, "exported")
    plain = queries.gpu_pods(3600, "pod")
    both = queries.gpu_pods(3600, "any")
    assert "exported_pod" in exported and "pod_name" not in exported
    assert "group by (namespace, pod)" in plain and "pod_name" in plain
    assert "exported_pod" not in plain
    # `any`: every spelling, the plain ones only where no exported_pod names the workload.
    assert both.count('exported_pod=""') == 2 * len(queries.GPU_POD_PROBES)


def test_a_scan_of_every_cluster_keeps_clusters_apart() -> None:
    text = queries.BY_ID["cpu_usage_hourly"].promql(3600, "pod", 'cluster!=""', group="cluster")
    assert "sum by (cluster, namespace, pod, container)" in text
    assert "and on (cluster, namespace, pod)" in text
    assert "group by (cluster, namespace, pod)" in text
    assert 'container_cpu_usage_seconds_total{cluster!="",container!=""' in text


def test_a_uuid_shard_cuts_the_gpu_pods() -> None:
    """Cut by UUID (a backend that refuses the query), the shard selects the GPU pods' DCGM
    series, not the cAdvisor series, which carry no UUID: each shard answers the containers of
    the pods on its GPUs, and the shards together every GPU pod's."""
    for shard in SHARDS:
        text = queries.BY_ID["cpu_usage_hourly"].promql(3600, "exported", f'c="a",UUID{shard}')
        own, _, pods = text.partition(" and on (namespace, pod) ")
        assert "UUID" not in own and 'c="a",container!=""' in own
        assert f'DCGM_FI_DEV_FB_USED{{c="a",UUID{shard},exported_pod!=""}}' in pods
