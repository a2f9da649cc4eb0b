"""`gpuaudit ack`: a waiver of one finding written into the config file (or its waivers file),
comments and layout kept, read back by the next scan; refusals in one line; an expired waiver's
finding comes back with its history."""

from __future__ import annotations

import json
import os
import stat
from datetime import date
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.app import config, pipeline
from gpuaudit.audit.waivers import Waiver, apply, parse
from gpuaudit.checks.findings import Finding, Impact, Resource, Severity
from gpuaudit.cli import app
from gpuaudit.core.errors import ConfigError

runner = CliRunner()
FP = "GPU001|Pod|search|Deployment/rerank-cold-0"
CONFIG = """\
# Our team's gpuaudit settings.
currency = "USD"   # billing currency

# Accepted findings below.
[[waivers]]
code = "GPU003"      # nightly batch
namespace = "batch"
reason = "nightly pool, reviewed"
expires = 2099-01-01

[prices]
H100 = 4.10
"""


def _ack(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["ack", *args])
    return res.exit_code, res.output


def _scan(cfg: Path) -> pipeline.Outcome:
    return pipeline.run(config.for_scan({"demo": True, "config": cfg, "output": cfg.parent / "r"}))


def test_ack_writes_a_waiver_keeping_the_file_and_the_scan_reads_it(tmp_path: Path) -> None:
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text(CONFIG)
    os.chmod(cfg, 0o640)
    before = _scan(cfg).result
    assert FP in {f.fingerprint() for f in before.findings}
    code, out = _ack(
        FP, "--until", "2099-06-30", "--reason", "cold standby for the launch", "--by", "alice",
        "--demo", "--config", str(cfg),
    )  # fmt: skip
    assert code == 0, out
    assert out.strip().endswith(f"in {cfg}") and FP in out
    text = cfg.read_text()
    # Everything that was there is there, as it was; the waiver goes with the others.
    assert text.startswith(CONFIG.split("[prices]")[0])
    assert text.endswith("[prices]\nH100 = 4.10\n")
    assert "[[waivers]]\n# gpuaudit ack, " in text
    assert (
        'code = "GPU001"\n'
        f'fingerprint = "{FP}"\n'
        'reason = "cold standby for the launch"\n'
        "expires = 2099-06-30\n"
        'by = "alice"\n'
    ) in text
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpuaudit.toml", "r"]  # no temp file
    after = _scan(cfg).result
    assert FP not in {f.fingerprint() for f in after.findings}
    waived = [s for s in after.suppressed if s.finding.fingerprint() == FP]
    assert [(s.waiver.by, s.waiver.expires, s.waiver.fingerprint) for s in waived] == [
        ("alice", date(2099, 6, 30), FP)
    ]
    # Only that finding: the pod's other GPU001 neighbours stay.
    assert len(after.findings) == len(before.findings) - 1


def test_ack_writes_into_the_waivers_file_the_config_names(tmp_path: Path) -> None:
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text('waivers_file = "acks/waivers.toml"\n')
    (tmp_path / "acks").mkdir()
    code, out = _ack(FP, "--until", "2099-01-01", "--reason", "r", "--demo", "--config", str(cfg))
    assert code == 0, out
    assert cfg.read_text() == 'waivers_file = "acks/waivers.toml"\n'
    written = tmp_path / "acks" / "waivers.toml"
    assert f'fingerprint = "{FP}"' in written.read_text()
    assert FP in {s.finding.fingerprint() for s in _scan(cfg).result.suppressed}
    # The waivers file holds waivers only.
    written.write_text(written.read_text() + "\n[scan]\nwindow = '1d'\n")
    with pytest.raises(ConfigError, match="it may hold only"):
        _scan(cfg)


def test_ack_from_an_earlier_json_report(tmp_path: Path) -> None:
    report = tmp_path / "last.json"
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json", "-o", str(report)])
    assert res.exit_code == 0
    some = json.loads(report.read_text())["findings"][3]["fingerprint"]
    cfg = tmp_path / "gpuaudit.toml"  # none yet: created
    code, out = _ack(
        some, "--until", "2099-01-01", "--reason", "known", "--report-json", str(report),
        "--config", str(cfg),
    )  # fmt: skip
    assert code == 0, out
    assert parse(config.load_config(cfg))[0].fingerprint == some


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["GPU001|Pod|search|nope", "--until", "2099-01-01", "--reason", "x", "--demo"],
         "no finding of the bundled demo has the fingerprint 'GPU001|Pod|search|nope'"),
        ([FP, "--until", "2000-01-01", "--reason", "x", "--demo"],
         "--until 2000-01-01 is in the past (today is "),
        ([FP, "--until", "31/12/2099", "--reason", "x", "--demo"],
         "--until '31/12/2099' is not a date; use YYYY-MM-DD"),
        ([FP, "--until", "2099-01-01", "--demo"], "gpuaudit ack needs --reason"),
        ([FP, "--until", "2099-01-01", "--reason", "   ", "--demo"], "gpuaudit ack needs --reason"),
        ([FP, "--until", "2099-01-01", "--reason", "a\nb", "--demo"], "holds a line break"),
        ([FP, "--until", "2099-01-01", "--reason", "x"], "say which findings the fingerprint"),
        ([FP, "--until", "2099-01-01", "--reason", "x", "--demo", "--snapshot", "s.json"],
         "say which findings the fingerprint"),
    ],
)  # fmt: skip
def test_refusals_are_one_line_exit_2_and_leave_the_file(
    tmp_path: Path, args: list[str], said: str
) -> None:
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text(CONFIG)
    code, out = _ack(*args, "--config", str(cfg))
    assert code == 2
    assert out.count("\n") == 1 and out.startswith("gpuaudit: error: ") and said in out, out
    assert cfg.read_text() == CONFIG


def _finding() -> Finding:
    return Finding(
        code="GPU001",
        severity=Severity.HIGH,
        resource=Resource("Pod", "search", "rerank-cold-0-abc"),
        message="m",
        impact=Impact(10.0, 20.0),
        recommendation="r",
        evidence={"owner": "Deployment/rerank-cold-0"},
    )


def test_an_expired_waiver_brings_the_finding_back_with_its_history() -> None:
    f = _finding()
    assert f.fingerprint() == FP
    w = Waiver("GPU001", "cold standby", date(2026, 11, 30), fingerprint=FP, by="alice")
    kept, waived, warnings = apply([f], [w], {}, today=date(2026, 11, 30))
    assert kept == [] and [s.waiver for s in waived] == [w]
    kept, waived, warnings = apply([f], [w], {}, today=date(2026, 12, 1))
    assert waived == []
    assert [k.history for k in kept] == [
        ("waived until 2026-11-30 by alice: cold standby; expired",)
    ]
    assert "expired on 2026-11-30" in warnings[0]
    # A waiver of another fingerprint never matches, expired or not.
    other = Waiver("GPU001", "x", date(2026, 11, 30), fingerprint="GPU001|Pod|search|other")
    assert apply([f], [other], {}, today=date(2026, 12, 1))[0] == [f]


def test_a_fingerprint_of_another_code_is_refused() -> None:
    with pytest.raises(ConfigError, match="not of a GPU002 finding"):
        parse({"waivers": [{"code": "GPU002", "fingerprint": FP, "reason": "r",
                            "expires": date(2099, 1, 1)}]})  # fmt: skip


def test_an_inline_array_of_waivers_gets_one_more_inline_table(tmp_path: Path) -> None:
    cfg = tmp_path / "gpuaudit.toml"
    cfg.write_text(
        'waivers = [\n  {code = "GPU003", reason = "x", expires = 2099-01-01},  # batch\n]\n'
    )
    code, out = _ack(FP, "--until", "2099-01-01", "--reason", "r", "--demo", "--config", str(cfg))
    assert code == 0, out
    text = cfg.read_text()
    assert '{code = "GPU003", reason = "x", expires = 2099-01-01},  # batch' in text
    assert [w.fingerprint for w in parse(config.load_config(cfg))] == ["", FP]
