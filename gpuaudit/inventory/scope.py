"""A team's own view (`--namespace NS`): the inventory narrowed to the pods of some namespaces.

The narrowing is made once, here, on the built inventory: after the series were joined to the
pods of the whole cluster (a snapshot's) or of the namespaces read (live), so that a series of
another namespace's pod is that pod's, never "unattributed" for lack of it. What stays:

- the holdings whose pod is in one of the namespaces (by the series' labels or the pod they were
  joined to), and their hourly rows; a GPU no pod of them held (idle, or another team's) goes;
- the GPUs those holdings are of, and the nodes those GPUs and the namespaces' pods are on (so
  `gpus_total` counts the GPUs of the nodes their pods ran on), with their P2P status and links;
- the namespaces' pods and gangs, and the queues' Workloads, PodGroups and LocalQueues of
  theirs (the queues themselves, cluster-scoped, stay).

Owners, HAMi grants and serving gauges stay whole: they are looked up by pod or holding.
The checks run over the whole inventory (where another team's pods sit decides a placement or
a preemption); the audit keeps their findings `in_scope` (a cluster-scoped one only where it
names a pod of the namespaces) and makes the summary, capacity plan, ledgers and showback from
the narrowed one (`gpuaudit.audit.assemble.run_checks`). The attribution ledger is then the
namespaces' own: their pods' held GPU-hours by method, and their running pods' GPU-hours no
series names (each reason judged over the whole inventory: a node whose exporter serves
another team's pods has one), which sum to the narrowed allocated GPU-hours.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpuaudit.core.errors import ConfigError
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.queues import Queues
from gpuaudit.inventory.tables import Inventory
from gpuaudit.inventory.views import Views

if TYPE_CHECKING:
    import pandas as pd


def narrow(
    inv: Inventory, namespaces: Sequence[str], unattributed: pd.DataFrame | None = None
) -> Inventory:
    """`inv` narrowed to the pods of `namespaces` (see the module); `inv` itself when none are
    named. A namespace with neither a pod nor a GPU series adds a warning (a typo would
    otherwise read as a team that used nothing). `unattributed`: `inv`'s unattributed rows
    when already made (`Views.unattributed`); their reasons are judged over the whole
    inventory (whether a node has an exporter is not the namespaces' to say), then the rows
    narrowed."""
    if not namespaces:
        return inv
    wanted = list(dict.fromkeys(namespaces))
    h = inv.holdings
    holdings = h[h[C.NAMESPACE].isin(wanted)] if not h.empty else h
    hr = inv.hourly
    hourly = hr[hr[C.HOLDING].isin(holdings[C.HOLDING])] if not hr.empty else hr
    slots = set(holdings[C.SLOT])
    gpus = inv.gpus[inv.gpus[C.SLOT].isin(slots)] if not inv.gpus.empty else inv.gpus
    pods = inv.pods[inv.pods[C.NAMESPACE].isin(wanted)] if not inv.pods.empty else inv.pods
    on = {str(n) for n in holdings[C.NODE]} | {str(n) for n in pods[C.NODE]}
    on.discard("")
    nodes = inv.nodes[inv.nodes[C.NODE].isin(on)] if not inv.nodes.empty else inv.nodes
    gangs = inv.gangs[inv.gangs[C.NAMESPACE].isin(wanted)] if not inv.gangs.empty else inv.gangs
    p2p = inv.p2p[inv.p2p[C.NODE].isin(on)] if not inv.p2p.empty else inv.p2p
    seen = set(holdings[C.NAMESPACE]) | set(pods[C.NAMESPACE])
    absent = [ns for ns in wanted if ns not in seen]
    warnings = inv.warnings
    if absent:
        warnings += (
            f"--namespace {', '.join(absent)}: no pod and no GPU series of "
            f"{'this namespace' if len(absent) == 1 else 'these namespaces'} in the window",
        )
    un = Views(inv, {}).unattributed if unattributed is None else unattributed
    un = un[un[C.NAMESPACE].isin(wanted)] if not un.empty else un
    return dataclasses.replace(
        inv,
        unattributed=un.reset_index(drop=True),
        holdings=holdings.reset_index(drop=True),
        hourly=hourly.reset_index(drop=True),
        gpus=gpus.reset_index(drop=True),
        pods=pods.reset_index(drop=True),
        nodes=nodes.reset_index(drop=True),
        gangs=gangs.reset_index(drop=True),
        p2p=p2p.reset_index(drop=True),
        topologies={n: t for n, t in inv.topologies.items() if n in on},
        queues=_queues(inv.queues, wanted),
        warnings=warnings,
        namespaces=tuple(wanted),
    )


def _queues(q: Queues, wanted: Sequence[str]) -> Queues:
    """The queues as a live collection of `wanted` reads them: every queue, flavor and cohort
    (cluster-scoped), the Workloads, PodGroups, LocalQueues and pods of `wanted` only."""
    return dataclasses.replace(
        q,
        admissions=tuple(a for a in q.admissions if a.namespace in wanted),
        local_queues={k: v for k, v in q.local_queues.items() if k[0] in wanted},
        pod_queue={k: v for k, v in q.pod_queue.items() if k[0] in wanted},
        pod_admission={k: v for k, v in q.pod_admission.items() if k[0] in wanted},
    )


def in_scope(namespaces: Sequence[str], namespace: str, pods: Sequence[str]) -> bool:
    """Whether a finding about a resource in `namespace` (empty: cluster-scoped) whose impact
    is made of `pods` (`namespace/name`) belongs to the view of `namespaces`: every finding
    without a narrowing; a namespaced one in them; a cluster-scoped one (a node, a GPU, a
    queue) that names a pod of them."""
    if not namespaces:
        return True
    if namespace:
        return namespace in namespaces
    # The last `/`: a scan of every cluster writes `cluster/namespace/pod`.
    return any(p.rpartition("/")[0].rpartition("/")[2] in namespaces for p in pods)


def same_scope(doc: Mapping[str, Any], flag: str, namespaces: Sequence[str]) -> None:
    """Refuse an earlier report (`--previous`, `--baseline`, `--history`) narrowed to other
    namespaces than this audit (or to none where this one is, or the other way round): every
    finding outside the narrower one would read as fixed, or as new."""
    given = doc.get("namespaces")
    theirs = sorted({n for n in given if isinstance(n, str)}) if isinstance(given, list) else []
    ours = sorted(set(namespaces))
    if theirs != ours:
        raise ConfigError(
            f"{flag}: the earlier report covers {_scope(theirs)}, this audit {_scope(ours)}; "
            "compare reports of one scope (--namespace)"
        )


_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A namespace's name (a DNS-1123 label)."""


def _scope(names: Sequence[str]) -> str:
    if not names:
        return "the whole cluster"
    # An earlier report is a file from outside: a name not a namespace's is shown escaped.
    shown = ", ".join(n if _NAME.fullmatch(n) else ascii(n[:63]) for n in names[:10])
    more = f" and {len(names) - 10:,} more" if len(names) > 10 else ""
    return f"namespace{'s' if len(names) > 1 else ''} {shown}{more}"
