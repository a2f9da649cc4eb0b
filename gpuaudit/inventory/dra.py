"""GPUs held through DRA ResourceClaims (`resource.k8s.io`), joined to their pods and devices.

A pod that gets its GPUs through Dynamic Resource Allocation requests no `nvidia.com/gpu`, and
dcgm-exporter labels the device with the pod only when its own DRA mapping is on
(`KUBERNETES_ENABLE_DRA`; `docs/domain.md`, DRA). The Kubernetes side says who holds what:

- a pod names its claims in `spec.resourceClaims[]` (`resourceClaimName`, or a
  `resourceClaimTemplateName` whose generated claim `status.resourceClaimStatuses[]` names);
- a ResourceClaim lists the devices allocated to it in `status.allocation.devices.results[]`
  (`driver`, `pool`, `device`) and its consumers in `status.reservedFor[]` (`resource: pods`,
  `name`, `uid`);
- the driver's ResourceSlices (`spec.driver`, `spec.pool.name`, `spec.nodeName`) describe each
  device by name with its attributes: NVIDIA's DRA driver (`gpu.nvidia.com`) publishes `type`
  (`gpu` or `mig`), `uuid`, and for MIG devices `parentUUID` and `profile`. v1 and v1beta2 put
  `attributes` on the device, v1beta1 under `basic`; each value is typed (`{"string": ...}`).

A claim's device is held by the pods `reservedFor` names (only pods in use are there); a claim
reserved for something other than pods is held by the pods that name it. A whole GPU is found
in DCGM by its UUID, a MIG device by its parent's UUID and its profile (DCGM series carry the
parent's UUID and the GPU instance's profile, not the MIG device's UUID): where a parent has
several instances of one profile held by different pods, which is which cannot be told, and
those instances are not joined (a note says so).

Only what the API said at the snapshot's end is known: a claim released during the window is
gone, so the pods that held devices earlier are not found here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuaudit.inventory.kube import MAX_ITEMS, Objects
from gpuaudit.inventory.prom import Identity

DRIVER = "gpu.nvidia.com"
"""NVIDIA's DRA driver: the only driver whose devices are GPUs here (dcgm-exporter maps the
same one only)."""
_NAME_CHARS = 512
"""Characters of a name kept (Kubernetes names are at most 253)."""


@dataclass(frozen=True)
class Device:
    """One device of a ResourceSlice."""

    node: str
    kind: str
    """The `type` attribute: `gpu`, `mig` (NVIDIA's driver), or empty when not given."""
    uuid: str
    parent_uuid: str
    profile: str


@dataclass(frozen=True)
class Claimed:
    """One device a pod holds through a ResourceClaim."""

    namespace: str
    pod: str
    claim: str
    """The claim's name (in the pod's namespace)."""
    pool: str
    device: str
    """The device's name in its pool (`gpu-0`, `gpu-0-mig-9-4-1`)."""
    consumers: int
    """How many pods the claim is reserved for (more than one: a shared device)."""
    found: Device | None
    """The device as the ResourceSlices describe it; None where no slice names it."""

    @property
    def ref(self) -> str:
        """`namespace/claim`, for messages."""
        return f"{self.namespace}/{self.claim}"


def _s(raw: Any) -> str:
    return raw[:_NAME_CHARS] if isinstance(raw, str) else ""


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    val = obj.get(key) if isinstance(obj, Mapping) else None
    return val if isinstance(val, Mapping) else {}


def _list(obj: Any, key: str) -> Sequence[Any]:
    val = obj.get(key) if isinstance(obj, Mapping) else None
    return val[:MAX_ITEMS] if isinstance(val, list) else []


def _attribute(attrs: Mapping[str, Any], name: str) -> str:
    """A string attribute, by its name or qualified with the driver's domain."""
    for key in (name, f"{DRIVER}/{name}"):
        val = attrs.get(key)
        if isinstance(val, Mapping) and isinstance(val.get("string"), str):
            return _s(val["string"])
    return ""


def devices(objects: Objects) -> dict[tuple[str, str], Device]:
    """Every device of NVIDIA's driver in the ResourceSlices, by (pool, device name)."""
    out: dict[tuple[str, str], Device] = {}
    for sl in objects.get("resourceslices", ()):
        spec = _map(sl, "spec")
        if spec.get("driver") != DRIVER:
            continue
        pool = _s(_map(spec, "pool").get("name"))
        node = _s(spec.get("nodeName"))
        for dev in _list(spec, "devices"):
            name = _s(dev.get("name")) if isinstance(dev, Mapping) else ""
            if not pool or not name:
                continue
            attrs = _map(dev, "attributes") or _map(_map(dev, "basic"), "attributes")
            out[(pool, name)] = Device(
                node=node,
                kind=_attribute(attrs, "type"),
                uuid=_attribute(attrs, "uuid"),
                parent_uuid=_attribute(attrs, "parentUUID"),
                profile=_attribute(attrs, "profile"),
            )
    return out


def _pod_claims(pod: Mapping[str, Any]) -> set[str]:
    """The claims a pod names: by name in its spec, or generated from a template (its
    status)."""
    names = {_s(r.get("resourceClaimName")) for r in _list(_map(pod, "spec"), "resourceClaims")}
    names |= {
        _s(r.get("resourceClaimName"))
        for r in _list(_map(pod, "status"), "resourceClaimStatuses")
        if isinstance(r, Mapping)
    }
    names.discard("")
    return names


def _consumers(
    claim: Mapping[str, Any],
    namespace: str,
    pods: Mapping[tuple[str, str], Mapping[str, Any]],
    naming: Sequence[str],
) -> list[str]:
    """The pods a claim is reserved for (that exist, with the uid `reservedFor` gives), or the
    pods naming it where it is reserved for something else."""
    out: list[str] = []
    other = False
    for r in _list(_map(claim, "status"), "reservedFor"):
        if not isinstance(r, Mapping):
            continue
        if r.get("resource") != "pods" or r.get("apiGroup") not in (None, ""):
            other = True
            continue
        name = _s(r.get("name"))
        pod = pods.get((namespace, name))
        uid = _s(r.get("uid"))
        if pod is not None and (not uid or uid == _s(_map(pod, "metadata").get("uid"))):
            out.append(name)
    if other:
        out.extend(n for n in naming if n not in out)
    return out


def claimed(objects: Objects) -> list[Claimed]:
    """Every device of NVIDIA's driver that a pod holds through a ResourceClaim."""
    pods = {
        (_s(_map(p, "metadata").get("namespace")), _s(_map(p, "metadata").get("name"))): p
        for p in objects.get("pods", ())
    }
    naming: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (ns, name), pod in pods.items():
        for named in sorted(_pod_claims(pod)):
            naming[(ns, named)].append(name)
    slices = devices(objects)
    out: list[Claimed] = []
    for claim in objects.get("resourceclaims", ()):
        meta = _map(claim, "metadata")
        ns, name = _s(meta.get("namespace")), _s(meta.get("name"))
        results = _list(_map(_map(_map(claim, "status"), "allocation"), "devices"), "results")
        gpus = [r for r in results if isinstance(r, Mapping) and r.get("driver") == DRIVER]
        if not gpus:
            continue
        holders = _consumers(claim, ns, pods, naming.get((ns, name), []))
        for r in gpus:
            pool, dev = _s(r.get("pool")), _s(r.get("device"))
            out.extend(
                Claimed(ns, pod, name, pool, dev, len(holders), slices.get((pool, dev)))
                for pod in holders
            )
    return out


@dataclass(frozen=True)
class PodDevices:
    """What a pod holds through claims, as the Kubernetes-side views count GPUs."""

    gpus: float = 0.0
    """Whole GPUs (a device of a claim several pods share counts its share)."""
    mig: Mapping[str, float] | None = None
    """MIG devices by profile."""


def per_pod(claims: Sequence[Claimed], limit: int) -> dict[tuple[str, str], PodDevices]:
    """Devices held per pod: MIG devices by profile, anything else (a whole GPU, or a device
    no ResourceSlice describes) as a whole GPU; at most `limit` per pod."""
    gpus: dict[tuple[str, str], float] = defaultdict(float)
    migs: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for c in claims:
        key = (c.namespace, c.pod)
        share = 1.0 / max(1, c.consumers)
        if c.found is not None and c.found.kind == "mig" and c.found.profile:
            per = migs[key]
            per[c.found.profile] = min(float(limit), per.get(c.found.profile, 0.0) + share)
        else:
            gpus[key] = min(float(limit), gpus[key] + share)
    return {key: PodDevices(gpus.get(key, 0.0), migs.get(key)) for key in sorted({*gpus, *migs})}


def _whole(c: Claimed) -> bool:
    return c.found is not None and c.found.kind in ("gpu", "") and bool(c.found.uuid)


def match(
    idents: Sequence[Identity], claims: Sequence[Claimed], slices_unread: str = ""
) -> tuple[dict[int, Claimed], list[str]]:
    """The DCGM keys (numbers into `idents`) without a pod label that a claimed device
    describes, with the device; and why claimed devices were not joined, a sentence each.

    A series that carries dcgm-exporter's own claim labels (`dra_claim_name`,
    `dra_claim_namespace`) is joined by the claim; any other by the device's UUID (a whole
    GPU) or its parent's UUID and profile (a MIG device). `slices_unread` says why the
    ResourceSlices were not read, where they were not."""
    single = [c for c in claims if c.consumers == 1]
    by_claim = {c.ref: c for c in single}
    whole = {c.found.uuid: c for c in single if c.found is not None and _whole(c)}
    mig_claims: dict[tuple[str, str], list[Claimed]] = defaultdict(list)
    for c in single:
        if c.found is not None and c.found.kind == "mig":
            mig_claims[(c.found.parent_uuid, c.found.profile)].append(c)
    mig_keys: dict[tuple[str, str], list[int]] = defaultdict(list)
    out: dict[int, Claimed] = {}
    for k, ident in enumerate(idents):
        if ident.held:
            continue
        if ident.claim and ident.claim in by_claim:
            out[k] = by_claim[ident.claim]
        elif ident.mig_id:
            mig_keys[(ident.uuid, ident.mig_profile)].append(k)
        elif ident.uuid in whole:
            out[k] = whole[ident.uuid]
    notes: list[str] = []
    for where, group in sorted(mig_claims.items()):
        keys = [k for k in mig_keys.get(where, []) if k not in out]
        pods = {(c.namespace, c.pod) for c in group}
        if keys and len(pods) == 1 and len(keys) == len(group):
            out.update(zip(keys, group, strict=True))
        elif keys:
            notes.append(
                f"{len(group)} MIG {where[1]} devices of GPU {where[0]} are claimed through DRA "
                f"by {len(pods)} pods and DCGM shows {len(keys)} such instances without a pod "
                "label: which pod holds which cannot be told, so none was joined"
            )
    shared = sorted({c.ref for c in claims if c.consumers > 1})
    if shared:
        notes.append(
            f"{len(shared)} DRA ResourceClaims are reserved for several pods at once "
            f"({', '.join(shared[:5])}{' ...' if len(shared) > 5 else ''}): their devices are "
            "shared and were not joined to one pod"
        )
    unknown = sorted({c.ref for c in single if c.found is None})
    if unknown:
        notes.append(
            f"{len(unknown)} DRA ResourceClaims hold {DRIVER} devices that no ResourceSlice "
            f"describes ({', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}): their "
            "GPUs could not be found in DCGM"
            + (f" (the ResourceSlices were not read: {slices_unread})" if slices_unread else "")
        )
    return out, notes
