"""Normalised DCGM identities of Prometheus series (answers are parsed in
`gpuaudit.snapshot.answers`).

Label spellings accepted (`docs/domain.md`, dcgm-exporter labels): `exported_pod`/
`exported_namespace`/`exported_container` (Helm default, where `pod` names the exporter itself),
`pod`/`namespace`/`container`, the old `pod_name`/`pod_namespace`/`container_name`; `UUID` or
`uuid`; `Hostname`, `hostname` or a relabelled `node`. An absent or empty pod label means "not
held".

The spelling `any` (a backend holding series of both kinds, `gpuaudit.sources.prometheus.
discovery`) takes each series by its own: `exported_*` where it carries `exported_pod`, else
the old `pod_name` spelling where it carries that, else `pod`, unless that `pod` is an exporter's
own (it appears next to `exported_pod` on other series, or is named like dcgm-exporter).

In a scan of every cluster (`--cluster-label NAME`), node names, GPU indexes, exporter addresses
and pod names repeat from cluster to cluster: each identity names its cluster, and its UUID,
slot, node, scrape target and namespace are qualified by it (`prod/ml`, `prod/node-1`;
`qualify`), so that nothing downstream can merge two clusters' GPUs, nodes or pods, and every
finding that names a namespace or node names its cluster. Kubernetes names hold no `/`, so the
cluster is what comes before the last one (`cluster_of`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuaudit.core.numbers import index_label

_EXPORTER_RE = re.compile(r"dcgm-exporter|dcgm_exporter", re.IGNORECASE)


@dataclass(frozen=True)
class Identity:
    """Who a series is about: one GPU or MIG instance, and its holder if any."""

    slot: str
    uuid: str
    gpu_index: str
    mig_id: str
    mig_profile: str
    model: str
    host: str
    instance: str
    namespace: str
    pod: str
    container: str
    claim: str = ""
    """`namespace/name` of the DRA ResourceClaim dcgm-exporter labels the series with
    (`dra_claim_namespace`, `dra_claim_name`, with its DRA mapping on), or empty."""
    cluster: str = ""
    """The value of the cluster label of a scan of every cluster; empty otherwise."""

    @property
    def held(self) -> bool:
        return bool(self.pod)


def _s(labels: Mapping[str, Any], *names: str) -> str:
    for n in names:
        v = labels.get(n)
        if isinstance(v, str) and v:
            return v
    return ""


READ_LABELS = (
    "UUID",
    "uuid",
    "gpu",
    "GPU_I_ID",
    "GPU_I_PROFILE",
    "modelName",
    "model_name",
    "node",
    "Hostname",
    "hostname",
    "kubernetes_node",
    "instance",
    "exported_pod",
    "exported_namespace",
    "exported_container",
    "pod",
    "pod_name",
    "namespace",
    "pod_namespace",
    "container",
    "container_name",
    "dra_claim_name",
    "dra_claim_namespace",
)
"""Every label `identity` reads: series that agree on these have the same identity."""


def qualify(cluster: str, name: str) -> str:
    """`name` (a node, namespace, slot or scrape target) as one of `cluster`'s: `cluster/name`;
    `name` itself outside a scan of every cluster (`cluster` empty)."""
    return f"{cluster}/{name}" if cluster else name


def cluster_of(qualified: str) -> str:
    """The cluster a qualified node or namespace name belongs to (empty when unqualified)."""
    return qualified.rpartition("/")[0]


def identity(
    labels: Mapping[str, Any],
    spelling: str,
    exporters: frozenset[tuple[str, str]] = frozenset(),
    cluster_label: str = "",
) -> Identity:
    """Normalise one series' labels. `exporters` are the (namespace, pod) of exporters seen as
    `pod` next to an `exported_pod` (used by the spelling `any`). `cluster_label` is the label
    a scan of every cluster groups by: the identity is that cluster's (see `qualify`)."""
    if spelling == "any":
        if _s(labels, "exported_pod"):
            spelling = "exported"
        elif _s(labels, "pod_name"):
            spelling = "old"
        elif (_s(labels, "namespace"), _s(labels, "pod")) in exporters:
            labels = {k: v for k, v in labels.items() if k not in ("pod", "namespace")}
    uuid = _s(labels, "UUID", "uuid")
    gpu = _s(labels, "gpu")
    mig_id = _s(labels, "GPU_I_ID")
    host = _s(labels, "node", "Hostname", "hostname", "kubernetes_node")
    if spelling == "exported":
        pod = _s(labels, "exported_pod")
        ns = _s(labels, "exported_namespace")
        container = _s(labels, "exported_container")
    elif spelling == "old":
        pod = _s(labels, "pod_name")
        ns = _s(labels, "pod_namespace")
        container = _s(labels, "container_name")
    else:
        pod = _s(labels, "pod", "pod_name")
        ns = _s(labels, "namespace", "pod_namespace")
        container = _s(labels, "container", "container_name")
        # An unallocated GPU scraped with target labels attached shows the exporter as `pod`.
        if _EXPORTER_RE.search(pod) or _EXPORTER_RE.search(container):
            pod = ns = container = ""
    claim_ns = _s(labels, "dra_claim_namespace")
    instance = _s(labels, "instance")
    cluster = _s(labels, cluster_label) if cluster_label else ""
    if cluster:
        # A UUID too: two clusters' copies of one GPU's series (a relabelling slip) stay two.
        uuid, instance = qualify(cluster, uuid) if uuid else "", qualify(cluster, instance)
        host = qualify(cluster, host) if host else ""
        ns = qualify(cluster, ns) if pod else ns
        claim_ns = qualify(cluster, claim_ns) if claim_ns else ""
    base = uuid or f"{host}:gpu{gpu}"
    if cluster and not uuid and not host:
        base = qualify(cluster, base)
    slot = f"{base}/{mig_id}" if mig_id else base
    return Identity(
        slot=slot,
        uuid=uuid,
        # The index as a number the checks can use, or unknown: never digit-like text (`"²"`).
        gpu_index=gpu if index_label(gpu) is not None else "",
        mig_id=mig_id,
        mig_profile=_s(labels, "GPU_I_PROFILE"),
        model=_s(labels, "modelName", "model_name"),
        host=host,
        instance=instance,
        namespace=ns if pod else "",
        pod=pod,
        container=container if pod else "",
        claim=f"{claim_ns}/{claim}" if (claim := _s(labels, "dra_claim_name")) and claim_ns else "",
        cluster=cluster,
    )
