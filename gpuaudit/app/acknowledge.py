"""`gpuaudit ack`: accept one finding until a date, as a `[[waivers]]` entry written into the
config file (or the file its `waivers_file` names), so that an acknowledgement is a dated,
reviewable line in Git.

The finding is named by its fingerprint, which must be a finding's of the audit the user read:
of an earlier JSON report (`--report-json`, what the weekly cron job writes: the fingerprint was
copied from a report), or of an audit of `--demo` or `--snapshot FILE` run now. The date must
not be in the past (UTC), the reason must say something, and each refusal is one line.

The file is edited with tomlkit, which keeps the user's comments, order and formatting; the new
text is read back and its waivers checked before it replaces the file, through a temporary file
created exclusively in the same folder and renamed over it (a reader never sees half a file).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.items import AoT, Array

from gpuaudit.app import pipeline
from gpuaudit.app.config import config_file, for_scan, load_config, waivers_path
from gpuaudit.audit.assemble import AuditResult
from gpuaudit.audit.compare import load_report
from gpuaudit.audit.settings import terminal_safe
from gpuaudit.audit.waivers import parse as parse_waivers
from gpuaudit.core.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found,unused-ignore]

MAX_REASON = 500
"""The most characters of a reason (one line of the file)."""
MAX_BY = 100
"""The most characters of `--by`."""


@dataclass(frozen=True)
class Ack:
    """One acknowledgement, as the user gave it."""

    fingerprint: str
    until: str
    reason: str
    by: str = ""


def run(ack: Ack, given: Mapping[str, object], report_json: Path | None, today: date) -> Path:
    """Check `ack` against the findings of `report_json`, else of the audit `given` names
    (`--demo` or `--snapshot`, with `--config`), and write it; the file written."""
    config = config_file(given)
    chosen = [k for k in ("demo", "snapshot") if given.get(k)] + (
        ["report_json"] if report_json else []
    )
    if len(chosen) != 1:
        raise ConfigError(
            "say which findings the fingerprint is of: --report-json FILE (an earlier "
            "`scan --format json` report), --demo or --snapshot FILE; one of them"
        )
    if report_json is not None:
        known, source = known_in_report(report_json), f"report {report_json}"
    else:
        result = pipeline.audit(for_scan(given))
        what = "the bundled demo" if given.get("demo") else f"snapshot {given.get('snapshot')}"
        known, source = known_in_result(result), what
    code, until = checked(ack, known, source, today)
    path = target(config)
    write(ack, code, until, path, today)
    return path


def known_in_report(path: Path) -> dict[str, str]:
    """The fingerprints of an earlier JSON report's findings, waived ones included -> what
    each is about (`--report-json`)."""
    doc = load_report(path, "--report-json")
    out: dict[str, str] = {}
    for key in ("findings", "suppressed"):
        items = doc.get(key)
        for f in items if isinstance(items, list) else []:
            if isinstance(f, Mapping) and isinstance(f.get("fingerprint"), str):
                out.setdefault(f["fingerprint"], str(f.get("message", ""))[:200])
    return out


def known_in_result(result: AuditResult) -> dict[str, str]:
    """The fingerprints of an audit's findings, waived ones included -> their messages."""
    out = {f.fingerprint(): f.message for f in result.findings}
    for s in result.suppressed:
        out.setdefault(s.finding.fingerprint(), s.finding.message)
    return out


def checked(ack: Ack, known: Mapping[str, str], source: str, today: date) -> tuple[str, date]:
    """The code and the date of a valid acknowledgement; a `ConfigError` of one line for a
    reason that is empty, too long or holds a line break, a name that does, a date that is
    not one or is in the past, or a fingerprint of no finding of `source`."""
    reason, by = ack.reason.strip(), ack.by.strip()
    if not reason:
        raise ConfigError("gpuaudit ack needs --reason: say why the finding is accepted")
    for what, text, most in (("--reason", reason, MAX_REASON), ("--by", by, MAX_BY)):
        if len(text) > most:
            raise ConfigError(f"{what} is longer than {most} characters; keep it to one line")
        if any(not c.isprintable() for c in text):
            raise ConfigError(f"{what} holds a line break or control character; one line only")
    try:
        until = date.fromisoformat(ack.until.strip())
    except ValueError:
        raise ConfigError(
            f"--until {terminal_safe(ack.until)} is not a date; use YYYY-MM-DD"
        ) from None
    if until < today:
        raise ConfigError(
            f"--until {until.isoformat()} is in the past (today is {today.isoformat()}, UTC); "
            "a waiver runs until a date to come"
        )
    if ack.fingerprint not in known:
        close = difflib.get_close_matches(ack.fingerprint, list(known), n=1, cutoff=0.8)
        hint = (
            f"did you mean {terminal_safe(close[0], 200)}?"
            if close
            else "`gpuaudit scan --format json` lists each finding's fingerprint"
        )
        raise ConfigError(
            f"no finding of {source} has the fingerprint {terminal_safe(ack.fingerprint, 200)}; "
            f"{hint}"
        )
    return ack.fingerprint.split("|", 1)[0], until


def target(config: Path) -> Path:
    """The file the waiver goes to: the one the config's `waivers_file` names, else the
    config file itself (created when there is none)."""
    doc = load_config(config) if config.exists() else {}
    return waivers_path(doc, config) or config


def write(ack: Ack, code: str, until: date, path: Path, today: date) -> None:
    """Append the waiver to `path`'s `[[waivers]]`, keeping the rest of the file as it is."""
    path = path.resolve() if path.is_symlink() else path
    text = _read(path) if path.exists() else ""
    try:
        doc = tomlkit.parse(text)
    except Exception as exc:  # tomlkit's parse errors share no public base class
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    fields: dict[str, Any] = {
        "code": code,
        "fingerprint": ack.fingerprint,
        "reason": ack.reason.strip(),
        "expires": until,
    }
    if ack.by.strip():
        fields["by"] = ack.by.strip()
    waivers: Any = doc.get("waivers")
    if isinstance(waivers, Array):  # `waivers = [{...}]`: one more inline table, as written
        inline = tomlkit.inline_table()
        inline.update(fields)
        waivers.append(inline)
    else:
        if waivers is None:
            waivers = tomlkit.aot()
            doc.append("waivers", waivers)
        elif not isinstance(waivers, AoT):
            raise ConfigError(f"waivers in {path} is not an array of tables ([[waivers]])")
        entry = tomlkit.table()
        entry.add(tomlkit.comment(f"gpuaudit ack, {today.isoformat()}"))
        for key, value in fields.items():
            entry.add(key, value)
        entry.add(tomlkit.nl())  # a blank line before whatever follows, as a person writes it
        waivers.append(entry)
    new = tomlkit.dumps(doc)
    # Read back as gpuaudit reads it: the file must stay one it accepts.
    parse_waivers(tomllib.loads(new))
    _replace(path, new)


def _read(path: Path) -> str:
    load_config(path)  # bounded, UTF-8, valid TOML: one clear line otherwise
    return path.read_text(encoding="utf-8")


def _replace(path: Path, text: str) -> None:
    folder = path.parent
    try:
        mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
