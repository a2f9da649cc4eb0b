"""The one serving metrics query (`catalogue.SERVING`) against a real Prometheus: each pod's busy
level of each serving metric, summed over its series (models, engines) and averaged over the
minutes it was above 0, joined by `exported_*` where a series carries them, else by the scrape
target's `namespace`/`pod`; exact to the hand-computed figure."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from gpuaudit.inventory import serving_metrics
from gpuaudit.snapshot.answers import parse
from gpuaudit.sources.prometheus import catalogue
from tests.support import promserver

pytestmark = pytest.mark.server

END = 1_764_547_200  # 2025-12-01T00:00:00Z, a whole hour
WINDOW_S = 7200


def _openmetrics(path: Path) -> None:
    """Two hours at 60 s: ml/llm-a's queue at 3 for 10 minutes then 5 for 5; ml/llm-b's two
    models' running requests overlapping; serve/tgi-0's queue as a collector relabelled it
    (`exported_*`); a pod whose queue never rose above 0; and a metric that is not a serving
    one."""
    start = END - WINDOW_S
    series: dict[str, list[tuple[str, list[float]]]] = {
        "vllm:num_requests_waiting": [
            (
                'namespace="ml",pod="llm-a"',
                [3.0 if 30 <= i < 40 else 5.0 if 40 <= i < 45 else 0 for i in range(121)],
            ),
            ('namespace="ml",pod="quiet-0"', [0.0] * 121),
        ],
        "vllm:num_requests_running": [
            (
                'namespace="ml",pod="llm-b",model_name="x"',
                [2.0 if 50 <= i < 60 else 0 for i in range(121)],
            ),
            (
                'namespace="ml",pod="llm-b",model_name="y"',
                [1.0 if 55 <= i < 65 else 0 for i in range(121)],
            ),
        ],
        "tgi_queue_size": [
            (
                'namespace="monitoring",pod="collector-1",exported_namespace="serve",exported_pod="tgi-0"',
                [7.0 if 70 <= i < 72 else 0 for i in range(121)],
            ),
        ],
        "some_other_queue": [('namespace="ml",pod="llm-a"', [9.0] * 121)],
    }
    lines: list[str] = []
    for name, members in series.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, values in members:
            lines += [f"{name}{{{labels}}} {v} {start + 60 * i}" for i, v in enumerate(values)]
    lines.append("# EOF")
    path.write_text("\n".join(lines) + "\n")


def test_one_query_gives_each_pods_busy_level_by_metric(tmp_path: Path) -> None:
    om = tmp_path / "serving.om"
    _openmetrics(om)
    tsdb = tmp_path / "tsdb"
    promserver.create_blocks(om, tsdb)
    expr = catalogue.SERVING.promql(WINDOW_S, "exported")
    with promserver.prometheus(tsdb) as url:
        body = httpx.post(f"{url}/api/v1/query", data={"query": expr, "time": END}).json()
    assert body["status"] == "success", body
    answer = parse(body, "serving_busy")
    got = serving_metrics.read(
        {catalogue.SERVING.id: [answer]}, "http://prometheus.monitoring.svc:9090", ""
    )
    assert got.answered and got.server == "http://prometheus.monitoring.svc:9090"
    assert got.levels == {
        ("ml", "llm-a"): {"vllm:num_requests_waiting": pytest.approx((10 * 3 + 5 * 5) / 15)},
        # 2 for 5 min, 2 + 1 for 5, 1 for 5: the pod's sum over its models.
        ("ml", "llm-b"): {"vllm:num_requests_running": pytest.approx((10 + 15 + 5) / 15)},
        ("serve", "tgi-0"): {"tgi_queue_size": pytest.approx(7.0)},
    }
    assert got.label[("serve", "tgi-0")] == "exported_pod"
    assert got.label[("ml", "llm-a")] == "pod"


def test_nothing_recorded_is_nothing_known() -> None:
    got = serving_metrics.read({}, None, "")
    assert not got.answered and got.levels == {} and got.server == ""
