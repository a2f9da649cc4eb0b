"""Waivers: accepted findings, suppressed with a reason and an expiry date, never dropped.

In `gpuaudit.toml`:

    [[waivers]]
    code = "GPU001"                 # required
    namespace = "research"          # any of namespace, selector, resource narrows it
    selector = "team=ml,tier!=prod" # a label selector on the pod's labels (=, ==, !=, key, !key)
    resource = "research/notebook-0"
    fingerprint = "GPU001|Pod|research|StatefulSet/jupyter"  # one finding (`gpuaudit ack`)
    reason = "shared demo notebook" # required
    expires = 2026-12-31            # required; an expired waiver no longer applies and warns
    by = "alice"                    # who accepted it (optional)

An expired waiver no longer applies: the finding it matched is reported again, with its history
(`Finding.history`: "waived until 2026-11-30 by alice: reason; expired"), and the run warns.
`gpuaudit ack` writes a waiver of one finding (by its fingerprint) into the config file, or the
file its `waivers_file` names, whose `[[waivers]]` are read beside the config's.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from typing import Any

from gpuaudit import checks as check_registry
from gpuaudit.audit.settings import terminal_safe
from gpuaudit.checks.findings import Finding
from gpuaudit.core.errors import ConfigError


@dataclass(frozen=True)
class Waiver:
    code: str
    reason: str
    expires: date
    namespace: str = ""
    selector: str = ""
    resource: str = ""
    fingerprint: str = ""
    """One finding's fingerprint (`Finding.fingerprint`), as `gpuaudit ack` writes it."""
    by: str = ""
    """Who accepted it; empty when the waiver does not say."""

    def describe(self) -> str:
        parts = [self.code]
        if self.fingerprint:
            parts.append(f"fingerprint={self.fingerprint}")
        if self.namespace:
            parts.append(f"namespace={self.namespace}")
        if self.selector:
            parts.append(f"selector={self.selector}")
        if self.resource:
            parts.append(f"resource={self.resource}")
        return " ".join(parts)


@dataclass(frozen=True)
class Suppressed:
    finding: Finding
    waiver: Waiver


def parse(config: Mapping[str, Any]) -> list[Waiver]:
    raw = config.get("waivers", [])
    if not isinstance(raw, list):
        raise ConfigError("waivers must be an array of tables: [[waivers]]")
    out: list[Waiver] = []
    for i, w in enumerate(raw):
        where = f"waivers[{i}]"
        if not isinstance(w, Mapping):
            raise ConfigError(f"{where} must be a table")
        unknown = set(w) - KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        code = str(w.get("code", "")).strip().upper()
        reason = str(w.get("reason", "")).strip()
        if not code or not reason:
            raise ConfigError(f"{where} needs a code and a reason")
        _names_a_check(code, where, reason)
        exp = w.get("expires")
        if isinstance(exp, datetime):
            exp = exp.date()
        elif isinstance(exp, str):
            try:
                exp = date.fromisoformat(exp)
            except ValueError:
                raise ConfigError(f"{where}: expires {exp!r} is not a date (YYYY-MM-DD)") from None
        if not isinstance(exp, date):
            raise ConfigError(f"{where} needs an expiry date: expires = YYYY-MM-DD")
        selector = str(w.get("selector", ""))
        _parse_selector(selector, where)
        fingerprint = str(w.get("fingerprint", ""))
        if fingerprint and fingerprint.split("|", 1)[0] != code:
            raise ConfigError(f"{where}: its fingerprint is not of a {code} finding")
        out.append(
            Waiver(
                code,
                reason,
                exp,
                str(w.get("namespace", "")),
                selector,
                str(w.get("resource", "")),
                fingerprint,
                str(w.get("by", "")).strip(),
            )
        )
    return out


KEYS = frozenset(
    {"code", "reason", "expires", "namespace", "selector", "resource", "fingerprint", "by"}
)
"""The keys of a `[[waivers]]` table."""


def history(w: Waiver) -> str:
    """What an expired waiver said: `waived until 2026-11-30 by alice: reason; expired`."""
    by = f" by {w.by}" if w.by else ""
    return f"waived until {w.expires.isoformat()}{by}: {w.reason}; expired"


def _names_a_check(code: str, where: str, reason: str) -> None:
    """Refuse a waiver whose code is no check's: it would never match, and the findings it was
    written for would fail the gate with no word about why."""
    codes = [c.code for c in check_registry.discover()]
    if code in codes:
        return
    close = difflib.get_close_matches(code, codes, n=1)
    hint = f"did you mean {close[0]}?" if close else "`gpuaudit checks` lists the codes"
    raise ConfigError(
        f"{where} (reason {terminal_safe(reason)}) names {terminal_safe(code)}, which is no "
        f"check's code, so it would never match; {hint}"
    )


def _parse_selector(text: str, where: str) -> list[tuple[str, str, str]]:
    """`a=b,c!=d,e,!f` -> [(key, op, value)]; op is =, !=, exists or !exists."""
    terms: list[tuple[str, str, str]] = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if "!=" in part:
            k, v = part.split("!=", 1)
            terms.append((k.strip(), "!=", v.strip()))
        elif "==" in part or "=" in part:
            k, v = part.split("==", 1) if "==" in part else part.split("=", 1)
            terms.append((k.strip(), "=", v.strip()))
        elif part.startswith("!"):
            terms.append((part[1:].strip(), "!exists", ""))
        else:
            terms.append((part, "exists", ""))
        if not terms[-1][0]:
            raise ConfigError(f"{where}: bad label selector {text!r}")
    return terms


def _matches(selector: str, labels: Mapping[str, str]) -> bool:
    for key, op, value in _parse_selector(selector, "selector"):
        if op == "=" and labels.get(key) != value:
            return False
        if op == "!=" and labels.get(key) == value:
            return False
        if op == "exists" and key not in labels:
            return False
        if op == "!exists" and key in labels:
            return False
    return True


def apply(
    findings: Sequence[Finding],
    waivers: Sequence[Waiver],
    pod_labels: Mapping[tuple[str, str], Mapping[str, str]],
    today: date | None = None,
) -> tuple[list[Finding], list[Suppressed], list[str]]:
    """Split findings into kept and suppressed; warn about expired waivers."""
    today = today or datetime.now(timezone.utc).date()
    active = [w for w in waivers if w.expires >= today]
    warnings = [
        f"waiver {w.describe()} expired on {w.expires.isoformat()} and no longer applies "
        f"(reason was: {w.reason})"
        for w in waivers
        if w.expires < today
    ]
    expired = [w for w in waivers if w.expires < today]
    kept: list[Finding] = []
    suppressed: list[Suppressed] = []
    for f in findings:
        hit = next((w for w in active if _applies(w, f, pod_labels)), None)
        if hit is not None:
            suppressed.append(Suppressed(f, hit))
            continue
        # An expired waiver's finding is reported again, with what the waiver said.
        past = tuple(history(w) for w in expired if _applies(w, f, pod_labels))
        kept.append(dataclasses.replace(f, history=f.history + past) if past else f)
    return kept, suppressed, warnings


def _applies(
    w: Waiver, f: Finding, pod_labels: Mapping[tuple[str, str], Mapping[str, str]]
) -> bool:
    r = f.resource
    if w.code != f.code:
        return False
    if w.fingerprint and w.fingerprint != f.fingerprint():
        return False
    if w.namespace and w.namespace != r.namespace:
        return False
    if w.resource and w.resource not in (r.ref(), r.name):
        return False
    return not (w.selector and not _matches(w.selector, pod_labels.get((r.namespace, r.name), {})))
