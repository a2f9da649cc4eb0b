"""The cAdvisor memory query of the catalogue (GPU004's OOM-killed containers): the window's most
working set per container of GPU pods only, one query whatever the cluster size, skipped like
every cAdvisor query where the backend lacks the metric."""

from __future__ import annotations

from gpuaudit.sources.prometheus import catalogue as queries


def test_the_memory_query_is_the_window_max_of_gpu_pods_containers() -> None:
    q = queries.BY_ID["memory_working_set_max"]
    assert (q.kind, q.stat, q.metric) == ("window", "max", "container_memory_working_set_bytes")
    text = q.promql(604800, "exported")
    assert text == (
        "max by (namespace, pod, container) (max_over_time(container_memory_working_set_bytes"
        '{container!="",container!="POD"}[604800s])) and on (namespace, pod) ('
        + queries.gpu_pods(604800, "exported")
        + ")"
    )
    # Discovery records the metric's presence beside DCGM's: absent, the query is skipped.
    assert q.metric in queries.CADVISOR_METRICS


def test_one_cluster_of_a_central_backend() -> None:
    q = queries.BY_ID["memory_working_set_max"]
    text = q.promql(86400, "pod", 'cluster="a"')
    assert 'container_memory_working_set_bytes{cluster="a",container!="",container!="POD"}' in text
    assert text.endswith(queries.gpu_pods(86400, "pod", 'cluster="a"') + ")")
