"""How allocated GPU-hours were joined to the pods that held them, and why some were not.

The names are the attribution ledger's contract: every report's `attribution` section counts
allocated GPU-hours under `attributed.<Method>` and `unattributed.<Reason>`, and the two sides
sum to the summary's allocated GPU-hours. A holding's `attribution` column (see
`gpuaudit.inventory.columns.ATTRIBUTION`) holds its `Method` value (empty for a GPU no pod
held).

Allocated GPU-hours are the GPU-hours held by pods: those DCGM measured (attributed, one of the
methods) plus those the Kubernetes API says pods held where no DCGM series names the pod
(unattributed, one of the reasons; counted over the time the pod ran in the window, from its
start, or the window's, to its end, or the window's, at the GPUs it requests, less the buckets
the Kubernetes-side join gave it its devices in).

The stages, run by `gpuaudit.inventory.build` in this order:

1. `_identities` fills `ATTRIBUTION` with `Method.DCGM_POD_LABEL` for every labelled holding
   and `Method.DRA_CLAIM` where ResourceClaims join a pod to the device
   (`gpuaudit.inventory.claimed`);
2. `kubernetes_join` labels DCGM series without pod labels from the Kubernetes side, bucket by
   bucket, where one pod is the only possible holder in the bucket (`Method.KUBERNETES_JOIN`,
   see `gpuaudit.inventory.bucketjoin`);
3. `share` splits shared devices among their holders (`Method.SHARED_SPLIT`, see
   `gpuaudit.inventory.sharing`).

Before them, `gpuaudit.inventory.fractions` splits the series of a GPU KAI Scheduler shares
among its fraction pods and its reservation pod (`Method.KAI_FRACTION`,
`Method.KAI_RESERVED`).

Before them, GPUs shared through HAMi are given to the pods HAMi granted shares of them
(`Method.HAMI_SHARE`, `gpuaudit.inventory.hami`), each holding its share.

`unattributed` lists, per pod, the GPU-hours no DCGM series could be joined to, with the
reason.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuaudit.domain import mig
from gpuaudit.inventory import bucketjoin, sharing
from gpuaudit.inventory import columns as C
from gpuaudit.inventory.kube import ENDED_PHASES

if TYPE_CHECKING:
    import pandas as pd


class Method(str, enum.Enum):
    """How a holding was attributed to its pod."""

    DCGM_POD_LABEL = "dcgm_pod_label"
    """The DCGM series carries the pod's labels (`pod`/`namespace`, or `exported_*`)."""
    SHARED_SPLIT = "shared_split"
    """A shared (time-sliced or MPS) device's hours split among the pods holding replicas of it:
    each holder counts its device's fraction over the replicas (`nvidia.com/gpu.replicas`, or
    more when more pods held it at once), so the holders together never exceed the device."""
    DRA_CLAIM = "dra_claim"
    """The device was allocated to the pod through a DRA ResourceClaim (`resource.k8s.io`)."""
    KUBERNETES_JOIN = "kubernetes_join"
    """The series had no pod labels; the holder was found from the Kubernetes side, per bucket
    of the grid: in each bucket, the only pod on the node that ran in it (by its start and, for
    a pod that ended, its containers' end), requests such a device (a whole GPU, or a MIG
    profile) and is named on no DCGM series, requesting exactly as many as the node has
    unlabelled in that bucket. It holds those buckets (the part of a bucket it started or ended
    in that it ran); see `gpuaudit.inventory.bucketjoin`."""
    KAI_FRACTION = "kai_fraction"
    """A GPU KAI Scheduler shares: the series names its reservation pod; the fraction pod counts
    its share of the GPU (`gpu-fraction`, or `gpu-memory` over the GPU's memory) from its start
    (see `gpuaudit.inventory.fractions`)."""
    KAI_RESERVED = "kai_reserved"
    """A GPU KAI Scheduler shares: the part its fraction pods do not cover, held by the
    reservation pod for the GPU group (allocated, asked for by no workload)."""
    HAMI_SHARE = "hami_share"
    """A GPU shared through HAMi: each pod HAMi's scheduler granted part of it (pod annotation
    `hami.io/vgpu-devices-allocated`) holds its share for the time it ran (running, or ended
    at a known time), the larger of its cores and its memory over the GPU's (scaled down
    together where the shares of a GPU's pods that ran at one time add up to more than 1);
    what no pod holds stays unheld (see `gpuaudit.inventory.hami`)."""


class Reason(str, enum.Enum):
    """Why allocated GPU-hours could not be attributed to a pod."""

    NO_EXPORTER = "no_exporter"
    """The node's GPUs are requested by pods but no DCGM series came from the node."""
    NO_POD_LABEL = "no_pod_label"
    """DCGM series come from the node but none names the pod (the exporter's pod mapping off,
    a resource name it does not map), and the Kubernetes-side join could not give it its
    devices in those buckets: another pod that could hold them ran in them too, or it requests
    another number of them than the node has unlabelled."""
    NO_LIMIT = "no_limit"
    """The pod holds GPUs without an `nvidia.com/gpu` limit, so the exporter never labels it.
    The API server refuses an extended-resource request without its limit, so these GPU-hours
    are not visible from the Kubernetes side; the reason is kept for the contract and reads 0."""
    PROFILING_ABSENT = "profiling_absent"
    """MIG instances that pods hold per the Kubernetes API, with neither pod labels nor
    profiling series (GPU_UTIL reads 0 on MIG): no signal joins them to a pod."""
    SHARED_WITHOUT_VIRTUAL_GPUS = "time_slicing_without_virtual_gpus"
    """Replicas of a time-sliced or MPS device held by pods the exporter does not label: without
    `--kubernetes-virtual-gpus` it labels each device with one of its pods only."""


KAI_METHODS = (Method.KAI_FRACTION.value, Method.KAI_RESERVED.value)
"""The methods of a GPU KAI Scheduler shares."""

GPU_SHARED = "nvidia.com/gpu.shared"
"""The resource name of shared replicas when the device plugin renames them."""


def _gpus_of(row: Mapping[Any, Any], model: str, replicas: float) -> tuple[float, float, float]:
    """(whole GPUs, MIG GPUs, shared replicas in GPUs) a pod row requests."""
    requests = row[C.REQUESTS] if isinstance(row[C.REQUESTS], Mapping) else {}
    whole = float(row[C.GPU_REQUEST] or 0.0)
    migs = 0.0
    for part in str(row[C.MIG_REQUEST]).split(","):
        if "=" in part:
            prof, n = part.split("=", 1)
            migs += float(n) * mig.slice_fraction(prof, model)
    shared = float(requests.get(GPU_SHARED, 0.0) or 0.0)
    if replicas > 1:
        shared += whole
        whole = 0.0
    return whole, migs, shared / max(replicas, 1.0)


def _candidates(inv_pods: pd.DataFrame, named: set[tuple[str, str]]) -> pd.DataFrame:
    """Pods on a node that request GPUs and no DCGM series names: running, or ended (Succeeded,
    Failed) at a known time (`C.FINISHED`); an ended pod whose end is not known is left out,
    as nothing says when it held its GPUs."""
    pods = inv_pods
    if pods.empty:
        return pods
    wants = (pods[C.GPU_REQUEST] > 0) | (pods[C.MIG_REQUEST] != "")
    wants |= pods[C.REQUESTS].map(lambda r: isinstance(r, Mapping) and GPU_SHARED in r)
    ran = pods[C.PHASE] == "Running"
    ran |= pods[C.PHASE].isin(ENDED_PHASES) & pods[C.FINISHED].notna()
    out: pd.DataFrame = pods[ran & (pods[C.NODE] != "") & wants]
    keep = [
        (ns, p) not in named
        for ns, p in zip(out[C.NAMESPACE].tolist(), out[C.POD].tolist(), strict=True)
    ]
    result: pd.DataFrame = out[keep]
    return result


def _named(holdings: pd.DataFrame) -> set[tuple[str, str]]:
    """Pods a DCGM series names (the Kubernetes-side join's pods are not named by one)."""
    joined = holdings[C.ATTRIBUTION].to_numpy(dtype=object) == Method.KUBERNETES_JOIN.value
    held = holdings[holdings[C.HELD].to_numpy(dtype=bool) & ~joined]
    return set(zip(held[C.NAMESPACE].tolist(), held[C.POD].tolist(), strict=True))


def kubernetes_join(
    holdings: pd.DataFrame,
    hourly: MutableMapping[str, Any],
    pods: pd.DataFrame,
    replicas: Mapping[str, sharing.Sharing],
    grid: tuple[float, float, float],
    points: Mapping[str, bucketjoin.Points] | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The holdings with unlabelled series joined to the pods the Kubernetes side names
    without doubt, bucket by bucket (`Method.KUBERNETES_JOIN`; the rule and how a series held
    by several pods in turn is split are `gpuaudit.inventory.bucketjoin`'s). `hourly`: the
    hourly table's columns, replaced where rows go to new holdings; `grid`: the window's start,
    end and bucket length; `points`: the buckets of the window figures a split part takes
    from its own buckets (`bucketjoin.split`). Shared nodes are left alone: which replica a
    pod holds is not in the API. Returns the holdings and the warnings to show (what a split
    leaves out)."""
    if holdings.empty or pods.empty:
        return holdings, []
    cand = _candidates(pods, _named(holdings)).reset_index(drop=True)
    if cand.empty:
        return holdings, []
    start, end, step = grid
    shared = {str(n) for n, s in replicas.items() if s.replicas > 1}
    joined = bucketjoin.plan(holdings, hourly, cand, shared, (start, end), step)
    out, split = bucketjoin.split(
        holdings, hourly, cand, joined, (Method.KUBERNETES_JOIN.value, step), points or {}
    )
    if not split:
        return out, []
    return out, [
        f"{split} DCGM series without pod labels were held by several pods in turn (or only "
        "for part of the window) and were split among them by the Kubernetes-side join, bucket "
        "by bucket: their peak activity, framebuffer use other than its p95, link traffic "
        "and SM clock were measured over the whole window and are not known for each part, "
        "nor are the p95s, power and violation seconds of a part that shared a bucket with "
        "another (they are left out)"
    ]


UNATTRIBUTED_COLUMNS = [
    C.NAMESPACE,
    C.POD,
    C.NODE,
    C.MODEL,
    "gpus",
    C.HOURS,
    C.GPU_HOURS,
    "reason",
    "kind",
    C.SPANS,
]
"""The columns of `unattributed`: per pod, the GPUs (whole-GPU equivalents) it holds with no
DCGM series naming it, the hours held in the window, their product, the `Reason`, what kind
of GPU they are (`KINDS`: a pod holding several kinds has a row per kind), and the buckets
those hours lie in (`C.SPANS`)."""
KINDS = ("whole", "mig", "shared")
"""Whole GPUs (devices or DRA devices), MIG slices (their share of a GPU), shared replicas
(time-slicing or MPS, each its share of the device)."""


def unattributed(
    holdings: pd.DataFrame,
    pods: pd.DataFrame,
    nodes: pd.DataFrame,
    window: tuple[float, float],
    replicas: Mapping[str, sharing.Sharing],
    hourly: pd.DataFrame | None = None,
    step: float = 3600.0,
    hami: Mapping[tuple[str, str], float] | None = None,
) -> pd.DataFrame:
    """Per pod that requests GPUs and is named on no DCGM series (running, or ended at a known
    time: see `_candidates`): its GPU-hours over the time it ran in the window (from the later
    of its start and the window's, to the earlier of its end and the window's), less the
    buckets (of `step` seconds; `hourly`, the hourly table, says which) the Kubernetes-side
    join gave it its devices in, and the `Reason` no series could be joined to it (see
    `Reason`); `C.SPANS` says which buckets those hours lie in (every bucket it ran in, in
    any part, less those the join gave it the devices of the row in). A pod the join gave all
    its time has no row.

    `hami`: (namespace, pod) -> the shares HAMi granted it of GPUs without DCGM series
    (`hami.Tenancy.unmonitored`), which such a pod holds (kind `shared`, reason `no_exporter`
    or `no_pod_label`), not its `nvidia.com/gpu` over the node's split count, whether or not a
    series names it for its other GPUs."""
    import pandas as pd

    # A HAMi pod a series names may hold shares of GPUs without series too.
    named = _named(holdings) - set(hami or {})
    cand = _candidates(pods, named) if not pods.empty else pods
    if cand.empty:
        empty: pd.DataFrame = pd.DataFrame(columns=UNATTRIBUTED_COLUMNS)
        return empty
    cand = cand.reset_index(drop=True)
    ran = bucketjoin.runs(cand, window)
    ran_h = ran.hours()
    joined, joined_at = _joined_hours(holdings, hourly, cand, ran, step)
    grid = (window[0], step, max(1, round((window[1] - window[0]) / step)))
    dcgm_nodes = set(holdings[C.NODE].tolist())
    products = dict(zip(nodes[C.NODE].tolist(), nodes[C.PRODUCT].tolist(), strict=True))
    unprofiled = _unprofiled_mig_nodes(holdings)
    out: list[dict[str, Any]] = []
    for i, row in enumerate(cand.to_dict("records")):
        node = str(row[C.NODE])
        hours = float(ran_h[i])
        model = products.get(node, "") or "unknown"
        reps = replicas.get(node, sharing.NONE).replicas
        whole, migs, shared = _gpus_of(row, model, float(reps))
        # HAMi's vGPUs are `nvidia.com/gpu` of a node advertising each GPU split count times:
        # the pod holds its shares of the GPUs (`gpuaudit.inventory.hami`).
        granted = (hami or {}).get((str(row[C.NAMESPACE]), str(row[C.POD])), 0.0)
        if granted > 0:
            whole, shared = 0.0, granted
        left = _unjoined(row, model, hours, (whole, migs), joined.get(i, {}))
        spans = _row_spans(row, model, (ran.begin[i], ran.end[i]), joined_at.get(i, {}), grid)
        parts: list[tuple[float, Reason, str]] = []
        if node not in dcgm_nodes:
            kinds = zip((whole, migs, shared), KINDS, strict=True)
            parts += [(g, Reason.NO_EXPORTER, k) for g, k in kinds]
        else:
            parts.append((whole, Reason.NO_POD_LABEL, "whole"))
            why = Reason.NO_POD_LABEL if granted > 0 else Reason.SHARED_WITHOUT_VIRTUAL_GPUS
            parts.append((shared, why, "shared"))
            mig_why = Reason.PROFILING_ABSENT if node in unprofiled else Reason.NO_POD_LABEL
            parts.append((migs, mig_why, "mig"))
        for gpus, reason, kind in parts:
            if gpus > 0 and left[kind] > 0:
                out.append(
                    {
                        C.NAMESPACE: row[C.NAMESPACE],
                        C.POD: row[C.POD],
                        C.NODE: node,
                        C.MODEL: model,
                        "gpus": gpus,
                        C.HOURS: left[kind],
                        C.GPU_HOURS: gpus * left[kind],
                        "reason": reason.value,
                        "kind": kind,
                        C.SPANS: spans[kind],
                    }
                )
    table: pd.DataFrame = pd.DataFrame(out, columns=UNATTRIBUTED_COLUMNS)
    return table


def _joined_hours(
    holdings: pd.DataFrame,
    hourly: pd.DataFrame | None,
    cand: pd.DataFrame,
    ran: bucketjoin.Runs,
    step: float,
) -> tuple[dict[int, dict[str, float]], dict[int, dict[str, set[float]]]]:
    """Candidate position -> device kind -> hours it ran in the buckets the Kubernetes-side
    join gave it devices of that kind in, and the ends of those buckets."""
    import pandas as pd

    if hourly is None or holdings.empty or hourly.empty:
        return {}, {}
    joined = holdings[C.ATTRIBUTION].to_numpy(dtype=object) == Method.KUBERNETES_JOIN.value
    if not joined.any():
        return {}, {}
    h = holdings[joined]
    at = {k: i for i, k in enumerate(zip(cand[C.NAMESPACE], cand[C.POD], strict=True))}
    pod_of = np.array([at.get(k, -1) for k in zip(h[C.NAMESPACE], h[C.POD], strict=True)])
    kind_of = bucketjoin.kinds(h)
    hid = hourly[C.HOLDING].to_numpy()
    ids = holdings[C.HOLDING].to_numpy()
    if np.array_equal(ids, np.arange(len(ids))):  # holding ids are positions: no look-up
        rows = np.flatnonzero(joined[hid])
        pos = np.cumsum(joined) - 1
        at_row = pos[hid[rows]]
    else:
        found = pd.Index(h[C.HOLDING].to_numpy()).get_indexer(hid)
        rows = np.flatnonzero(found >= 0)
        at_row = found[rows]
    cells = pd.DataFrame(
        {
            "pod": pod_of[at_row],
            "kind": kind_of[at_row],
            "ts": hourly[C.TS].to_numpy(dtype=np.float64)[rows],
        }
    ).drop_duplicates()
    cells = cells[cells["pod"] >= 0]
    cells["h"] = ran.overlap_s(cells["pod"].to_numpy(), cells["ts"].to_numpy(), step) / 3600.0
    out: dict[int, dict[str, float]] = {}
    when: dict[int, dict[str, set[float]]] = {}
    for (pod, kind), group in cells.groupby(["pod", "kind"]):
        out.setdefault(int(pod), {})[str(kind)] = float(group["h"].sum())
        when.setdefault(int(pod), {})[str(kind)] = set(group["ts"].tolist())
    return out, when


Span = tuple[int, int, float]
"""`(first, end, part)`: buckets `first` to `end - 1` held `part` of a row's GPUs (`C.SPANS`)."""


def _row_spans(
    row: Mapping[Any, Any],
    model: str,
    ran: tuple[float, float],
    joined: Mapping[str, set[float]],
    grid: tuple[float, float, int],
) -> dict[str, tuple[Span, ...]]:
    """Per kind (`KINDS`), the buckets a pod that ran from `ran[0]` to `ran[1]` held GPUs of
    that kind in that the Kubernetes-side join did not give it (`joined`: the ends of the
    buckets it gave, by device kind), as `Span`s: every bucket it ran in (in any part) and, of
    its MIG slices, the share (of a GPU) of the profiles not joined there over all of them.
    `grid`: the window's start, the bucket length and the number of buckets."""
    start, step, nb = grid
    lo = max(0, math.floor((ran[0] - start) / step + 1e-9))
    hi = min(nb, math.ceil((ran[1] - start) / step - 1e-9))

    def at(kind: str) -> set[int]:
        return {round((t - start) / step) - 1 for t in joined.get(kind, ())}

    whole = [(1.0, at(bucketjoin.WHOLE))]
    mig_parts = [
        (n * mig.slice_fraction(prof, model), at(prof))
        for prof, n in bucketjoin.migs(row[C.MIG_REQUEST])
    ]
    return {
        "whole": _spans(lo, hi, whole),
        "mig": _spans(lo, hi, mig_parts),
        "shared": _spans(lo, hi, [(1.0, set())]),
    }


def _spans(lo: int, hi: int, parts: list[tuple[float, set[int]]]) -> tuple[Span, ...]:
    """Buckets `lo` to `hi - 1` as `Span`s: in each, the weights of `parts` (weight, buckets
    it is left out of) not left out there over all of them; runs of one part are one span,
    buckets of none are left out."""
    total = sum(w for w, _ in parts)
    if hi <= lo or not total > 0:
        return ()
    cuts = {lo, hi}
    for _, out_of in parts:
        cuts |= {b for k in out_of if lo <= k < hi for b in (k, k + 1)}
    edges = sorted(cuts)
    spans: list[Span] = []
    for a, b in zip(edges, edges[1:], strict=False):
        part = sum(w for w, out_of in parts if a not in out_of) / total
        if part <= 0:
            continue
        if spans and spans[-1][1] == a and spans[-1][2] == part:
            spans[-1] = (spans[-1][0], b, part)
        else:
            spans.append((a, b, part))
    return tuple(spans)


def _unjoined(
    row: Mapping[Any, Any],
    model: str,
    hours: float,
    gpus: tuple[float, float],
    joined: Mapping[str, float],
) -> dict[str, float]:
    """Hours of each kind (`KINDS`) a pod that ran `hours` in the window held GPUs the
    Kubernetes-side join did not give it (`joined`: hours it gave, by device kind): for MIG
    slices, the mean over its profiles weighted by their share of a GPU."""
    whole, migs = gpus
    mig_h = sum(
        n * mig.slice_fraction(prof, model) * max(0.0, hours - joined.get(prof, 0.0))
        for prof, n in bucketjoin.migs(row[C.MIG_REQUEST])
    )
    return {
        "whole": max(0.0, hours - joined.get(bucketjoin.WHOLE, 0.0)) if whole > 0 else hours,
        "mig": mig_h / migs if migs > 0 else hours,
        "shared": hours,
    }


def _unprofiled_mig_nodes(holdings: pd.DataFrame) -> set[str]:
    """Nodes with unlabelled MIG instances that have no profiling activity (GPU_UTIL only,
    which reads 0 on MIG, or nothing)."""
    h = holdings[(holdings[C.MIG_ID] != "") & ~holdings[C.HELD]]
    blind = h[h[C.ACT_MEAN].isna()]
    return set(blind[C.NODE].tolist())


def share(
    holdings: pd.DataFrame,
    hourly: Mapping[str, Any],
    per_node: Mapping[str, sharing.Sharing],
    step: int,
) -> None:
    """Split, in place, the devices shared by time-slicing or MPS among their holders: each
    held holding on a shared device counts its fraction over the device's replicas
    (`Method.SHARED_SPLIT`), with `REPLICAS` set to them. See `gpuaudit.inventory.sharing`."""
    if holdings.empty:
        return
    # A GPU shared through HAMi is split by its pods' own shares (`gpuaudit.inventory.hami`),
    # not into replicas: its holdings are left out here.
    hami = holdings[C.ATTRIBUTION].to_numpy(dtype=object) == Method.HAMI_SHARE.value
    on_hami = holdings[C.SLOT].isin(set(holdings.loc[hami, C.SLOT])).to_numpy(dtype=bool)
    counted = holdings.assign(**{C.HELD: holdings[C.HELD] & ~on_hami}) if hami.any() else holdings
    at_once = sharing.holders_at_once(
        counted, hourly[C.HOLDING], hourly[C.TS], hourly[C.HELD_H], step
    )
    of_node = {k: float(v.replicas) for k, v in per_node.items()}
    reps = np.maximum(
        holdings[C.NODE].map(of_node).fillna(1.0).to_numpy(dtype="float64"),
        holdings[C.SLOT].map(at_once).fillna(1.0).to_numpy(dtype="float64"),
    )
    reps[on_hami] = 1.0
    held = holdings[C.HELD].to_numpy(dtype=bool)
    # A GPU KAI shares is split by its fractions already (`gpuaudit.inventory.fractions`).
    reps[holdings[C.ATTRIBUTION].isin(KAI_METHODS).to_numpy(dtype=bool)] = 1.0
    split = held & (reps > 1)
    holdings[C.REPLICAS] = reps
    if not split.any():
        return
    frac = holdings[C.FRACTION].to_numpy(dtype="float64").copy()
    frac[split] /= reps[split]
    holdings[C.FRACTION] = frac
    holdings[C.GPU_HOURS] = holdings[C.HOURS].to_numpy(dtype="float64") * frac
    method = holdings[C.ATTRIBUTION].to_numpy(dtype=object).copy()
    method[split] = Method.SHARED_SPLIT.value
    holdings[C.ATTRIBUTION] = method
