"""The configuration of one run of `scan` or `snapshot save`: resolved once, validated in one
place, frozen.

Every option follows one precedence: its flag, then its `GPUAUDIT_...` environment variable, then
the `[scan]` table of `gpuaudit.toml`, then the default. The command line resolves the first two
(a flag beats its variable) and hands over, by option name, only the options the user gave;
`for_scan` and `for_snapshot_save` read the file once, fill in the rest from it and from the
defaults, and check everything a user can get wrong before any data is read.

`[scan]` keys are the option names with `_` for `-` (`prometheus_url = "..."`, `fail_on = "high"`,
`namespace = ["ml", "batch"]`); `docs/config.md` lists them. Relative paths in the file are
relative to the file's folder. Secrets (`--prometheus-token`, `--prometheus-password`, `--webhook`)
are never read from the file, which is easily committed or shared: pass them by flag or
environment variable (a CI secret, a Kubernetes Secret). `--set` has its own table, `[checks]`.
Options that exclude each other (`--demo`, `--snapshot`, `--prometheus-url`; `--baseline`,
`--previous`) are taken together from the first layer that sets any of them, so a flag replaces
the file's choice instead of clashing with it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any

from gpuaudit.errors import ConfigError, GpuauditError
from gpuaudit.findings import Severity
from gpuaudit.options import BY_NAME, OPTIONS, Kind
from gpuaudit.report import FORMATS
from gpuaudit.settings import (
    Settings,
    known_check_settings,
    load_config,
    parse_duration,
    settings_from,
)
from gpuaudit.sources.live import (
    LiveOptions,
    display_url,
    parse_cluster_label,
    parse_headers,
)
from gpuaudit.waivers import Waiver
from gpuaudit.waivers import parse as parse_waivers

SCAN_KEYS = {o.name: o.kind for o in OPTIONS if o.in_file == "scan"}
"""The keys of `[scan]` in `gpuaudit.toml`, one per option the file may set."""

DEFAULTS = {o.name: o.default for o in OPTIONS if o.default is not None}
"""Defaults other than off, empty or unset (the command line's help shows these)."""

_GROUPS = (("demo", "snapshot", "prometheus_url"), ("baseline", "previous"))
_GROUP_OF = {name: group for group in _GROUPS for name in group}


@dataclass(frozen=True)
class Config:
    """Everything one run of `scan` or `snapshot save` needs, resolved and validated."""

    settings: Settings
    """Window, prices, currency, check thresholds and the topology folder."""
    snapshot: Path | None = None
    """The snapshot file to audit (the bundled demo's for `--demo`); None for a live scan."""
    live: LiveOptions | None = None
    """How to collect live data; None when auditing a snapshot file."""
    format: str = "table"
    """The report format, one of `gpuaudit.report.FORMATS`."""
    output: Path | None = None
    """Where the report goes; None for stdout."""
    fail_on: Severity | None = None
    """Exit 1 for a finding at or above this severity; None never."""
    strict: bool = False
    """Exit 2 when the audit is incomplete."""
    baseline: Path | None = None
    """An earlier JSON report that only new or worse findings are gated against (CI)."""
    previous: Path | None = None
    """An earlier JSON report to show the trend against (cron)."""
    group_by_label: str = ""
    """A pod label to break waste down by, or empty."""
    webhook: str | None = None
    """A Slack-compatible incoming webhook URL to post the summary to."""
    quiet: bool = False
    """No progress bar or summary line."""
    waivers: tuple[Waiver, ...] = ()
    """Accepted findings, from `[[waivers]]`."""
    timings: bool = False
    """Report the time of each stage (`GPUAUDIT_TIMINGS`, read by the benchmarks)."""
    window_given: bool = False
    """Whether `--window` was given (flag, environment or file): on a snapshot it narrows the
    audit to part of the recorded window, which otherwise is audited whole."""


def for_scan(given: Mapping[str, object]) -> Config:
    """The configuration of `scan` from the options the user gave (flag or environment)."""
    doc, opts = _layers(given)
    fail_on = _fail_on(opts.text("fail_on", "none"))
    demo, snapshot, url = opts.flag("demo"), opts.path("snapshot"), opts.text("prometheus_url")
    chosen = sum([demo, snapshot is not None, bool(url)])
    if chosen == 0:
        raise ConfigError("say what to audit: --demo, --snapshot FILE or --prometheus-url URL")
    if chosen > 1:
        raise ConfigError("use only one of --demo, --snapshot and --prometheus-url")
    settings = _settings(doc, opts, opts.strings("set"), opts.path("topology"))
    live = _live(opts, url) if url else None
    baseline, previous = opts.path("baseline"), opts.path("previous")
    if baseline and previous:
        raise ConfigError("use --baseline (CI) or --previous (trend), not both")
    return Config(
        settings=settings,
        snapshot=demo_path() if demo else snapshot,
        live=live,
        format=_format(opts.text("format", "table")),
        output=opts.path("output"),
        fail_on=fail_on,
        strict=opts.flag("strict"),
        baseline=baseline,
        previous=previous,
        group_by_label=opts.text("group_by_label") or "",
        webhook=opts.text("webhook"),
        quiet=opts.flag("quiet"),
        waivers=tuple(parse_waivers(doc)),
        timings=bool(os.environ.get("GPUAUDIT_TIMINGS")),
        window_given=opts.text("window") is not None,
    )


def for_snapshot_save(given: Mapping[str, object]) -> Config:
    """The configuration of `snapshot save` (a live source, a window) from the options given."""
    doc, opts = _layers(given)
    url = opts.text("prometheus_url")
    if not url:
        raise ConfigError("snapshot save needs --prometheus-url URL")
    settings = _settings(doc, opts)
    return Config(settings=settings, live=_live(opts, url), quiet=opts.flag("quiet"))


def parse_end(text: str | None) -> float | None:
    """`--end`: unix seconds or an RFC 3339 time; None means now."""
    if text is None or text == "":
        return None
    t = text.strip()
    try:
        return float(t)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(f"invalid --end {text!r}; use unix seconds or RFC 3339") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt.timestamp()


def demo_path() -> Path:
    """The bundled demo snapshot."""
    try:
        res = files("gpuaudit.fixtures").joinpath("demo.snapshot.json.gz")
        if res.is_file():
            return Path(str(res))
    except (ModuleNotFoundError, TypeError):
        pass
    here = Path(__file__).resolve().parent.parent / "fixtures" / "demo.snapshot.json.gz"
    if here.is_file():
        return here
    raise GpuauditError("the bundled demo snapshot is missing from this installation")


class _Options:
    """Each option's value: as the user gave it, else from `[scan]`, else the default."""

    def __init__(self, given: Mapping[str, object], scan: Mapping[str, object]):
        unknown = set(given) - set(BY_NAME)
        if unknown:  # the command line and this module disagree: a bug, not a user error
            raise TypeError(f"not options of gpuaudit: {', '.join(sorted(unknown))}")
        self._given, self._scan = given, scan

    def _value(self, name: str) -> object:
        if name in self._given:
            return self._given[name]
        if any(other in self._given for other in _GROUP_OF.get(name, ())):
            return None
        return self._scan.get(name, DEFAULTS.get(name))

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self._value(name)
        return default if value is None else str(value)

    def flag(self, name: str) -> bool:
        return bool(self._value(name))

    def number(self, name: str) -> float:
        value = self._value(name)
        if not isinstance(value, (int, float)):
            raise TypeError(f"{name} is not a number: {value!r}")
        return float(value)

    def path(self, name: str) -> Path | None:
        value = self._value(name)
        return None if value is None else Path(str(value))

    def strings(self, name: str) -> tuple[str, ...]:
        value = self._value(name)
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} is not a list: {value!r}")
        return tuple(str(v) for v in value)


def _layers(given: Mapping[str, object]) -> tuple[dict[str, Any], _Options]:
    path = given.get("config")
    if path is not None and not isinstance(path, Path):
        raise TypeError(f"config is not a path: {path!r}")
    doc = load_config(path)
    scan = doc.get("scan", {})
    if not isinstance(scan, dict):
        raise ConfigError("[scan] must be a table")
    folder = (path or Path("gpuaudit.toml")).parent
    values = {key: _from_file(key, value, folder) for key, value in scan.items()}
    return doc, _Options(given, values)


def _from_file(name: str, value: object, folder: Path) -> object:
    """A `[scan]` value, checked against its kind; relative paths resolved against `folder`."""
    kind = SCAN_KEYS.get(name)
    if kind is None:
        known = BY_NAME.get(name)
        if known is None:
            raise ConfigError(f"unknown setting scan.{name}; known: {', '.join(sorted(SCAN_KEYS))}")
        raise ConfigError(
            f"[scan] {name} is not read from gpuaudit.toml ({known.in_file}); "
            f"use {known.flag} or {known.envvar}"
        )
    ok = {
        Kind.TEXT: isinstance(value, str),
        Kind.FLAG: isinstance(value, bool),
        Kind.NUMBER: isinstance(value, (int, float)) and not isinstance(value, bool),
        Kind.PATH: isinstance(value, str),
        Kind.LIST: isinstance(value, list) and all(isinstance(v, str) for v in value),
        Kind.SPAN: isinstance(value, (str, int, float, date)) and not isinstance(value, bool),
    }[kind]
    if not ok:
        raise ConfigError(f"[scan] {name} must be {kind.value}, got {value!r}")
    if kind is Kind.PATH:
        return folder / Path(str(value)).expanduser()
    if kind is Kind.SPAN and isinstance(value, date):  # a TOML date-time for `end`
        return value.isoformat()
    return value


def _fail_on(text: str | None) -> Severity | None:
    if text is None or text.strip().lower() == "none":
        return None
    try:
        return Severity.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--fail-on: {exc}") from None


def _format(text: str | None) -> str:
    if text is None or text not in FORMATS:
        raise ConfigError(f"[scan] format must be one of {', '.join(FORMATS)}, got {text!r}")
    return text


def _settings(
    doc: Mapping[str, Any],
    opts: _Options,
    sets: tuple[str, ...] = (),
    topology: Path | None = None,
) -> Settings:
    checks = _check_overrides(sets)
    window, step, end = opts.text("window"), opts.text("step"), opts.text("end")
    return settings_from(
        doc,
        window_s=parse_duration(window) if window else None,
        step_s=parse_duration(step) if step else None,
        end=parse_end(end),
        topology_dir=_topology_dir(topology),
        **checks,
    )


def _check_overrides(sets: tuple[str, ...]) -> dict[str, float]:
    """`--set NAME=NUMBER` entries, checked against the thresholds the checks declare."""
    known = known_check_settings()
    checks: dict[str, float] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix("checks.")
        if not sep or key not in known:
            raise ConfigError(
                f"--set {item!r}: use NAME=NUMBER with one of: " + ", ".join(sorted(known))
            )
        try:
            checks[key] = float(value)
        except ValueError:
            raise ConfigError(f"--set {item!r}: {value!r} is not a number") from None
    return checks


def _topology_dir(path: Path | None) -> Path | None:
    if path is not None and not path.is_dir():
        raise ConfigError(f"--topology {path} is not a folder of `nvidia-smi topo -m` files")
    return path


def _live(opts: _Options, url: str) -> LiveOptions:
    """The live connection, with what can be checked without connecting checked now."""
    live = LiveOptions(
        prometheus_url=url,
        token=opts.text("prometheus_token"),
        token_file=opts.path("prometheus_token_file"),
        user=opts.text("prometheus_user"),
        password=opts.text("prometheus_password"),
        headers=opts.strings("header"),
        ca_file=opts.path("ca_file"),
        client_cert=opts.path("client_cert"),
        client_key=opts.path("client_key"),
        insecure=opts.flag("insecure_skip_tls_verify"),
        cluster_label=opts.text("cluster_label"),
        timeout=opts.number("timeout"),
        kubeconfig=opts.path("kubeconfig"),
        context=opts.text("context"),
        namespaces=opts.strings("namespace"),
        no_kubernetes=opts.flag("no_kubernetes"),
    )
    parse_cluster_label(live.cluster_label)
    parse_headers(live.headers)
    shown = display_url(url)
    if not shown.startswith(("http://", "https://")):
        raise ConfigError(f"--prometheus-url must start with http:// or https://, got {shown!r}")
    return live
