"""The plan of one audit: each fixable finding's change, made by the maker of its check and
validated before it is kept.

A maker is a module with `CODES` (the checks it answers) and `changes(findings, context)`, which
returns the changes and what each finding gets (`FindingFix`); adding a kind of change is one
such module and its entry in `MAKERS`. Every patch is applied to the object as read and the
result validated (`gpuaudit.fix.validate`); a change that does not apply or validate is dropped,
and its findings say why.

The changes agree with each other and with the findings' advice (`coherent`): no change releases
a node (GPU060's, `Finding.releases`) that another finding places work on (`Finding.targets`: an
advised move, GPU031's, or the node a waiting pod would preempt on, GPU050's), and no change
places work on a node a GPU070 finding takes out of service (`Finding.drains`), nor a change
all of whose nodes (`Change.lands`, a MIG slice's offering nodes) such a finding drains: such a
change is not written, and its findings say which finding it would contradict. A new object
made only for patches (a PriorityClass their templates name) is not written when none of them
is (`used`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from types import ModuleType

from gpuaudit.checks.findings import Finding
from gpuaudit.fix import (
    cpu_limits,
    drain,
    kueue,
    memory_limits,
    migslice,
    owned,
    parttime,
    priority,
    queue_quota,
    warm_nodes,
)
from gpuaudit.fix.changes import Change, ChangeKind, FindingFix, Plan, key
from gpuaudit.fix.context import Context, node_key
from gpuaudit.fix.patching import PatchError, apply
from gpuaudit.fix.validate import Invalid, check, schema_version
from gpuaudit.inventory import Inventory

MAKERS: tuple[ModuleType, ...] = (
    owned,
    parttime,
    migslice,
    kueue,
    queue_quota,
    priority,
    memory_limits,
    cpu_limits,
    warm_nodes,
    drain,
)
"""The change makers, each with `CODES` and `changes` (see the module's docstring)."""


def plan(findings: Sequence[Finding], inv: Inventory, currency: str, timezone: str = "UTC") -> Plan:
    """The changes that answer `findings` (ranked), with what each finding of a fixable check
    gets; a schedule is written in `timezone` (the cluster's, an IANA name)."""
    version, why = schema_version(inv.owners.version)
    ctx = Context(inv, currency, version, timezone)
    changes: list[Change] = []
    fixes: dict[str, FindingFix] = {}
    for maker in MAKERS:
        mine = [f for f in findings if f.code in maker.CODES]
        if not mine:
            continue
        make: Callable[..., tuple[list[Change], dict[str, FindingFix]]] = maker.changes
        made, got = make(mine, ctx)
        fixes.update(got)
        for change in made:
            kept, invalid = _validated(change, version)
            if kept is not None:
                changes.append(kept)
                continue
            for f in change.findings:
                fixes[key(f)] = FindingFix(
                    None, "", None, f"the change was not written: it {invalid}"
                )
    changes = used(coherent(changes, findings, fixes), fixes)
    # One order, computed once: the patches and new objects first, then the commands; each the
    # most GPU-hours saved first (the makers' order, which follows the ranking, breaks ties).
    changes.sort(key=lambda c: (c.kind is ChangeKind.COMMAND, -round(c.savings.gpu_hours, 6)))
    return Plan(tuple(changes), fixes, why)


def coherent(
    changes: list[Change], findings: Sequence[Finding], fixes: dict[str, FindingFix]
) -> list[Change]:
    """`changes` less those that release a node another finding places work on, or place work
    on a node a finding drains; the findings of each one dropped say why (in `fixes`)."""
    placed: dict[tuple[str, str], list[Finding]] = {}
    drained: dict[tuple[str, str], list[Finding]] = {}
    for f in findings:
        for node in f.targets:
            placed.setdefault(node_key(node), []).append(f)
        for d in f.drains:
            drained.setdefault(node_key(d.node), []).append(f)
    kept: list[Change] = []
    for change in changes:
        why = _contradicts(change, placed, drained)
        if not why:
            change, why = _landing(change, drained)
        if not why:
            kept.append(change)
            continue
        for f in change.findings:
            fixes[key(f)] = FindingFix(None, "", None, f"the change was not written: {why}")
    return kept


def used(changes: list[Change], fixes: dict[str, FindingFix]) -> list[Change]:
    """`changes` less the new objects made only for patches (`Change.serves`) none of which is
    written (dropped by validation or `coherent`): a PriorityClass no template names is not
    written; a finding whose answer it was says why (in `fixes`)."""
    files = {c.file for c in changes}
    kept: list[Change] = []
    for change in changes:
        if not change.serves or files.intersection(change.serves):
            kept.append(change)
            continue
        why = (
            f"the change was not written: {change.title.split(' (')[0]} was made only for "
            f"pod templates that name it, and none of their patches was written"
        )
        for f in change.findings:
            got = fixes.get(key(f))
            if got is None or got.file == change.file:
                fixes[key(f)] = FindingFix(None, "", None, why)
    return kept


def _landing(change: Change, drained: dict[tuple[str, str], list[Finding]]) -> tuple[Change, str]:
    """`change` where it may land on a node no finding drains, saying in a note which of its
    nodes one does (cordoned, such a node takes no new pod: the scheduler places the pods on the
    others, which the node selector allows as well); else why it is not written."""
    own = {key(f) for f in change.findings}
    out: list[tuple[str, Finding]] = []
    for node in change.lands:
        other = next((g for g in drained.get(node_key(node), ()) if key(g) not in own), None)
        if other is not None:
            out.append((node, other))
    if not out:
        return change, ""
    names = ", ".join(f"{n} ({g.code})" for n, g in out[:6]) + (" ..." if len(out) > 6 else "")
    if len(out) == len(change.lands):
        return change, (
            f"every node it may be placed on is taken out of service ({names}): its pods would "
            "wait Pending; wait until one is back"
        )
    rest = [n for n in change.lands if n not in {n for n, _ in out}]
    note = (
        f"taken out of service by another finding: {names}; cordoned, they take no new pod, "
        f"so the pods land on {', '.join(rest[:6])}{' ...' if len(rest) > 6 else ''}"
    )
    return dataclasses.replace(change, notes=(*change.notes, note)), ""


def _contradicts(
    change: Change,
    placed: dict[tuple[str, str], list[Finding]],
    drained: dict[tuple[str, str], list[Finding]],
) -> str:
    """Why `change` contradicts another finding, or ""."""
    own = {key(f) for f in change.findings}
    for f in change.findings:
        for node in f.releases:
            other = next((g for g in placed.get(node_key(node), ()) if key(g) not in own), None)
            if other is not None:
                r = other.resource
                return (
                    f"it would release node {node}, where {other.code} places work ({r.kind} "
                    f"{r.ref()}): keep the node until that work has moved, then release what it "
                    "leaves"
                )
        for node in f.targets:
            other = next((g for g in drained.get(node_key(node), ()) if key(g) not in own), None)
            if other is not None:
                return (
                    f"it would place work on node {node}, which {other.code} takes out of "
                    "service: wait until the node is back"
                )
    return ""


def _validated(change: Change, version: str) -> tuple[Change | None, str]:
    """The change, stamped with the schema it validated against, or None and why not."""
    if change.kind is ChangeKind.OBJECT:
        try:
            return dataclasses.replace(change, validated=check(change.body, version)), ""
        except Invalid as exc:
            return None, f"does not validate against the schema ({exc})"
    if change.kind is not ChangeKind.PATCH:
        return change, ""
    if change.read is None:
        return None, "has no object as read to apply to"
    try:
        patched = apply(change.read, change.body, change.patch_type)
        named = check(patched, version)
    except PatchError as exc:
        return None, f"does not apply to {change.title.split(':')[0]} as read ({exc})"
    except Invalid as exc:
        return None, f"does not validate against the schema ({exc})"
    return dataclasses.replace(change, validated=named), ""
