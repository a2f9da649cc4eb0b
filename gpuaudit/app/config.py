"""The one resolver of `scan` and `snapshot save`: flags, environment, `gpuaudit.toml` and
defaults into one frozen, typed `Config`, every value checked once, before any data is read.

Every option follows one precedence: its flag, then its `GPUAUDIT_...` environment variable, then
the `[scan]` table of `gpuaudit.toml`, then its default (`gpuaudit.app.options`). The command line
hands over, by option name, only the options the user gave, and names those that came from their
variable; `for_scan` and `for_snapshot_save` read the file once, fill in the rest from it and from
the defaults, and check everything a user can get wrong.

Each option's value is checked in one function here (`_duration` for `--window`, `--step` and
`--max-window`, `parse_end`, `_timeout`, `_count`, `_namespaces`, `_fail_on`, `_format`,
`_what_if`, `_reports`, `_check_overrides` for `--set`, `_topology_dir`; the Prometheus URL,
`--header` and `--cluster-label` by the parsers of the sources, `check_url`, `parse_headers` and
`ClusterLabel.parse`), and the rules between options once after them (one source, the window
against its step, one cluster's Kubernetes options). What the pipeline and the sources receive
is typed and checked (`Settings`, `LiveOptions`, `Limits`); they do not check it again. They
check only what the data or a server tells: a snapshot's recorded window, the scrape interval.

`[scan]` keys are the option names with `_` for `-` (`prometheus_url = "..."`, `fail_on = "high"`,
`namespace = ["ml", "batch"]`); `docs/config.md` lists them. Relative paths in the file are
relative to the file's folder. Secrets (`--prometheus-token`, `--prometheus-password`, `--webhook`)
are never read from the file, which is easily committed or shared: pass them by flag or
environment variable (a CI secret, a Kubernetes Secret). `--set` has its own table, `[checks]`,
read with `[prices]` and `currency` by `gpuaudit.audit.settings.settings_from`. Options that
exclude each other (`--demo`, `--snapshot`, `--prometheus-url`; `--baseline`, `--previous`) are
taken together from the first layer (flag, environment, file) that sets any of them, so a flag
replaces the environment's or the file's choice instead of clashing with it.

Nothing is ignored silently: an option that shapes a live collection (`Option.live_only`: the
Kubernetes connection, every Prometheus option, `--step`) given for the run, by flag or
variable, is refused with `--demo` or `--snapshot`, naming the flag or the variable. An
environment that names its own `prometheus_url` keeps its connection settings with that URL,
which a layer above replaced. A config file is written for many runs: its live-only keys (and
its `prometheus_url`, when a flag or variable chose another source) do not apply to a snapshot
or the demo, and `Config.notes` says so once. `--namespace` narrows the audit to the pods of
its namespaces, live and on a snapshot alike (`gpuaudit.inventory.scope`).
"""

from __future__ import annotations

import math
import os
import re
import sys
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime, timezone
from importlib.resources import files
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gpuaudit import checks as check_registry
from gpuaudit.app.options import BY_NAME, OPTIONS, Kind
from gpuaudit.audit.capacity import WHAT_IFS
from gpuaudit.audit.settings import (
    DEFAULT_STEP_S,
    DEFAULT_WINDOW_S,
    Settings,
    settings_from,
    terminal_safe,
    unknown_setting,
)
from gpuaudit.audit.showback import IDLE_RULES
from gpuaudit.audit.waivers import Waiver
from gpuaudit.audit.waivers import parse as parse_waivers
from gpuaudit.checks.findings import Severity
from gpuaudit.core import limits
from gpuaudit.core.errors import ConfigError, GpuauditError
from gpuaudit.inventory import ownership
from gpuaudit.report import FORMATS
from gpuaudit.report.webhook import check_url as check_webhook_url
from gpuaudit.report.webhook_routes import Route
from gpuaudit.report.webhook_routes import parse as parse_routes
from gpuaudit.sources.bounds import MIB, Limits
from gpuaudit.sources.collect import LiveOptions, check_url, parse_headers
from gpuaudit.sources.interface import span as _span
from gpuaudit.sources.prometheus.catalogue import ClusterLabel

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

SCAN_KEYS = {o.name: o.kind for o in OPTIONS if o.in_file == "scan"}
"""The keys of `[scan]` in `gpuaudit.toml`, one per option the file may set."""

DEFAULTS = {o.name: o.default for o in OPTIONS if o.default is not None}
"""Defaults other than off, empty or unset (the command line's help shows these)."""

_GROUPS = (("demo", "snapshot", "prometheus_url"), ("baseline", "previous"))
_GROUP_OF = {name: group for group in _GROUPS for name in group}

MAX_BUCKETS = 20_000
"""The most buckets of `--step` a window may hold (`--window` / `--step`): a week at 1 m is
10,080. More would hold one row per GPU and bucket in memory for nothing a report can show."""
MAX_TIMEOUT_S = 3600.0
"""The longest `--timeout`: an hour for one answer."""
MAX_ANSWER_MIB = 64 * 1024
"""The largest `--max-answer-mib`."""
MAX_OBJECTS = 100_000_000
"""The largest `--max-objects`."""
MAX_QUERIES = 1_000_000
"""The largest `--max-queries`."""
MAX_PARALLEL = 16
"""The largest `--parallel-queries`."""
LATEST_END = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()
"""The latest `--end` a date can name."""
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A Kubernetes namespace name: a DNS-1123 label (lower-case letters, digits and '-', starting
and ending with a letter or digit, at most 63 characters)."""
_DURATION = re.compile(r"(\d{1,15}(?:\.\d{1,9})?)([smhdw]?)", re.ASCII)
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


@dataclass(frozen=True)
class ReportTarget:
    """One `--report FORMAT=FILE`: a report written to a file besides stdout or `--output`."""

    format: str
    """One of `gpuaudit.report.FORMATS`."""
    path: Path
    """Where it is written."""


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
    reports: tuple[ReportTarget, ...] = ()
    """More reports of the same audit, each in its format to its file (`--report`)."""
    namespaces: tuple[str, ...] = ()
    """`--namespace`: the namespaces the audit is narrowed to (a live scan reads their
    Kubernetes objects only; see `gpuaudit.inventory.scope`); empty for all."""
    fail_on: Severity | None = None
    """Exit 1 for a finding at or above this severity; None never."""
    strict: bool = False
    """Exit 2 when the audit is incomplete."""
    baseline: Path | None = None
    """An earlier JSON report that only new or worse findings are gated against (CI)."""
    previous: Path | None = None
    """An earlier JSON report to show the trend against (cron)."""
    history: Path | None = None
    """`--history DIR`: the folder that keeps each JSON report, gives the previous one (unless
    `previous` is given) and the trend over the kept weeks (`gpuaudit.app.history`)."""
    history_keep: int = 26
    """`--history-keep`: the reports `history` keeps, this one included."""
    group_by_label: str = ""
    """A pod label to break waste down by, or empty."""
    what_if: tuple[str, ...] = ()
    """`--what-if`: the capacity plan's scenarios the reports show (`release-idle`)."""
    idle_rule: str = "none"
    """`--idle-rule`: how the showback shares idle and unallocated cost
    (`gpuaudit.audit.showback.IDLE_RULES`)."""
    per_owner: Path | None = None
    """`--per-owner DIR`: the folder one Markdown and one HTML report per owner go to."""
    webhook: str | None = None
    """A Slack-compatible incoming webhook URL to post the summary to."""
    webhooks: tuple[Route, ...] = ()
    """`[webhooks]` of `gpuaudit.toml`: where each owner's findings are posted (with
    `--webhook` only; `gpuaudit.report.webhook_routes`)."""
    quiet: bool = False
    """No progress bar or summary line."""
    all_findings: bool = False
    """`--all`: the table lists every finding, unfolded, each with its message."""
    waivers: tuple[Waiver, ...] = ()
    """Accepted findings, from `[[waivers]]`."""
    timings: bool = False
    """Report the time of each stage (`GPUAUDIT_TIMINGS`, read by the benchmarks)."""
    window_given: bool = False
    """Whether `--window` was given (flag, environment or file): on a snapshot it narrows the
    audit to part of the recorded window, which otherwise is audited whole."""
    notes: tuple[str, ...] = ()
    """What the configuration set that does not apply to this run, said once on stderr: the
    live-only keys of a config file when the run audits a snapshot or the demo."""


def for_scan(given: Mapping[str, object], from_env: frozenset[str] = frozenset()) -> Config:
    """The configuration of `scan` from the options the user gave (flag or environment;
    `from_env` names those that came from their variable)."""
    doc, opts = _layers(given, from_env)
    fail_on = _fail_on(opts.text("fail_on", "none"))
    demo, snapshot, url = opts.flag("demo"), opts.path("snapshot"), opts.text("prometheus_url")
    chosen = sum([demo, snapshot is not None, bool(url)])
    if chosen == 0:
        raise ConfigError("say what to audit: --demo, --snapshot FILE or --prometheus-url URL")
    if chosen > 1:
        raise ConfigError("use only one of --demo, --snapshot and --prometheus-url")
    notes: tuple[str, ...] = ()
    if not url:
        notes = _refuse_live_only(opts, "--demo" if demo else "--snapshot")
    settings = _settings(doc, opts, opts.strings("set"), opts.path("topology"))
    live = _live(opts, url) if url else None
    baseline, previous = opts.path("baseline"), opts.path("previous")
    if baseline and previous:
        raise ConfigError("use --baseline (CI) or --previous (trend), not both")
    history, history_keep = _history(opts, baseline)
    output = opts.path("output")
    return Config(
        settings=settings,
        snapshot=demo_path() if demo else snapshot,
        live=live,
        format=_format(opts.text("format", "table")),
        output=output,
        reports=_reports(opts.strings("report"), output),
        namespaces=live.namespaces if live else _namespaces(opts.strings("namespace")),
        fail_on=fail_on,
        strict=opts.flag("strict"),
        baseline=baseline,
        previous=previous,
        history=history,
        history_keep=history_keep,
        group_by_label=opts.text("group_by_label") or "",
        what_if=_what_if(opts.text("what_if")),
        idle_rule=_idle_rule(opts.text("idle_rule", "none")),
        per_owner=opts.path("per_owner"),
        webhook=_webhook(opts.text("webhook")),
        webhooks=parse_routes(doc.get("webhooks"), os.environ) if opts.text("webhook") else (),
        quiet=opts.flag("quiet"),
        all_findings=opts.flag("all"),
        waivers=read_waivers(doc, config_file(given)),
        timings=bool(os.environ.get("GPUAUDIT_TIMINGS")),
        window_given=opts.text("window") is not None,
        notes=notes,
    )


def for_snapshot_save(
    given: Mapping[str, object], from_env: frozenset[str] = frozenset()
) -> Config:
    """The configuration of `snapshot save` (a live source, a window) from the options given."""
    doc, opts = _layers(given, from_env)
    url = opts.text("prometheus_url")
    if not url:
        raise ConfigError("snapshot save needs --prometheus-url URL")
    settings = _settings(doc, opts)
    live = _live(opts, url)
    return Config(
        settings=settings, live=live, namespaces=live.namespaces, quiet=opts.flag("quiet")
    )


def load_config(path: Path | None) -> dict[str, Any]:
    """Read `gpuaudit.toml` (`path`, else the working directory's when there is one); an
    explicit path that does not exist is an error, and so is a file larger than
    `limits.CONFIG_BYTES` (`--config /dev/zero` ends there), one that is not UTF-8, or one
    nested too deeply for the TOML reader."""
    if path is None:
        default = Path("gpuaudit.toml")
        if not default.is_file():
            return {}
        path = default
    limit = limits.CONFIG_BYTES.value()
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a folder; name a gpuaudit.toml file") from None
    except OSError as exc:
        raise ConfigError(
            f"config file {path} cannot be read: {exc.strerror or exc}; check its permissions"
        ) from None
    if len(data) > limit:
        raise ConfigError(
            f"config file {path} is larger than {limit:,} bytes; a gpuaudit.toml is a few lines "
            f"(raise {limits.CONFIG_BYTES.env} if this one is genuine)"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {exc.start + 1:,} cannot be read); "
            "save it as UTF-8"
        ) from None
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(
            f"config file {path} nests tables or arrays too deeply to be a gpuaudit.toml"
        ) from None
    return doc


def config_file(given: Mapping[str, object]) -> Path:
    """The config file a command reads: `--config`, else `gpuaudit.toml` in the working
    directory (which need not exist)."""
    path = given.get("config")
    return path if isinstance(path, Path) else Path("gpuaudit.toml")


WAIVERS_FILE = "waivers_file"
"""The key of `gpuaudit.toml` that names a file of `[[waivers]]` beside its own (`gpuaudit ack`
writes there when it is set)."""


def waivers_path(doc: Mapping[str, Any], config: Path) -> Path | None:
    """The file `waivers_file` names, relative to the config file's folder; None when unset."""
    name = doc.get(WAIVERS_FILE)
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{WAIVERS_FILE} in {config} must be a path (a string)")
    return config.parent / Path(name).expanduser()


def read_waivers(doc: Mapping[str, Any], config: Path) -> tuple[Waiver, ...]:
    """The `[[waivers]]` of the config file, then those of the file its `waivers_file` names
    (which holds nothing else; it may not exist yet: `gpuaudit ack` creates it)."""
    own = parse_waivers(doc)
    path = waivers_path(doc, config)
    if path is None or not path.exists():
        return tuple(own)
    other = load_config(path)
    extra = set(other) - {"waivers"}
    if extra:
        raise ConfigError(
            f"waivers file {path} holds {', '.join(sorted(extra))}; it may hold only [[waivers]]"
        )
    try:
        theirs = parse_waivers(other)
    except ConfigError as exc:
        raise ConfigError(f"waivers file {path}: {exc}") from None
    return (*own, *theirs)


def parse_duration(text: str) -> int:
    """`7d`, `12h`, `30m`, `90s` or plain seconds -> whole seconds, at least 1. At most 15
    digits, so the result is a finite number whatever the text."""
    t = text.strip()
    m = _DURATION.fullmatch(t)
    if not m:
        raise ConfigError(f"invalid duration {t[:40]!r}; use e.g. 7d, 12h, 30m or seconds")
    seconds = int(float(m.group(1)) * _UNIT[m.group(2)])
    if seconds <= 0:
        raise ConfigError(f"duration {t!r} must be at least 1 second")
    return seconds


def parse_end(text: str | None) -> float | None:
    """`--end`: unix seconds or an RFC 3339 time, between 1970 and the year 9999; None (or
    empty) means now."""
    if text is None or text == "":
        return None
    t = text.strip()
    try:
        end = float(t)
    except ValueError:
        end = _rfc3339(text)
    if not 0 <= end <= LATEST_END:  # also false for NaN
        raise ConfigError(
            f"--end {text.strip()[:40]!r} is not a time between 1970 and 9999: use unix seconds "
            "or RFC 3339 such as 2026-11-23T00:00:00Z"
        )
    return end


def _rfc3339(text: str) -> float:
    try:
        dt = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"invalid --end {text.strip()[:40]!r}; use unix seconds or RFC 3339 such as "
            "2026-11-23T00:00:00Z"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.timestamp()
    except (OverflowError, ValueError, OSError):
        return math.nan


def demo_path() -> Path:
    """The bundled demo snapshot."""
    try:
        res = files("gpuaudit.fixtures").joinpath("demo.snapshot.json.gz")
        if res.is_file():
            return Path(str(res))
    except (ModuleNotFoundError, TypeError):
        pass
    here = Path(__file__).resolve().parent.parent.parent / "fixtures" / "demo.snapshot.json.gz"
    if here.is_file():
        return here
    raise GpuauditError("the bundled demo snapshot is missing from this installation")


class _Options:
    """Each option's value from the first layer that sets it: its flag, its variable, its
    `[scan]` key, else its default. Options that exclude each other (`_GROUPS`) are decided
    together by the first layer that sets any of them."""

    def __init__(
        self,
        given: Mapping[str, object],
        scan: Mapping[str, object],
        from_env: frozenset[str] = frozenset(),
        file: Path | None = None,
    ):
        unknown = set(given) - set(BY_NAME)
        if unknown:  # the command line and this module disagree: a bug, not a user error
            raise TypeError(f"not options of gpuaudit: {', '.join(sorted(unknown))}")
        flags = {k: v for k, v in given.items() if k not in from_env}
        env = {k: v for k, v in given.items() if k in from_env}
        self._layers: tuple[tuple[str, Mapping[str, object]], ...] = (
            ("flag", flags),
            ("env", env),
            ("file", scan),
        )
        self._file = file

    def layer(self, name: str) -> str | None:
        """`flag`, `env` or `file`: the layer the option's value comes from; None for its
        default (or when another option of its group was chosen)."""
        group = _GROUP_OF.get(name, (name,))
        for layer, values in self._layers:
            if any(_is_set(values.get(n)) or (n == name and n in values) for n in group):
                return layer if name in values else None
        return None

    def sets(self, layer: str, name: str) -> bool:
        """Whether `layer` sets the option, whether or not a layer above replaces it."""
        return _is_set(dict(self._layers)[layer].get(name))

    @property
    def file_name(self) -> str:
        """The config file as messages name it."""
        return str(self._file or "gpuaudit.toml")

    def origin(self, name: str) -> str | None:
        """Who set the option, as an error names it: its flag, its variable, or its key in the
        file; None when it has its default."""
        option, layer = BY_NAME[name], self.layer(name)
        if layer == "flag":
            return option.flag
        if layer == "env":
            return f"{option.envvar} ({option.flag})"
        if layer == "file":
            return f"[scan] {name} in {self.file_name}"
        return None

    def raw(self, name: str) -> object:
        """The value as resolved, unconverted."""
        layer = self.layer(name)
        if layer is not None:
            return dict(self._layers)[layer][name]
        group = _GROUP_OF.get(name, (name,))
        if any(self.layer(n) is not None for n in group if n != name):
            return None
        return DEFAULTS.get(name)

    def text(self, name: str, default: str | None = None) -> str | None:
        value = self.raw(name)
        return default if value is None else str(value)

    def flag(self, name: str) -> bool:
        return bool(self.raw(name))

    def number(self, name: str) -> float:
        value = self.raw(name)
        if not isinstance(value, (int, float)):
            raise TypeError(f"{name} is not a number: {value!r}")
        return float(value)

    def path(self, name: str) -> Path | None:
        value = self.raw(name)
        return None if value is None else Path(str(value))

    def strings(self, name: str) -> tuple[str, ...]:
        value = self.raw(name)
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{name} is not a list: {value!r}")
        return tuple(str(v) for v in value)


def _is_set(value: object) -> bool:
    """Whether a layer's value chooses something (an unset flag or an empty value does not)."""
    return value not in (None, False, "", (), [])


def _layers(
    given: Mapping[str, object], from_env: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], _Options]:
    path = given.get("config")
    if path is not None and not isinstance(path, Path):
        raise TypeError(f"config is not a path: {path!r}")
    doc = load_config(path)
    scan = doc.get("scan", {})
    if not isinstance(scan, dict):
        raise ConfigError("[scan] must be a table")
    folder = (path or Path("gpuaudit.toml")).parent
    values = {key: _from_file(key, value, folder) for key, value in scan.items()}
    return doc, _Options(given, values, from_env, path)


def _from_file(name: str, value: object, folder: Path) -> object:
    """A `[scan]` value, checked against its kind (what the command line's types check of a
    flag); relative paths resolved against `folder`."""
    kind = SCAN_KEYS.get(name)
    if kind is None:
        known = BY_NAME.get(name)
        if known is None:
            raise ConfigError(unknown_setting(name, SCAN_KEYS, "scan."))
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
        Kind.REPORTS: isinstance(value, list) and all(isinstance(v, str) for v in value),
    }[kind]
    if not ok:
        raise ConfigError(f"[scan] {name} must be {kind.value}, got {value!r}")
    if kind is Kind.PATH:
        return folder / Path(str(value)).expanduser()
    if kind is Kind.REPORTS and isinstance(value, list):
        return [_report_in(folder, str(v)) for v in value]
    if kind is Kind.SPAN and isinstance(value, date):  # a TOML date-time for `end`
        return value.isoformat()
    return value


def _webhook(url: str | None) -> str | None:
    """`--webhook`: an http or https URL with a host, or none."""
    if url is None or url.strip() == "":
        return None
    check_webhook_url(url)
    return url


def _fail_on(text: str | None) -> Severity | None:
    """`--fail-on`: a severity, or none."""
    if text is None or text.strip().lower() == "none":
        return None
    try:
        return Severity.parse(text)
    except ValueError as exc:
        raise ConfigError(f"--fail-on: {exc}") from None


def _what_if(text: str | None) -> tuple[str, ...]:
    """`--what-if`: one of the capacity plan's scenarios, or none."""
    if text is None or text.strip() == "":
        return ()
    value = text.strip().lower()
    if value not in WHAT_IFS:
        raise ConfigError(
            f"--what-if must be one of {', '.join(WHAT_IFS)}, got {text.strip()[:40]!r}"
        )
    return (value,)


def _idle_rule(text: str | None) -> str:
    """`--idle-rule`: one of the showback's rules."""
    value = (text or "none").strip().lower()
    if value not in IDLE_RULES:
        raise ConfigError(
            f"--idle-rule must be one of {', '.join(IDLE_RULES)}, got {(text or '')[:40]!r}"
        )
    return value


def _format(text: str | None) -> str:
    """`--format`: the flag and its variable are a choice of the command line, so only the
    file's `format` can name another."""
    if text is None or text not in FORMATS:
        raise ConfigError(f"[scan] format must be one of {', '.join(FORMATS)}, got {text!r}")
    return text


def _settings(
    doc: Mapping[str, Any],
    opts: _Options,
    sets: tuple[str, ...] = (),
    topology: Path | None = None,
) -> Settings:
    """The audit's settings: the window from the options, the thresholds from `--set` over
    the file's, the file's prices and currency, the topology folder."""
    checks = _check_overrides(sets)
    window_s, step_s, end = _window(opts)
    return replace(
        settings_from(doc, **checks),
        window_s=window_s or DEFAULT_WINDOW_S,
        step_s=step_s,
        end=end,
        topology_dir=_topology_dir(topology),
        timezone=_timezone(opts.text("timezone", "UTC") or "UTC", opts.origin("timezone")),
        owner_keys=_owner_keys(opts.strings("owner_keys"), opts.origin("owner_keys")),
    )


def _owner_keys(keys: tuple[str, ...], named: str | None) -> tuple[str, ...]:
    """`--owner-keys`: Kubernetes label or annotation keys, each once, at most
    `ownership.MAX_KEYS`; none given: the default (`named`: who set them, as errors name it)."""
    if not keys:
        return ownership.DEFAULT_KEYS
    who = named or "--owner-keys"
    if len(keys) > ownership.MAX_KEYS:
        raise ConfigError(f"{who} names {len(keys)} keys; at most {ownership.MAX_KEYS} are read")
    for key in keys:
        if not ownership.valid_key(key):
            raise ConfigError(
                f"{who}: {terminal_safe(key)} is not a Kubernetes label or annotation key "
                "(such as team or example.com/owner)"
            )
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{who} names a key twice")
    return keys


def _timezone(name: str, named: str | None) -> str:
    """`--timezone`: an IANA time zone name the system's time zone database knows (`named`:
    who set it, as the error names it)."""
    shown = terminal_safe(name)
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"{named or '--timezone'} {shown} is not a time zone this system knows: use an IANA "
            "name such as UTC, Europe/Berlin or America/New_York"
        ) from None
    return name


def _window(opts: _Options) -> tuple[int | None, int, float | None]:
    """`--window` (None when not given), `--step` and `--end`, each parsed and the three
    checked together: a window of whole steps no longer than `--max-window` nor than
    `MAX_BUCKETS` steps, starting after 1970."""
    window_s = _duration(opts, "window")
    step = _duration(opts, "step") or DEFAULT_STEP_S
    end = parse_end(opts.text("end"))
    window = window_s or DEFAULT_WINDOW_S
    longest = _duration(opts, "max_window") or window
    named = opts.origin("window") or "--window"
    if window > longest:
        raise ConfigError(
            f"{named} {_span(window)} is longer than --max-window {_span(longest)}: audit a "
            "shorter window, or raise --max-window (GPUAUDIT_MAX_WINDOW, [scan] max_window) if "
            "you mean it"
        )
    if window < step or window % step:
        raise ConfigError(
            f"{named} {_span(window)} must be a whole number of --step {_span(step)} buckets"
        )
    if window // step > MAX_BUCKETS:
        raise ConfigError(
            f"{named} {_span(window)} at --step {_span(step)} makes {window // step:,} buckets; "
            f"at most {MAX_BUCKETS:,} are allowed: use a longer --step"
        )
    if end is not None and end - window < 0:
        raise ConfigError(f"{named} {_span(window)} before --end {end:g} starts before 1970")
    return window_s, step, end


def _duration(opts: _Options, name: str) -> int | None:
    """A duration option (`--window`, `--step`, `--max-window`) in whole seconds (at least
    1), or None when not set."""
    text = opts.text(name)
    if text is None or text.strip() == "":
        return None
    try:
        return parse_duration(text)
    except ConfigError as exc:
        raise ConfigError(f"{opts.origin(name) or BY_NAME[name].flag}: {exc}") from None


def _check_overrides(sets: tuple[str, ...]) -> dict[str, float]:
    """`--set NAME=NUMBER` entries: names the checks declare, each value in the range its kind
    allows (`gpuaudit.checks.contract.SettingKind`); a name set twice keeps the later value."""
    kinds = check_registry.settings()
    checks: dict[str, float] = {}
    for item in sets:
        key, sep, value = item.partition("=")
        key = key.strip().removeprefix("checks.")
        if not sep:
            raise ConfigError(f"--set {item!r}: use NAME=NUMBER, e.g. idle_activity=0.05")
        if key not in kinds:
            raise ConfigError(f"--set {item!r}: {unknown_setting(key, kinds)}")
        try:
            checks[key] = float(value)
        except ValueError:
            raise ConfigError(f"--set {item!r}: {value!r} is not a number") from None
    for name, number in checks.items():
        problem = kinds[name].kind.problem(number)
        if problem:
            raise ConfigError(f"--set {name}={number:g}: {name} {problem}")
    return checks


def _refuse_live_only(opts: _Options, source: str) -> tuple[str, ...]:
    """Refuse, naming it, an option given for this run (flag or variable) that shapes a live
    collection when the source is a file (`source` is the flag that chose it). A config file
    is written for many runs: its live-only keys (and a `prometheus_url` another source
    replaced) do not apply to this one, which the note returned says. A variable layer that
    names its own `prometheus_url` keeps its connection settings with it: a layer above
    replaced that source, settings and all, which is no clash."""
    for option in OPTIONS:
        layer = opts.layer(option.name)
        if not option.live_only or layer in (None, "file") or not _is_set(opts.raw(option.name)):
            continue
        if opts.sets(layer, "prometheus_url"):
            continue  # it goes with that layer's live source, which a layer above replaced
        where = opts.origin(option.name)
        if where is not None:
            raise ConfigError(
                f"{where} applies only to a live scan (--prometheus-url); {source} audits "
                "what was recorded, so remove it"
            )
    unused = [
        o.name
        for o in OPTIONS
        if (o.live_only or o.name == "prometheus_url") and opts.sets("file", o.name)
    ]
    if not unused:
        return ()
    what = "applies" if len(unused) == 1 else "apply"
    return (
        f"{opts.file_name}: {', '.join(unused)} {what} to live scans only; not used for {source}",
    )


def _reports(items: tuple[str, ...], output: Path | None) -> tuple[ReportTarget, ...]:
    """`--report FORMAT=FILE` entries: known formats, each file named once (and not the
    `--output` file)."""
    targets: list[ReportTarget] = []
    seen = {_same_file(output): "--output"} if output else {}
    for item in items:
        fmt, sep, file = item.partition("=")
        fmt, file = fmt.strip(), file.strip()
        if not sep or not file or fmt not in FORMATS:
            raise ConfigError(
                f"--report {item!r}: use FORMAT=FILE with FORMAT one of {', '.join(FORMATS)}"
            )
        path = Path(file).expanduser()
        key = _same_file(path)
        if key in seen:
            raise ConfigError(f"--report {item!r}: {file} is already written by {seen[key]}")
        seen[key] = f"--report {item!r}"
        targets.append(ReportTarget(fmt, path))
    return tuple(targets)


def _report_in(folder: Path, item: str) -> str:
    """A `[scan] report` entry with its file relative to the config file's folder."""
    fmt, sep, file = item.partition("=")
    if not sep or not file.strip():
        return item  # `_reports` says what is wrong with it
    return f"{fmt}={folder / Path(file.strip()).expanduser()}"


def _same_file(path: Path) -> str:
    return os.path.normcase(os.path.abspath(path))


def _namespaces(names: tuple[str, ...]) -> tuple[str, ...]:
    """`--namespace` values (each a name or a comma list), each a valid namespace name,
    duplicates dropped, order kept."""
    out: list[str] = []
    for raw in (part for value in names for part in value.split(",")):
        ns = raw.strip()
        if not _NAMESPACE.fullmatch(ns):
            raise ConfigError(
                f"--namespace {raw[:80]!r} is not a valid Kubernetes namespace name "
                "(lower-case letters, digits and '-', at most 63 characters)"
            )
        if ns not in out:
            out.append(ns)
    return tuple(out)


def _timeout(opts: _Options) -> float:
    """`--timeout`: seconds, more than 0 and at most `MAX_TIMEOUT_S`."""
    timeout = opts.number("timeout")
    if not (math.isfinite(timeout) and 0 < timeout <= MAX_TIMEOUT_S):
        raise ConfigError(
            f"{opts.origin('timeout') or '--timeout'} {timeout:g}: the timeout is seconds to wait "
            f"for one answer, more than 0 and at most {MAX_TIMEOUT_S:g}"
        )
    return timeout


MAX_HISTORY_KEEP = 520
"""The most reports `--history-keep` keeps: ten years of weekly reports."""


def _history(opts: _Options, baseline: Path | None) -> tuple[Path | None, int]:
    """`--history` and `--history-keep`. With `--baseline` the history could not give the
    earlier report (the baseline gates CI), and `--history-keep` without `--history` keeps
    nothing: both are refused rather than ignored."""
    history = opts.path("history")
    keep = _count(opts, "history_keep", MAX_HISTORY_KEEP)
    if history is None:
        if opts.layer("history_keep") is not None:
            raise ConfigError(f"{opts.origin('history_keep')} applies only with --history DIR")
        return None, keep
    if baseline:
        raise ConfigError(
            "use --baseline (CI gate) or --history (weekly trend), not both: --history reads "
            "the previous report itself"
        )
    return history, keep


def _count(opts: _Options, name: str, most: int) -> int:
    """A bound that counts (`--max-answer-mib`, `--max-objects`, `--max-queries`,
    `--parallel-queries`): a whole number from 1 to `most`."""
    value = opts.number(name)
    if not (math.isfinite(value) and value.is_integer() and 1 <= value <= most):
        raise ConfigError(
            f"{BY_NAME[name].flag} must be a whole number at least 1 and at most {most:g}, "
            f"got {value!r}"
        )
    return int(value)


def _topology_dir(path: Path | None) -> Path | None:
    """`--topology`: a folder."""
    if path is not None and not path.is_dir():
        raise ConfigError(f"--topology {path} is not a folder of `nvidia-smi topo -m` files")
    return path


def _one_cluster_only(
    opts: _Options, label: ClusterLabel | None, namespaces: tuple[str, ...]
) -> None:
    """Refuse the Kubernetes options a scan of every cluster (`--cluster-label NAME`) cannot
    apply, unless Kubernetes is not read at all: one kubeconfig context is one cluster."""
    if label is None or not label.grouped or opts.flag("no_kubernetes"):
        return
    asked = [
        flag
        for flag, given in (
            ("--kubeconfig", opts.path("kubeconfig")),
            ("--context", opts.text("context")),
            ("--namespace", namespaces),
        )
        if given
    ]
    if asked:
        text = opts.text("cluster_label")
        raise ConfigError(
            f"--cluster-label {text} audits every cluster the backend holds, but "
            f"{' and '.join(asked)} name{'s' if len(asked) == 1 else ''} one cluster's "
            f"Kubernetes API: name that cluster (--cluster-label {text}=VALUE) to join its API "
            "server, or add --no-kubernetes"
        )


def _cluster_label(text: str | None) -> ClusterLabel | None:
    """`--cluster-label`: a label name PromQL can hold, not one Prometheus reserves for itself
    (`__name__` and every name starting with `__`, which no series keeps as a label)."""
    label = ClusterLabel.parse(text)
    if label is not None and label.name.startswith("__"):
        raise ConfigError(
            f"--cluster-label {label.name}: names starting with '__' are reserved by "
            "Prometheus for its own use and name no cluster; use the label your series carry "
            "(e.g. cluster)"
        )
    return label


_CREDENTIALS = (
    ("prometheus_token", "--prometheus-token"),
    ("prometheus_token_file", "--prometheus-token-file"),
    ("prometheus_user", "--prometheus-user"),
)


def _one_credential(opts: _Options, url: str, headers: Mapping[str, str]) -> None:
    """Refuse two credentials for Prometheus, which would leave one silently unused (a user
    and password in the URL beat every other): the URL's user info, `--prometheus-token`,
    `--prometheus-token-file`, `--prometheus-user` (with `--prometheus-password`) and an
    `Authorization` header. Their values are never shown."""
    given = [opts.origin(name) or flag for name, flag in _CREDENTIALS if _is_set(opts.raw(name))]
    if _is_set(opts.raw("prometheus_password")) and not _is_set(opts.raw("prometheus_user")):
        given.append(opts.origin("prometheus_password") or "--prometheus-password")
    if any(name.strip().lower() == "authorization" for name in headers):
        given.append("an Authorization --header")
    try:
        in_url = bool(urlsplit(url.strip()).netloc.rpartition("@")[1])
    except ValueError:
        in_url = False
    if in_url:
        given.insert(0, "the user info in --prometheus-url (USER:PASSWORD@)")
    if len(given) > 1:
        raise ConfigError(
            f"{' and '.join(given)} are each a credential for Prometheus, and only one can be "
            "sent: keep one (a token in --prometheus-token or a file, or a user and password)"
        )


def _live(opts: _Options, url: str) -> LiveOptions:
    """The live connection, each option checked and typed, with what can be checked without
    connecting checked now."""
    timeout = _timeout(opts)
    namespaces = _namespaces(opts.strings("namespace"))
    label = _cluster_label(opts.text("cluster_label"))
    _one_cluster_only(opts, label, namespaces)
    headers = parse_headers(opts.strings("header"))
    _one_credential(opts, url, headers)
    limits = Limits(
        timeout_s=timeout,
        answer_bytes=_count(opts, "max_answer_mib", MAX_ANSWER_MIB) * MIB,
        objects=_count(opts, "max_objects", MAX_OBJECTS),
        queries=_count(opts, "max_queries", MAX_QUERIES),
        parallel=_count(opts, "parallel_queries", MAX_PARALLEL),
    )
    check_url(url)
    return LiveOptions(
        prometheus_url=url,
        token=opts.text("prometheus_token"),
        token_file=opts.path("prometheus_token_file"),
        user=opts.text("prometheus_user"),
        password=opts.text("prometheus_password"),
        headers=headers,
        ca_file=opts.path("ca_file"),
        client_cert=opts.path("client_cert"),
        client_key=opts.path("client_key"),
        insecure=opts.flag("insecure_skip_tls_verify"),
        cluster_label=label,
        limits=limits,
        kubeconfig=opts.path("kubeconfig"),
        kubeconfig_origin=opts.origin("kubeconfig"),
        context=opts.text("context"),
        namespaces=namespaces,
        no_kubernetes=opts.flag("no_kubernetes"),
    )
