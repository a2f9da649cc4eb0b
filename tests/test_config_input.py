"""What a config file or an option can hold that once ended in an internal error, an unbounded
read, a raw escape code on the terminal or a silent surprise: each is one clear line (exit 2),
and a config file's live-only keys do not stop a scan of a snapshot or the demo."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaudit.app import config, pipeline
from gpuaudit.cli import app
from gpuaudit.core.errors import ConfigError
from tests.support.paths import ROOT

runner = CliRunner()
LIVE = ["--prometheus-url", "http://127.0.0.1:9", "--no-kubernetes"]


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No GPUAUDIT_ variable from the calling shell, no gpuaudit.toml but the test's, and no
    live collection."""
    for name in [n for n in os.environ if n.startswith("GPUAUDIT_")]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

    def collect(*_: object, **__: object) -> None:
        raise AssertionError("a live collection was attempted")

    monkeypatch.setattr(pipeline.snapshot, "collect_live", collect)


def _refused(args: list[str], toml: str | bytes = "", env: dict[str, str] | None = None) -> str:
    """The one error line of `scan ARGS`, after checking it is one line and exit code 2."""
    if isinstance(toml, bytes):
        Path("gpuaudit.toml").write_bytes(toml)
    elif toml:
        Path("gpuaudit.toml").write_text(toml)
    res = runner.invoke(app, ["scan", "-q", *args], env=env)
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert lines[0].startswith("gpuaudit: error: ")
    assert "internal error" not in res.output and "Traceback" not in res.output
    return lines[0]


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            "a = " + "[" * 5000 + "]" * 5000 + "\n",
            "config file gpuaudit.toml nests tables or arrays too deeply to be a gpuaudit.toml",
        ),
        (
            b'currency = "\xff\xfe"\n',
            "config file gpuaudit.toml is not UTF-8 text (byte 13 cannot be read); save it as "
            "UTF-8",
        ),
        ("[prices]\nH100 = 1e306\n", "[prices] H100: a price per GPU-hour is a number from 0"),
        ("[prices]\ndefault = 1e10\n", "got 1e+10"),
        (
            'currency = "\\u001b[31mUSD"\n',
            "currency '\\x1b[31mUSD' is not a currency code or symbol: use up to 8 letters or "
            "currency signs, such as USD, EUR or €",
        ),
        ('currency = "US Dollars"\n', "currency 'US Dollars' is not a currency code"),
        ("currency = 5\n", "currency 5 is not a currency code"),
        ('currency = "[red]x"\n', "is not a currency code"),
        (
            '[[waivers]]\ncode = "GPU999"\nreason = "old"\nexpires = 2099-01-01\n',
            "waivers[0] (reason old) names GPU999, which is no check's code, so it would never "
            "match",
        ),
        (
            '[[waivers]]\ncode = "gpu-001"\nreason = "typo"\nexpires = 2099-01-01\n',
            "did you mean GPU001?",
        ),
        ("[checks]\nidle_activty = 0.1\n", "unknown setting checks.idle_activty; did you mean"),
        ("[scan]\nfail_of = 'high'\n", "unknown setting scan.fail_of; did you mean fail_on?"),
    ],
    ids=[
        "deep",
        "utf8",
        "price-1e306",
        "price-1e10",
        "currency-escape",
        "currency-words",
        "currency-number",
        "currency-markup",
        "waiver-no-check",
        "waiver-typo",
        "checks-typo",
        "scan-typo",
    ],
)
def test_a_bad_config_file_is_one_clear_line(toml: str | bytes, expected: str) -> None:
    line = _refused(["--demo"], toml)
    assert expected in line
    assert "\x1b" not in line


def test_the_price_bound_keeps_every_figure_finite() -> None:
    """A price at the bound, over a whole window, still makes a report."""
    Path("gpuaudit.toml").write_text("[prices]\ndefault = 1e9\nH100 = 1e9\nA100 = 1e9\n")
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["summary"]["wasted_cost"] > 0


@pytest.mark.parametrize("currency", ["USD", "EUR", "€", "R$", "zł", "CHF", "kr"])
def test_real_currencies_pass(currency: str) -> None:
    Path("gpuaudit.toml").write_text(f'currency = "{currency}"\n')
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["summary"]["currency"] == currency


def test_a_config_file_larger_than_the_bound_is_refused_before_it_is_read_whole() -> None:
    Path("big.toml").write_text("# padding\n" * 120_000)  # 1.2 MB of comments
    line = _refused(["--demo", "--config", "big.toml"])
    assert line == (
        "gpuaudit: error: config file big.toml is larger than 1,048,576 bytes; a gpuaudit.toml "
        "is a few lines (raise GPUAUDIT_MAX_CONFIG_BYTES if this one is genuine)"
    )


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_config_dev_zero_is_read_within_the_bound() -> None:
    line = _refused(["--demo", "--config", "/dev/zero"])
    assert "config file /dev/zero is larger than 1,048,576 bytes" in line


def test_a_config_that_is_a_folder_is_named_so(tmp_path: Path) -> None:
    line = _refused(["--demo", "--config", str(tmp_path)])
    assert line == (
        f"gpuaudit: error: config file {tmp_path} is a folder; name a gpuaudit.toml file"
    )


@pytest.mark.parametrize(
    ("args", "env", "shown"),
    [
        (["--prometheus-token", "t0ken-secret"], {}, "--prometheus-token"),
        ([], {"GPUAUDIT_PROMETHEUS_TOKEN": "t0ken-secret"}, "GPUAUDIT_PROMETHEUS_TOKEN"),
        (["--prometheus-user", "bob-secret"], {}, "--prometheus-user"),
        (["--header", "Authorization: Bearer t0ken-secret"], {}, "an Authorization --header"),
    ],
)
def test_credentials_in_the_url_and_an_option_are_refused_unshown(
    args: list[str], env: dict[str, str], shown: str
) -> None:
    url = "http://alice:pa55word-secret@127.0.0.1:9"
    line = _refused(["--prometheus-url", url, "--no-kubernetes", *args], env=env)
    assert line.startswith(
        "gpuaudit: error: the user info in --prometheus-url (USER:PASSWORD@) and "
    )
    assert shown in line and "are each a credential for Prometheus" in line
    assert "secret" not in line and "alice" not in line


def test_a_token_and_a_user_are_refused_together() -> None:
    line = _refused([*LIVE, "--prometheus-token", "t0ken-secret", "--prometheus-user", "bob"])
    assert "--prometheus-token and --prometheus-user are each a credential" in line
    assert "t0ken" not in line


def test_one_credential_passes() -> None:
    for extra in (["--prometheus-token", "t"], ["--prometheus-user", "u"], []):
        cfg = config.for_scan({"prometheus_url": "http://127.0.0.1:9", **_given(extra)})
        assert cfg.live is not None
    cfg = config.for_scan({"prometheus_url": "http://u:p@127.0.0.1:9"})
    assert cfg.live is not None


def _given(args: list[str]) -> dict[str, object]:
    return {
        args[i].removeprefix("--").replace("-", "_"): args[i + 1] for i in range(0, len(args), 2)
    }


@pytest.mark.parametrize("label", ["__name__", "__name__=DCGM_FI_DEV_GPU_UTIL", "__meta_x"])
def test_a_reserved_cluster_label_is_refused(label: str) -> None:
    with pytest.raises(ConfigError, match=r"names starting with '__' are reserved"):
        config.for_scan({"prometheus_url": "http://127.0.0.1:9", "cluster_label": label})
    line = _refused([*LIVE, "--cluster-label", label])
    assert line.startswith(f"gpuaudit: error: --cluster-label {label.split('=')[0]}: names ")


def test_set_typos_get_did_you_mean() -> None:
    line = _refused(["--demo", "--set", "idle_activty=0.1"])
    assert line == (
        "gpuaudit: error: --set 'idle_activty=0.1': unknown setting idle_activty; did you mean "
        "idle_activity?"
    )
    line = _refused(["--demo", "--set", "zzzz=1"])
    assert "unknown setting zzzz; known: " in line and "idle_activity" in line


def _readme_toml() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Configuration") :]
    found = re.search(r"```toml\n(.*?)```", section, re.S)
    assert found
    return found.group(1)


def test_readmes_example_config_scans_the_demo_and_says_what_it_does_not_use() -> None:
    """README's own gpuaudit.toml sets `step`, a live-only key: the demo is audited, and one
    line says the key is not used."""
    toml = _readme_toml()
    assert "step" in toml
    Path("gpuaudit.toml").write_text(toml)
    res = runner.invoke(app, ["scan", "--demo", "-f", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["findings"]
    notes = [ln for ln in res.stderr.splitlines() if "live scans only" in ln]
    assert notes == [
        "gpuaudit: gpuaudit.toml: step applies to live scans only; not used for --demo"
    ]
    res = runner.invoke(app, ["scan", "--demo", "-q", "-f", "json"])
    assert res.exit_code == 0 and res.stderr == ""


def test_a_files_live_keys_are_one_note_and_a_variable_is_still_refused() -> None:
    Path("gpuaudit.toml").write_text(
        '[scan]\nprometheus_url = "http://p"\ntimeout = 30\nkubeconfig = "k"\n'
    )
    res = runner.invoke(app, ["scan", "--demo", "-f", "json"])
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines()[0] == (
        "gpuaudit: gpuaudit.toml: prometheus_url, kubeconfig, timeout apply to live scans "
        "only; not used for --demo"
    )
    Path("gpuaudit.toml").write_text('[scan]\ndemo = true\nstep = "1h"\n')
    res = runner.invoke(app, ["scan", "-f", "json"])
    assert res.exit_code == 0, res.output
    line = _refused(["--demo"], env={"GPUAUDIT_STEP": "1h"})
    assert "GPUAUDIT_STEP (--step) applies only to a live scan" in line
    line = _refused(["--snapshot", "x.json", "--timeout", "30"])
    assert "--timeout applies only to a live scan" in line


FRAMEWORK = ("Value error", "Input should", "nvalid value for", "env var:", "is not a valid")
"""The wording of Click and pydantic, which Typer's messages are made of."""


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        (
            ["scan", "--demo", "--timeout", "abc"],
            {},
            "--timeout must be a number, got 'abc' (see 'gpuaudit scan --help')",
        ),
        (
            ["scan", "--demo"],
            {"GPUAUDIT_TIMEOUT": "zz"},
            "GPUAUDIT_TIMEOUT (--timeout) must be a number, got 'zz'",
        ),
        (
            ["scan", "--demo", "--max-queries=1.5x"],
            {},
            "--max-queries must be a number, got '1.5x'",
        ),
        (
            ["scan", "--demo", "-f", "xml"],
            {},
            "--format 'xml' is not one of 'table', 'json', 'markdown', 'html', 'junit'",
        ),
        (["scenario", "--gpus", "x"], {}, "--gpus must be a whole number, got 'x'"),
        (["rules", "--format", "yaml"], {}, "--format 'yaml' is not one of"),
        (["scan", "--demo", "-f", "\x1b[31mx"], {}, "--format '\\x1b[31mx' is not one of"),
    ],
)
def test_a_bad_value_speaks_gpuaudits_words_not_the_frameworks(
    args: list[str], env: dict[str, str], expected: str
) -> None:
    res = runner.invoke(app, args, env=env)
    assert res.exit_code == 2
    (line,) = res.stderr.splitlines()
    assert line.startswith("gpuaudit: error: ") and expected in line
    assert not [w for w in FRAMEWORK if w in line], line
    assert "\x1b" not in res.output
