"""The folder `gpuaudit fix` writes: one file per patch or new object, named after its
finding; a `kustomization.yaml` (a kustomize Component) listing the patches with their targets
(`patches:`) and the new objects (`resources:`), to add to an overlay of the team's own
manifests; `apply.sh`, the same patches made to the live objects with `kubectl patch` and the
new objects created with `kubectl apply`; `commands.sh`, the changes that are commands; and
`README.md`, each change with what it saves and what it risks, and each finding that got none
with why.

`files` renders them (pure); `write` creates them in a new or empty folder, each file created
exclusively and never through a link, so that nothing there is overwritten.
"""

from __future__ import annotations

import errno
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]

from gpuaudit.core.errors import GpuauditError
from gpuaudit.fix.changes import Change, ChangeKind, Plan, evidence_line, key, one_line, short

KUSTOMIZATION = "kustomization.yaml"
README = "README.md"
COMMANDS = "commands.sh"
APPLY = "apply.sh"


@dataclass(frozen=True)
class About:
    """What the folder's files say about the audit they come from."""

    cluster: str
    window: str
    """`2026-11-16T00:00:00Z to 2026-11-23T00:00:00Z (168 h)`."""
    source: str
    """`the bundled demo`, `snapshot s.json.gz`, `Prometheus at URL`."""


def files(plan: Plan, about: About, unfixed: Mapping[str, str] | None = None) -> dict[str, str]:
    """File name -> text of everything the folder holds. `unfixed`: finding title -> why it got
    no change, for the README."""
    out: dict[str, str] = {}
    patches = [c for c in plan.changes if c.kind is ChangeKind.PATCH]
    objects = [c for c in plan.changes if c.kind is ChangeKind.OBJECT]
    commands = [c for c in plan.changes if c.kind is ChangeKind.COMMAND]
    for c in patches + objects:
        out[c.file] = _patch_file(c)
    out[KUSTOMIZATION] = _kustomization(patches, objects, about)
    if patches or objects:
        # New objects first: a patch may name one (a PriorityClass a pod template now names).
        out[APPLY] = _apply_script(objects + patches, about)
    if commands:
        out[COMMANDS] = _commands_script(commands, about)
    out[README] = _readme(plan, about, unfixed or {})
    return out


def _money(amount: float, currency: str) -> str:
    return f"{amount:,.2f} {currency}" if len(currency) > 1 else f"{currency}{amount:,.2f}"


def _saves(c: Change) -> str:
    s = c.savings
    return f"{s.gpu_hours:,.1f} GPU-hours and {_money(s.cost, s.currency)} per week"


def _header(c: Change) -> list[str]:
    f = c.lead
    lines = [
        f"# gpuaudit fix: {one_line(c.title, 300)}",
        f"# finding: {f.code} {short(f)} {one_line(f.fingerprint(), 300)}",
        f"# evidence: {evidence_line(f)}",
        f"# saves: {_saves(c)} (the window's wasted GPU-hours, at the window's rate)",
    ]
    lines += [
        f"# also answers: {g.code} {short(g)} {one_line(g.fingerprint(), 300)}"
        for g in c.findings[1:]
    ]
    # A note that starts "review: " asks the reviewer to act, and says so on its own line.
    lines += [
        f"# review: {one_line(n.removeprefix('review: '), 600)}"
        if n.startswith("review: ")
        else f"# note: {one_line(n, 600)}"
        for n in c.notes
    ]
    if c.validated and c.kind is ChangeKind.OBJECT:
        lines.append(f"# validated: this object, against {c.validated}")
    elif c.validated:
        lines.append(
            f"# validated: the object as read with this patch applied, against {c.validated}"
        )
    return lines


def _dump(doc: Any) -> str:
    text: str = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=False)
    return text


def _patch_file(c: Change) -> str:
    return "\n".join(_header(c)) + "\n" + _dump(c.body)


def _kustomization(patches: list[Change], objects: list[Change], about: About) -> str:
    entries = []
    for c in patches:
        t = c.target
        assert t is not None
        target: dict[str, str] = {}
        if t.group:
            target["group"] = t.group
        target |= {"version": t.version, "kind": t.kind, "name": _exact(t.name)}
        if t.namespace:
            target["namespace"] = _exact(t.namespace)
        entries.append({"path": c.file, "target": target})
    head = [
        f"# gpuaudit fix for cluster {one_line(about.cluster, 200)},",
        f"# {one_line(about.window, 200)}.",
        "# A kustomize Component: add this folder to an overlay of your manifests,",
        "#   components:",
        "#     - <path to this folder>",
        "# and review the patches and new objects it lists (README.md says what each saves",
        "# and risks).",
    ]
    doc: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
    }
    if objects:
        doc["resources"] = [c.file for c in objects]
    doc["patches"] = entries
    return "\n".join(head) + "\n" + _dump(doc)


def _exact(name: str) -> str:
    """A name as a kustomize target matches it: a regular expression, so its dots escaped."""
    return name.replace(".", "\\.")


_SCRIPT_HEAD = """#!/bin/sh
# {what}
# for cluster {cluster}, {window}.
# Review every line first. Run it with the kubectl context of that cluster:
#   KUBECONTEXT=<context> sh {name}
set -eu
: "${{KUBECONTEXT:?set KUBECONTEXT to the kubectl context of the cluster audited}}"
k() {{ kubectl --context "$KUBECONTEXT" "$@"; }}
"""


def _script_head(name: str, what: str, about: About) -> str:
    return _SCRIPT_HEAD.format(
        name=name,
        what=what,
        cluster=one_line(about.cluster, 200),
        window=one_line(about.window, 200),
    )


def _apply_script(patches: list[Change], about: About) -> str:
    out = [
        _script_head(
            APPLY,
            "gpuaudit fix: the patches of this folder, made to the live objects with kubectl "
            "patch,\n# and its new objects, created with kubectl apply (to change your manifests "
            "instead,\n# add kustomization.yaml to an overlay).",
            about,
        ),
        'here=$(dirname "$0")',
    ]
    for c in patches:
        t = c.target
        assert t is not None
        ns = f" -n {shlex.quote(t.namespace)}" if t.namespace else ""
        out.append(f"\n# {one_line(c.title, 300)}: saves {_saves(c)}")
        if c.kind is ChangeKind.OBJECT:
            out.append(f'k apply -f "$here/{c.file}"')
            continue
        out.append(
            f"k patch {shlex.quote(t.resource())} {shlex.quote(t.name)}{ns} "
            f'--type {c.patch_type} --patch-file "$here/{c.file}"'
        )
    return "\n".join(out) + "\n"


def _commands_script(commands: list[Change], about: About) -> str:
    out = [
        _script_head(
            COMMANDS,
            "gpuaudit fix: the changes that are commands, not patches. The deletion of a pod\n"
            "# stays commented out: a bare pod is not recreated by anything.",
            about,
        )
    ]
    for c in commands:
        f = c.lead
        out.append(f"\n# {f.code} {short(f)}: {one_line(c.title, 300)}; saves {_saves(c)}")
        out.extend(c.commands)
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, no pipe, no markup from the cluster."""
    return one_line(text, 600).replace("|", "\\|").replace("`", "'").replace("<", "&lt;")


def _readme(plan: Plan, about: About, unfixed: Mapping[str, str]) -> str:
    lines = [
        "# gpuaudit fix",
        "",
        f"Changes for cluster {_cell(about.cluster)}, from {_cell(about.source)} over "
        f"{_cell(about.window)}. gpuaudit changed nothing: review each change, then commit the "
        "patches into an overlay of your manifests (add this folder as a kustomize component: "
        "`components: [<this folder>]`), or make them to the live objects with "
        "`KUBECONTEXT=<context> sh apply.sh`; run the commands of `commands.sh` the same way.",
        "",
        f"Every patch was applied to the object as read and the result validated against "
        f"{_cell(plan.schema)}, and every new object validated; CRD kinds against their "
        "project's published CRD schema. "
        "Savings are the GPU-hours the findings wasted over the window, at the window's rate, "
        "for a week.",
        "",
    ]
    if plan.changes:
        lines += [
            "| Change | File | Findings | Saves per week | Risk |",
            "| --- | --- | --- | --- | --- |",
        ]
        for c in plan.changes:
            found = ", ".join(f"{f.code} {short(f)}" for f in c.findings)
            cells = (_cell(c.title), f"`{c.file}`", found, _cell(_saves(c)), _cell(c.risk))
            lines.append("| " + " | ".join(cells) + " |")
    else:
        lines.append("No finding of this audit has a change gpuaudit can write.")
    if unfixed:
        lines += ["", "## Findings without a change", ""]
        lines += [f"- {_cell(title)}: {_cell(why)}" for title, why in unfixed.items()]
    return "\n".join(lines) + "\n"


def unfixed(plan: Plan, findings: Any) -> dict[str, str]:
    """Finding title -> why it got no change, for the findings of fixable checks that got none
    (and those whose change is a command standing in for a patch)."""
    out: dict[str, str] = {}
    for f in findings:
        got = plan.of(f)
        if got is None or (got.kind is not None and got.kind is not ChangeKind.COMMAND):
            continue
        if got.kind is ChangeKind.COMMAND and not got.reason:
            continue
        r = f.resource
        where = f"{r.namespace}/{r.name}" if r.namespace else r.name
        out[f"{f.code} {short(f)} {r.kind} {where}"] = got.reason
    return out


def write(texts: Mapping[str, str], folder: Path) -> list[Path]:
    """Create `folder` (or use it when it is an empty folder) and write `texts` into it, each
    file created exclusively (never overwriting, never through a link). A folder that holds
    anything, or a path that is a file or a link, is refused with one clear error."""
    try:
        if folder.is_symlink():
            raise GpuauditError(
                f"cannot write the changes to {folder}: it is a link; name a folder"
            )
        if folder.exists():
            if not folder.is_dir():
                raise GpuauditError(
                    f"cannot write the changes to {folder}: it is a file; name a folder"
                )
            if any(folder.iterdir()):
                raise GpuauditError(
                    f"cannot write the changes to {folder}: the folder is not empty; gpuaudit "
                    "fix writes into a new or empty folder only (it never overwrites), so remove "
                    "it or name another"
                )
        else:
            folder.mkdir()
        flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        dir_fd = os.open(folder, flags)
    except OSError as exc:
        raise GpuauditError(
            f"cannot write the changes to {folder}: {exc.strerror or exc}"
        ) from None
    written = []
    try:
        for name, text in texts.items():
            if "/" in name or name in ("", ".", ".."):
                raise GpuauditError(f"refusing to write a file named {name!r}")
            _create(dir_fd, name, text.encode("utf-8"), folder)
            written.append(folder / name)
    finally:
        os.close(dir_fd)
    return written


def _create(dir_fd: int, name: str, data: bytes, folder: Path) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(name, flags, 0o644, dir_fd=dir_fd)
    except OSError as exc:
        why = "it exists" if exc.errno == errno.EEXIST else (exc.strerror or str(exc))
        raise GpuauditError(f"cannot write {folder / name}: {why}") from None
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


__all__ = ["About", "files", "key", "unfixed", "write"]
