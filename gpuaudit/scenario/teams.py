"""The `team` label of every workload pod of a scenario, by its namespace, so that
`--group-by-label team` (the label the CronJob and the docs use) breaks the demo's waste down
by team. Drawn from no random stream: labelling pods changes nothing else in a scenario."""

from __future__ import annotations

from typing import Any

from gpuaudit.scenario.builder import Builder
from gpuaudit.snapshot.fields import CONTACT

LABEL = "team"
"""The pod label that names a team."""

TEAMS: dict[str, str] = {
    "serving": "inference",
    "search": "inference",
    "media": "inference",
    "inference-team": "inference",
    "ml-train": "training",
    "ml-tune": "training",
    "ml-eval": "training",
    "moe-train": "training",
    "hpo-trials": "training",
    "sweeps": "training",
    "rl": "training",
    "research": "research",
    "notebooks": "research",
    "team-a": "research",
    "team-b": "research",
    "vision": "vision",
    "vision-lab": "vision",
    "batch": "data",
    "batch-team": "data",
    "shared": "data",
}
"""Namespace -> the team that owns it."""

DEFAULT = "platform"
"""The team of a namespace `TEAMS` does not name."""


def label(b: Builder) -> None:
    """Give every pod of `b` a `team` label by its namespace, unless it has one."""
    for p in b.pods:
        p.labels.setdefault(LABEL, TEAMS.get(p.namespace, DEFAULT))


def namespaces(names: list[str]) -> list[dict[str, Any]]:
    """A Namespace object for each of `names`, labelled with its team (`TEAMS`) and annotated
    with the team's chat channel (`gpuaudit.io/contact`), as the owners of what runs there
    (`gpuaudit.inventory.ownership`)."""
    out = []
    for i, name in enumerate(sorted(set(names))):
        team = TEAMS.get(name, DEFAULT)
        meta = {
            "name": name,
            "uid": f"namespace-{i:05d}",
            "labels": {"kubernetes.io/metadata.name": name, LABEL: team},
            "annotations": {CONTACT: f"#gpu-{team}"},
        }
        out.append({"metadata": meta})
    return out
