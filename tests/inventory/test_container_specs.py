"""One key for a container on both sides of the cAdvisor join (`container_specs`): the CPU
(GPU041) and memory (GPU004) readers key a series as the DCGM holdings key its pod."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gpuaudit.inventory import container_memory, container_specs, prom

WHO = {"namespace": "ml", "pod": "train-0", "container": "c"}


def test_a_series_is_keyed_by_its_clusters_namespace_as_the_holdings_are() -> None:
    key = container_specs.cadvisor_key({**WHO, "cluster": "a"}, "cluster")
    holding_ns = prom.identity(
        {"UUID": "G", "exported_pod": "train-0", "exported_namespace": "ml", "cluster": "a"},
        "exported",
        cluster_label="cluster",
    ).namespace
    assert key == (holding_ns, "train-0", "c") == ("a/ml", "train-0", "c")
    assert container_specs.cadvisor_key({**WHO, "cluster": "a"}, "") == ("ml", "train-0", "c")
    assert container_specs.cadvisor_key({**WHO, "container": ""}, "") is None


def test_memory_of_two_clusters_pods_of_one_name_stays_apart() -> None:
    answer = SimpleNamespace(
        rtype="vector",
        metrics=[{**WHO, "cluster": "a"}, {**WHO, "cluster": "b"}],
        values=np.array([8.0 * 2**30, 2.0 * 2**30]),
    )
    used, answered = container_memory.used({container_memory.QUERY: [answer]}, "cluster")
    assert answered
    assert used == {("a/ml", "train-0"): {"c": 8.0 * 2**30}, ("b/ml", "train-0"): {"c": 2**31}}
