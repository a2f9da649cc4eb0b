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
reserved for something other than pods is held by the pods that name it. A device counts once:
the pods of every claim it is allocated to share it. A device no ResourceSlice describes is not
counted as a GPU held, and a device allocated to several claims is joined to none of their pods;
a warning names the claims, and the audit is incomplete. A whole GPU is found
in DCGM by its UUID, a MIG device by its parent's UUID and its profile (DCGM series carry the
parent's UUID and the GPU instance's profile, not the MIG device's UUID): where a parent has
several instances of one profile held by different pods, which is which cannot be told, and
those instances are not joined (a note says so).

Only what the API said at the snapshot's end is known: a claim released during the window is
gone, so the pods that held devices earlier are not found here.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from gpuaudit.inventory.kube import MAX_ITEMS, Objects
from gpuaudit.inventory.prom import Identity

DRIVER = "gpu.nvidia.com"
"""NVIDIA's DRA driver: the only driver whose devices are GPUs here (dcgm-exporter maps the
same one only)."""
_NAME_CHARS = 512
T = TypeVar("T")
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
class Claim:
    """One ResourceClaim with devices of NVIDIA's driver allocated to it."""

    namespace: str
    name: str
    pods: tuple[str, ...]
    """The pods that hold it (in its namespace), each once."""
    devices: tuple[tuple[str, str], ...]
    """(pool, device name) of each device allocated to it, each once."""

    @property
    def ref(self) -> str:
        """`namespace/claim`, for messages."""
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Claimed:
    """One device one pod holds alone through one ResourceClaim: what can be joined to its
    DCGM series."""

    namespace: str
    pod: str
    claim: str
    """The claim's name (in the pod's namespace)."""
    pool: str
    device: str
    """The device's name in its pool (`gpu-0`, `gpu-0-mig-9-4-1`)."""
    found: Device | None
    """The device as the ResourceSlices describe it; None where no slice names it."""

    @property
    def ref(self) -> str:
        """`namespace/claim`, for messages."""
        return f"{self.namespace}/{self.claim}"


@dataclass(frozen=True)
class Claims:
    """What the ResourceClaims say of NVIDIA's devices: each claim once (its pods and its
    devices, never every pod with every device), the devices the ResourceSlices describe, and
    the devices allocated to more than one claim."""

    claims: tuple[Claim, ...] = ()
    slices: Mapping[tuple[str, str], Device] = field(default_factory=dict)
    """Devices by (pool, device name)."""
    holders: Mapping[tuple[str, str], int] = field(default_factory=dict)
    """(pool, device name) -> the pods of every claim it is allocated to, together."""
    contested: frozenset[tuple[str, str]] = frozenset()
    """Devices allocated to more than one claim: which pod holds them cannot be told."""

    def joinable(self) -> list[Claimed]:
        """Each device a pod holds alone (one claim, reserved for that pod only, and no other
        claim allocated the device)."""
        return [
            Claimed(c.namespace, c.pods[0], c.name, pool, dev, self.slices.get((pool, dev)))
            for c in self.claims
            if len(c.pods) == 1
            for pool, dev in c.devices
            if (pool, dev) not in self.contested
        ]


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


def _unique(items: Iterable[T]) -> tuple[T, ...]:
    """`items` in order, each once."""
    return tuple(dict.fromkeys(items))


def read(objects: Objects, notes: list[str] | None = None, slices_unread: str = "") -> Claims:
    """The ResourceClaims with devices of NVIDIA's driver, and their pods. Each device that no
    ResourceSlice describes (`slices_unread`: why the ResourceSlices were not read, where they
    were not), and each device allocated to more than one claim, is a sentence in `notes`."""
    pods = {
        (_s(_map(p, "metadata").get("namespace")), _s(_map(p, "metadata").get("name"))): p
        for p in objects.get("pods", ())
    }
    naming: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (ns, name), pod in pods.items():
        for named in sorted(_pod_claims(pod)):
            naming[(ns, named)].append(name)
    out: list[Claim] = []
    for claim in objects.get("resourceclaims", ()):
        meta = _map(claim, "metadata")
        ns, name = _s(meta.get("namespace")), _s(meta.get("name"))
        results = _list(_map(_map(_map(claim, "status"), "allocation"), "devices"), "results")
        alloc = _unique(
            (_s(r.get("pool")), _s(r.get("device")))
            for r in results
            if isinstance(r, Mapping) and r.get("driver") == DRIVER
        )
        if alloc:
            held_by = _unique(_consumers(claim, ns, pods, naming.get((ns, name), [])))
            out.append(Claim(ns, name, held_by, alloc))
    slices = devices(objects)
    holders: Counter[tuple[str, str]] = Counter()
    claims_of: dict[tuple[str, str], list[Claim]] = defaultdict(list)
    for c in out:
        for d in c.devices:
            holders[d] += len(c.pods)
            claims_of[d].append(c)
    contested = frozenset(d for d, cs in claims_of.items() if len(cs) > 1)
    if notes is not None:
        notes.extend(_said(out, slices, claims_of, contested, slices_unread))
    return Claims(tuple(out), slices, dict(holders), contested)


def _said(
    claims: Sequence[Claim],
    slices: Mapping[tuple[str, str], Device],
    claims_of: Mapping[tuple[str, str], list[Claim]],
    contested: frozenset[tuple[str, str]],
    slices_unread: str,
) -> list[str]:
    """Why devices of claims were not counted, or counted once among several claims."""
    out: list[str] = []
    unknown = sorted({c.ref for c in claims if c.pods and any(d not in slices for d in c.devices)})
    if unknown:
        out.append(
            f"{len(unknown)} DRA ResourceClaims hold {DRIVER} devices that no ResourceSlice "
            f"describes ({', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''}): those "
            "devices are not counted as GPUs held, and their GPUs could not be found in DCGM"
            + (f" (the ResourceSlices were not read: {slices_unread})" if slices_unread else "")
        )
    for pool, dev in sorted(contested):
        refs = sorted({c.ref for c in claims_of[(pool, dev)]})
        out.append(
            f"DRA device {dev} of pool {pool} is allocated to {len(refs)} ResourceClaims at "
            f"once ({', '.join(refs[:5])}{' ...' if len(refs) > 5 else ''}): it is counted "
            "once, shared by their pods, and joined to none of them"
        )
    return out


@dataclass(frozen=True)
class PodDevices:
    """What a pod holds through claims, as the Kubernetes-side views count GPUs."""

    gpus: float = 0.0
    """Whole GPUs (a device several pods share counts its share)."""
    mig: Mapping[str, float] | None = None
    """MIG devices by profile."""


def per_pod(claims: Claims, limit: int) -> dict[tuple[str, str], PodDevices]:
    """Devices held per pod: MIG devices by profile, any other device a ResourceSlice
    describes as a whole GPU; at most `limit` per pod. A device counts once: its pods (those of
    every claim it is allocated to) share it. A device no ResourceSlice describes is not
    counted (a note says so, see `read`)."""
    gpus: dict[tuple[str, str], float] = defaultdict(float)
    migs: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for c in claims.claims:
        if not c.pods:
            continue
        # What each of the claim's pods holds, worked out once for the claim.
        whole = 0.0
        sliced: dict[str, float] = defaultdict(float)
        for d in c.devices:
            dev = claims.slices.get(d)
            if dev is None:
                continue
            share = 1.0 / max(1, claims.holders.get(d, len(c.pods)))
            if dev.kind == "mig" and dev.profile:
                sliced[dev.profile] += share
            else:
                whole += share
        for pod in c.pods:
            key = (c.namespace, pod)
            if whole:
                gpus[key] = min(float(limit), gpus[key] + whole)
            if sliced:
                per = migs[key]
                for profile, n in sliced.items():
                    per[profile] = min(float(limit), per.get(profile, 0.0) + n)
    return {key: PodDevices(gpus.get(key, 0.0), migs.get(key)) for key in sorted({*gpus, *migs})}


def _whole(c: Claimed) -> bool:
    return c.found is not None and c.found.kind in ("gpu", "") and bool(c.found.uuid)


def match(idents: Sequence[Identity], claims: Claims) -> tuple[dict[int, Claimed], list[str]]:
    """The DCGM keys (numbers into `idents`) without a pod label that a claimed device
    describes, with the device; and why claimed devices were not joined, a sentence each
    (`read` says why devices no ResourceSlice describes, or allocated to several claims, were
    not).

    A series that carries dcgm-exporter's own claim labels (`dra_claim_name`,
    `dra_claim_namespace`) is joined by the claim; any other by the device's UUID (a whole
    GPU) or its parent's UUID and profile (a MIG device). Only a device one pod holds alone is
    joined (`Claims.joinable`)."""
    single = claims.joinable()
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
    shared = sorted({c.ref for c in claims.claims if len(c.pods) > 1})
    if shared:
        notes.append(
            f"{len(shared)} DRA ResourceClaims are reserved for several pods at once "
            f"({', '.join(shared[:5])}{' ...' if len(shared) > 5 else ''}): their devices are "
            "shared and were not joined to one pod"
        )
    return out, notes
