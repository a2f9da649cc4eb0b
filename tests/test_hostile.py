"""Names from the cluster are data: they cannot inject terminal escapes, Rich markup or HTML."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuaudit import snapshot
from gpuaudit.cli import app
from gpuaudit.inventory.gangs import GANG_LISTS
from tests.support.apiserver import KubeAPIServer
from tests.support.factories import Series, gpu_labels, make_node, make_pod
from tests.support.factories import snapshot as make_snapshot
from tests.support.promserver import prometheus
from tests.support.servers import require

runner = CliRunner()

HOSTILE = {
    "ansi": "evil-\x1b[2J\x1b[31mred\x1b[0m",
    "markup": "pod-[bold red]boom[/bold red]-[link=http://x]y[/link]",
    "html": "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "newline": "line1\nline2\rline3",
    "long": "x" * 5000,
    "bidi": "abc\u202egnp.exe",
}


@pytest.fixture
def hostile_snapshot(tmp_path: Path) -> Path:
    series = [
        Series(
            gpu_labels(
                uuid=f"GPU-{i}", gpu=str(i), pod=name, namespace=f"ns-{key}", host="node-\x1b[5m"
            ),
            act=[0.0] * 8,
        )
        for i, (key, name) in enumerate(HOSTILE.items())
    ]
    snap = make_snapshot(series, hours=8)
    snap = snap.with_manifest(cluster="[red]cluster[/red]\x1b]0;title\x07")
    path = tmp_path / "hostile.json"
    snapshot.write(snap, path)
    return path


def test_table_shows_names_literally_and_harmlessly(hostile_snapshot: Path) -> None:
    res = runner.invoke(app, ["scan", "--snapshot", str(hostile_snapshot)], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    assert "\x1b" not in out  # no escape sequence reaches the terminal
    assert "\\x1b[2J" in out  # shown as visible text instead
    assert "[bold red]boom[/bold red]" in out  # markup printed, not interpreted
    assert "<script>alert(1)</script>" in out
    assert "line1\\x0aline2" in out
    assert "\u202e" not in out
    assert "x" * 5000 not in out  # very long names are cut


def test_json_keeps_names_exact_and_escaped(hostile_snapshot: Path) -> None:
    res = runner.invoke(app, ["scan", "--snapshot", str(hostile_snapshot), "-f", "json"])
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stdout and "\n" not in json.dumps(res.stdout)[1:-1].replace("\\n", "")
    doc = json.loads(res.stdout)
    names = {f["resource"]["name"] for f in doc["findings"]}
    assert names == set(HOSTILE.values())  # exact data for machines


def test_debug_log_redacts_authorization(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        [
            "--debug",
            "scan",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--prometheus-token",
            "tok-abc-123",
            "--timeout",
            "1",
            "--no-kubernetes",
            "-q",
        ],
    )
    assert res.exit_code == 2
    assert "tok-abc-123" not in res.output
    assert "<redacted>" in res.output


def _hidden_characters() -> list[str]:
    """Every character of Unicode categories Cc and Cf (and the line and paragraph
    separators), as this Python knows them: U+200E, U+200F and U+061C among them."""
    return [
        chr(c)
        for c in range(sys.maxunicode + 1)
        if unicodedata.category(chr(c)) in ("Cc", "Cf", "Zl", "Zp")
    ]


HIDDEN = _hidden_characters()


@pytest.fixture(scope="module")
def invisible_snapshot(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Every control and format character, in twenty-character pieces, planted in pod and
    namespace names, a node, a GPU model, a pod label, the cluster, the manifest's warnings and
    reasons, an XID message and a resolved finding of an earlier report."""
    tmp = tmp_path_factory.mktemp("invisible")
    pieces = ["".join(HIDDEN[i : i + 20]) for i in range(0, len(HIDDEN), 20)]
    series, pods = [], []
    for i, piece in enumerate(pieces):
        name, ns = f"p{i}-{piece}", f"ns{i}-{piece[::-1]}"
        labels = gpu_labels(
            uuid=f"GPU-{i}", gpu=str(i % 8), pod=name, namespace=ns, host=f"n{i // 8}-{piece}"
        )
        labels["modelName"] = f"H100-{piece}"
        series.append(Series(labels, act=[0.0] * 8, xids=[79] if i == 0 else []))
        pods.append(make_pod(name, namespace=ns, node=f"n{i // 8}-{piece}", labels={"t": piece}))
    snap = make_snapshot(series, hours=8, pods=pods)
    xid = snap.prometheus["xid_max"][0]["body"]["data"]["result"][0]["metric"]
    xid["err_msg"] = "fallen off the bus" + pieces[0]
    snap = snap.with_manifest(
        cluster="c-" + pieces[1],
        warnings=tuple(f"w{i}-{p}" for i, p in enumerate(pieces)),
        complete=False,
        incomplete_reasons=tuple(f"r{i}-{p}" for i, p in enumerate(pieces)),
        # Why lists were not read: the reasons of skipped checks.
        objects=dict.fromkeys(("nodes", *GANG_LISTS), f"forbidden: {pieces[5]}"),
    )
    path = tmp / "invisible.json"
    snapshot.write(snap, path)
    res = runner.invoke(app, ["scan", "--snapshot", str(path), "-f", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    gone = dict(doc["findings"][0])
    gone.update(fingerprint="GPU001|Pod|old|gone", message="was here " + pieces[2])
    gone["resource"] = {"kind": "Pod", "namespace": "old-" + pieces[3], "name": pieces[4]}
    doc["findings"].append(gone)
    previous = tmp / "previous.json"
    previous.write_text(json.dumps(doc))
    return path, previous


@pytest.mark.parametrize("fmt", ["table", "markdown", "html", "junit"])
def test_every_control_and_format_character_is_shown_escaped(
    invisible_snapshot: tuple[Path, Path], fmt: str
) -> None:
    """Issue 20: U+200E, U+200F and U+061C reached the table, Markdown, HTML and JUnit (only
    U+202A-202E and U+2066-2069 were neutralised). No Cc or Cf character reaches any of them
    now, other than the report's own line breaks; each is shown as its escape."""
    path, previous = invisible_snapshot
    args = ["scan", "--snapshot", str(path), "-f", fmt, "--group-by-label", "t"]
    res = runner.invoke(app, [*args, "--previous", str(previous)], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    out = res.stdout
    leaked = {f"U+{ord(c):04X}" for c in set(out) & set(HIDDEN) if c != "\n"}
    assert not leaked, f"{fmt} shows these as themselves: {sorted(leaked)[:20]}"
    for mark in ("\\u200e", "\\u200f", "\\u061c", "\\u202e", "\\x1b"):
        assert mark in out.replace("\\\\", "\\"), mark


# ---- a hostile cluster, through a real Prometheus and the test API server ---------------------

LIVE_END = 1_700_020_800  # an hour boundary
LIVE_HOURS = 6


Row = tuple[str, dict[str, str], float, int, int]
"""(metric, labels, value, since, until): samples of a series over [since, until)."""


def _openmetrics(rows: list[Row]) -> str:
    """Samples every 5 minutes over [since, until) for each (metric, labels, value)."""
    by_metric: dict[str, list[tuple[dict[str, str], float, int, int]]] = {}
    for metric, labels, value, since, until in rows:
        by_metric.setdefault(metric, []).append((labels, value, since, until))
    out = []
    for metric, series in by_metric.items():
        out.append(f"# TYPE {metric} gauge\n")
        for labels, value, since, until in series:
            text = ",".join(f'{k}="{v}"' for k, v in labels.items())
            out.extend(f"{metric}{{{text}}} {value!r} {t}\n" for t in range(since, until, 300))
    out.append("# EOF\n")
    return "".join(out)


def _gpu(i: int, **extra: str) -> dict[str, str]:
    labels = {
        "gpu": str(i),
        "UUID": f"GPU-{i}",
        "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": "node-a",
        "pod": "nvidia-dcgm-exporter-abcde",
        "namespace": "gpu-operator",
        "exported_pod": f"p{i}",
        "exported_namespace": "ml",
        "exported_container": "c",
    }
    labels.update(extra)
    return labels


@pytest.fixture(scope="module")
def hostile_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A real Prometheus holding what a broken or hostile exporter can publish (an activity of
    50 and of -0.5, a `gpu` label `²`, an XID message that spells another code, a power of
    1e308 whose sum overflows), and the test API server serving what a tenant or a broken node
    can create (a Kueue pod-group size `²`, node GPU counts `1e9`, `nan` and `Infinity`, a
    LeaderWorkerSet of two billion replicas)."""
    promtool = require("promtool")
    tmp = tmp_path_factory.mktemp("hostile-cluster")
    act, xid = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_XID_ERRORS"
    start = LIVE_END - LIVE_HOURS * 3600
    end, onset = LIVE_END + 1, start + 3600
    rows: list[Row] = [
        (act, _gpu(0), 50.0, start, end),
        (act, _gpu(1), -0.5, start, end),
        (act, _gpu(2, gpu="\u00b2"), 0.0, start, end),
        (act, _gpu(3), 0.0, start, end),
        (act, _gpu(4), 0.0, start, end),
        # The gauge reads 0 for an hour, then changes to 79: one XID event in the window (a
        # code held from the window's start would be stale, deciding nothing; see GPU070).
        (xid, _gpu(3, err_code="0", err_msg="No Error"), 0.0, start, onset),
        (xid, _gpu(3, err_code="79", err_msg="bus; \u00b2: x"), 79.0, onset, end),
        ("DCGM_FI_DEV_POWER_USAGE", _gpu(4), 1e308, start, end),
    ]
    om = tmp / "hostile.om"
    om.write_text(_openmetrics(rows), encoding="utf-8")
    tsdb = tmp / "tsdb"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(om), str(tsdb)],
        check=True,
        capture_output=True,
    )
    pods = [make_pod(f"p{i}", namespace="ml", node="node-a", started=start) for i in range(5)]
    pods[0]["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "g"
    pods[0]["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"] = "\u00b2"
    nodes = [make_node("node-a")]
    for name, count in (("node-b", "1e9"), ("node-c", "nan"), ("node-d", "Infinity")):
        node = make_node(name)
        node["metadata"]["labels"]["nvidia.com/gpu.count"] = count
        node["status"]["allocatable"]["nvidia.com/gpu"] = count
        nodes.append(node)
    lws = {
        "metadata": {"name": "lws", "namespace": "ml"},
        "spec": {"replicas": 2_000_000_000, "leaderWorkerTemplate": {"size": 2_000_000_000}},
    }
    lists = {
        "pods": {"apiVersion": "v1", "kind": "PodList", "items": pods},
        "nodes": {"apiVersion": "v1", "kind": "NodeList", "items": nodes},
        "leaderworkersets": {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSetList",
            "items": [lws],
        },
    }
    with prometheus(tsdb) as url, KubeAPIServer(lists) as kube:
        yield url, kube.write_kubeconfig(tmp / "kubeconfig")


def test_a_hostile_cluster_is_audited_with_warnings_never_a_crash(
    hostile_cluster: tuple[str, Path],
) -> None:
    """Issue 20, items 5 to 8 as a live scan meets them: no internal error, every refusal a
    warning, the audit incomplete, and no figure taken from the bad values."""
    url, kubeconfig = hostile_cluster
    window = ["--window", f"{LIVE_HOURS}h", "--end", str(LIVE_END)]
    args = ["--prometheus-url", url, "--kubeconfig", str(kubeconfig), *window]
    res = runner.invoke(app, ["scan", "-f", "json", "-q", *args])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    warnings = "\n".join(doc["warnings"])
    assert doc["complete"] is False
    reasons = "\n".join(doc["incomplete_reasons"])
    assert "values of act_hourly out of range" in reasons
    assert "figures of Kubernetes objects could not be read" in reasons
    assert "12 values of act_hourly (DCGM_FI_PROF_GR_ENGINE_ACTIVE) were outside" in warnings
    # The activities of 50 and -0.5 are refused in the hourly means, which the window means
    # are made of: those GPUs have none.
    assert "window means of act_mean" not in warnings
    assert "NaN, infinite or malformed" in warnings  # the power means overflowed to +Inf
    assert "annotation kueue.x-k8s.io/pod-group-total-count '²' is not a count" in warnings
    for node, count in (("node-b", "1e9"), ("node-c", "nan"), ("node-d", "Infinity")):
        assert f"node {node}: label nvidia.com/gpu.count '{count}'" in warnings
        assert f"node {node}: allocatable nvidia.com/gpu '{count}'" in warnings
    # Four nodes of 8 GPUs (their capacity): the ignored counts add nothing.
    assert doc["summary"]["gpus_total"] == 32
    # Activities of 50 and -0.5 are taken into no idle figure: only the three GPUs at 0 are
    # idle, 6 hours each.
    idle = {f["resource"]["name"] for f in doc["findings"] if f["code"] == "GPU001"}
    assert idle == {"p2", "p3", "p4"} and doc["summary"]["idle_gpu_hours"] == 18.0
    # The XID message cannot spell a second code.
    (xid,) = [f for f in doc["findings"] if f["code"] == "GPU070"]
    assert "XID 79 (bus, ²: x, 1 event)" in xid["message"]
    for fmt in ("table", "markdown", "html", "junit"):
        out = runner.invoke(app, ["scan", "-f", fmt, "-q", *args])
        assert out.exit_code == 0 and "internal error" not in out.output, out.output


# ---- hostile snapshot files and earlier reports: the files are the real input -----------------


def _idle_doc(hours: int = 8, n: int = 8) -> dict[str, Any]:
    """A version 1 snapshot document of `n` GPUs held and idle for `hours` hours."""
    series = [
        Series(
            gpu_labels(uuid=f"GPU-{i}", gpu=str(i), pod=f"p{i}", namespace="ml"), act=[0.0] * hours
        )
        for i in range(n)
    ]
    pods = [make_pod(f"p{i}") for i in range(n)]
    doc: dict[str, Any] = make_snapshot(
        series, hours, pods=pods, nodes=[make_node("node-a")]
    ).to_json()
    return doc


def _results(doc: dict[str, Any], qid: str) -> list[dict[str, Any]]:
    return [r for e in doc["prometheus"][qid] for r in e["body"]["data"]["result"]]


def _scan_doc(tmp_path: Path, doc: dict[str, Any], *extra: str) -> tuple[int, dict[str, Any], str]:
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(doc))
    res = runner.invoke(app, ["scan", "--snapshot", str(path), "-f", "json", *extra])
    assert (
        "internal error" not in res.output
        and res.exception is None
        or isinstance(res.exception, SystemExit)
    ), res.output
    report = json.loads(res.stdout) if res.exit_code in (0, 1) else {}
    return res.exit_code, report, res.stderr


def test_points_outside_the_window_are_not_counted(tmp_path: Path) -> None:
    """Issue 20: a backend answering with points outside the requested range made 8 GPUs over
    168 h 12,858 idle GPU-hours. They are left out, said, and the audit is incomplete."""
    doc = _idle_doc()
    end = doc["manifest"]["window"]["end"]
    for r in _results(doc, "act_hourly"):
        r["values"] = r["values"] + [[end + 3600 * k, "0"] for k in range(1, 200)]
    code, report, _ = _scan_doc(tmp_path, doc)
    assert code == 0 and report["summary"]["idle_gpu_hours"] == 64.0
    assert report["complete"] is False
    assert any("1592 points of act_hourly lay outside" in w for w in report["warnings"])


def test_a_series_shifted_by_1e12_seconds_is_left_out_not_a_crash(tmp_path: Path) -> None:
    """Issue 20: `year -29662 is out of range`."""
    doc = _idle_doc()
    for r in _results(doc, "act_hourly"):
        r["values"] = [[t - 1e12, v] for t, v in r["values"]]
    code, report, _ = _scan_doc(tmp_path, doc)
    assert code == 0 and report["complete"] is False
    assert any("64 points of act_hourly lay outside" in w for w in report["warnings"])


@pytest.mark.parametrize(("value", "bad"), [("50", 64), ("-0.5", 64), ("1.0000000001", 0)])
def test_activity_out_of_its_range_is_refused_not_taken_at_face_value(
    tmp_path: Path, value: str, bad: int
) -> None:
    """Issue 20: an activity of 50 (a percentage where a ratio belongs) or -0.5 read as it
    came. Refused, said, incomplete; rounding just past a bound is clipped, not refused."""
    doc = _idle_doc()
    for r in _results(doc, "act_hourly"):
        r["values"] = [[t, value] for t, _ in r["values"]]
    code, report, _ = _scan_doc(tmp_path, doc)
    assert code == 0
    if bad:
        assert report["complete"] is False
        assert any(f"{bad} values of act_hourly" in w for w in report["warnings"])
        # No hourly activity is left to call idle or busy: none is made up.
        assert report["summary"]["mean_activity"] is None
    else:
        assert report["complete"] is True and report["summary"]["mean_activity"] == 1.0


def test_label_values_that_are_not_text_make_the_series_malformed(tmp_path: Path) -> None:
    doc = _idle_doc()
    for r in _results(doc, "act_hourly"):
        r["metric"]["exported_pod"] = 5
        r["metric"]["gpu"] = ["x"]
    code, report, _ = _scan_doc(tmp_path, doc)
    assert code == 0 and report["complete"] is False
    assert any("8 malformed series" in w for w in report["warnings"])


def test_huge_sums_and_negative_counts_are_refused(tmp_path: Path) -> None:
    """Issue 20: a sum of 1e308 (inf once chunks add up: JSON output failed) and a negative
    count (a NaN mean) are refused, said, and the audit is incomplete; JSON is valid. The
    activity's window sum is an older snapshot's (`act_sum`: a collection reads the window mean
    from the hourly means now), read as before."""
    doc = _idle_doc()
    doc["prometheus"]["act_sum"] = json.loads(json.dumps(doc["prometheus"]["act_count"]))
    for r in _results(doc, "act_sum"):
        r["value"][1] = "1e308"
    doc["prometheus"]["act_sum"] = doc["prometheus"]["act_sum"] * 3  # three chunks
    for r in _results(doc, "util_count") + _results(doc, "fb_used_count"):
        r["value"][1] = "-60"
    code, report, _ = _scan_doc(tmp_path, doc)
    assert code == 0 and report["complete"] is False
    assert any("8 window means of act_mean" in w for w in report["warnings"])
    for finding in report["findings"]:
        assert math.isfinite(finding["impact"]["gpu_hours"])


@pytest.mark.parametrize(
    "window",
    [{"start": -1e300}, {"step": 0.5}, {"step": 1e300}, {"end": 1.7e12}, {"start": 1, "step": 1}],
)
def test_unusable_windows_end_in_one_line_and_exit_2(
    tmp_path: Path, window: dict[str, float]
) -> None:
    doc = _idle_doc()
    doc["manifest"]["window"].update(window)
    code, _, err = _scan_doc(tmp_path, doc)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuaudit: error: ") and "window" in lines[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "is not valid JSON"),
        ('{"schema_version": "1.0", "findings": [], "summary": {"wasted_cost": NaN}}', "not valid"),
        (
            '{"schema_version": "1.0", "findings": [], "summary": {"gpus_total": 1e999}}',
            "not valid",
        ),
    ],
)
@pytest.mark.parametrize("flag", ["--baseline", "--previous"])
def test_earlier_reports_that_are_not_strict_json_are_one_clear_error(
    tmp_path: Path, text: str, message: str, flag: str
) -> None:
    """Issue 20: a deeply nested earlier report raised RecursionError; a `NaN` literal was taken
    as a number."""
    earlier = tmp_path / "earlier.json"
    earlier.write_text(text)
    code, _, err = _scan_doc(tmp_path, _idle_doc(), flag, str(earlier))
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "earlier report" in lines[0]


def test_an_earlier_report_larger_than_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"schema_version": "1.0", "findings": [], "pad": "x" * 5000}))
    monkeypatch.setenv("GPUAUDIT_MAX_REPORT_BYTES", "4096")
    code, _, err = _scan_doc(tmp_path, _idle_doc(), "--previous", str(earlier))
    assert code == 2 and "is larger than 4096 bytes" in err


def test_deep_values_in_an_earlier_report_do_not_reach_this_report(tmp_path: Path) -> None:
    """A resolved finding is shown with its texts and numbers only: nesting the file was
    allowed to hold (1000 levels) cannot make this report's JSON fail."""
    code, report, _ = _scan_doc(tmp_path, _idle_doc())
    gone = dict(report["findings"][0], fingerprint="GPU001|Pod|old|gone")
    gone["message"] = [[[[[["deep"]]]]]] * 3
    gone["impact"] = {"gpu_hours": json.loads("[" * 900 + "]" * 900), "cost": 5}
    report["findings"].append(gone)
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps(report))
    code, now, _ = _scan_doc(tmp_path, _idle_doc(), "--previous", str(earlier))
    assert code == 0
    (resolved,) = now["comparison"]["resolved"]
    assert "message" not in resolved and resolved["impact"] == {"cost": 5}
