"""GPU-to-GPU links inside a node (`docs/domain.md`): how well each pair of GPUs is connected.

Three sources, most specific first:

- `nvidia-smi topo -m` output saved per node (`<node>.txt`) or per product (`<product>.txt`,
  named after the node's `nvidia.com/gpu.product` label) in the `--topology` directory;
- a built-in table by GPU product: HGX/DGX SXM boards (H100, H200, A100-SXM, B200, GB200 ...)
  join all GPUs through NVSwitch, so any subset is NVLink-connected; H100/H200 NVL cards are
  bridged in pairs; PCIe-only cards (L4, L40, L40S, A10, A10G, T4, A2, A16) get an assumed
  common layout: GPUs split evenly over two NUMA nodes (`SYS` between them), consecutive pairs
  under one PCIe switch (`PXB`), other pairs in one NUMA node through the host bridges (`NODE`);
- `DCGM_EXP_P2P_STATUS` where the exporter reports it: a pair with status 0 (OK) has NVLink
  P2P, any other status has not, whatever the table says.

Links rank from best to worst: `NV#` (NVLink), `PIX`, `PXB`, `PHB`, `NODE`, `SYS`; a pair known
only to lack NVLink (`PCIe`) ranks with `SYS`. A set of GPUs is as good as its worst pair.

Reading files happens only in `load_dir`, which caches what it read; everything else is pure.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpuaudit.core.errors import ConfigError

PCIE_RANKS = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "PCIe": 5}
"""Rank of each PCIe path code; NVLink (`NV#`) ranks 0."""
_NV_RE = re.compile(r"^NV\d*$")
_GPU_RE = re.compile(r"^GPU(\d+)$")
_COLUMN_RE = re.compile(r"^(GPU|NIC)\d+$")
_TOKEN_SPLIT = re.compile(r"[\s_-]+")

_NVSWITCH_MODELS = {"H100", "H200", "H800", "H20", "A100", "A800", "B100", "B200", "GB200"}
_NVSWITCH_MODELS |= {"B300", "GB300"}
_BRIDGED_MODELS = {"H100", "H200"}
_PCIE_ONLY_MODELS = {"L4", "L40", "L40S", "A10", "A10G", "T4", "A2", "A16", "L20"}


class TopologyError(ValueError):
    """Text that is not `nvidia-smi topo -m` output."""


def link_rank(code: str) -> int | None:
    """0 for NVLink, 1..5 for PCIe paths (PIX best, SYS worst); None for an unknown code."""
    if _NV_RE.match(code):
        return 0
    return PCIE_RANKS.get(code)


@dataclass(frozen=True)
class Topology:
    """The links between the GPUs of one node, by GPU index (the DCGM `gpu` label)."""

    gpus: tuple[int, ...]
    links: Mapping[tuple[int, int], str]
    """(i, j) with i < j -> link code (`NV18`, `PIX`, `SYS` ...)."""
    source: str
    """Where it came from, in words, for evidence."""
    assumed: bool = False
    """Whether it is an assumed layout rather than read or known for the product."""

    def link(self, a: int, b: int) -> str | None:
        return self.links.get((min(a, b), max(a, b)))

    def worst(self, gpus: Iterable[int]) -> tuple[int, str] | None:
        """The rank and code of the worst link among `gpus`; None when a pair is unknown.
        A single GPU has no links: rank 0."""
        worst_rank, worst_code = -1, ""
        for a, b in itertools.combinations(sorted(set(gpus)), 2):
            code = self.link(a, b)
            r = link_rank(code) if code else None
            if code is None or r is None:
                return None
            if r > worst_rank:
                worst_rank, worst_code = r, code
        return max(worst_rank, 0), worst_code

    def best(self, candidates: Iterable[int], size: int) -> tuple[tuple[int, ...], int, str] | None:
        """The best-connected set of `size` GPUs among `candidates` (lowest worst-link rank,
        then lowest indices), with its rank and worst code; None when none can be judged."""
        pool = sorted(set(candidates) & set(self.gpus))
        best: tuple[tuple[int, ...], int, str] | None = None
        for combo in itertools.combinations(pool, size):
            w = self.worst(combo)
            if w is not None and (best is None or w[0] < best[1]):
                best = (combo, w[0], w[1])
                if w[0] == 0:
                    break
        return best

    # Cached: a check asks every node's topology once per job it places.
    @functools.cached_property
    def all_nvlink(self) -> bool:
        """Every pair is joined by NVLink (an NVSwitch board, or a two-GPU bridged card)."""
        return bool(self.links) and all(link_rank(c) == 0 for c in self.links.values())

    @functools.cached_property
    def any_nvlink(self) -> bool:
        return any(link_rank(c) == 0 for c in self.links.values())


def parse_topo(text: str, source: str = "nvidia-smi topo -m") -> Topology:
    """Parse `nvidia-smi topo -m` output (tab- or space-separated; NIC rows and columns, the
    affinity columns and the legend are ignored)."""
    lines = text.splitlines()
    header: list[str] | None = None
    links: dict[tuple[int, int], str] = {}
    gpus: list[int] = []
    for raw in lines:
        tokens = raw.split()
        if not tokens:
            continue
        if header is None:
            cols = list(itertools.takewhile(lambda t: _COLUMN_RE.match(t) is not None, tokens))
            if cols and cols[0] == "GPU0":
                header = cols
            continue
        m = _GPU_RE.match(tokens[0])
        if not m:
            if tokens[0].startswith("Legend"):
                break
            continue
        i = int(m.group(1))
        cells = tokens[1 : 1 + len(header)]
        if len(cells) < len(header):
            raise TopologyError(f"{source}: row GPU{i} has {len(cells)} cells for {len(header)}")
        gpus.append(i)
        for col, cell in zip(header, cells, strict=True):
            cm = _GPU_RE.match(col)
            if not cm:
                continue
            j = int(cm.group(1))
            if i == j:
                if cell != "X":
                    raise TopologyError(f"{source}: GPU{i} to itself is {cell!r}, not X")
                continue
            if link_rank(cell) is None:
                raise TopologyError(f"{source}: unknown link {cell!r} between GPU{i} and GPU{j}")
            key = (min(i, j), max(i, j))
            prev = links.get(key)
            rank = link_rank(cell) or 0
            if prev is None or rank > (link_rank(prev) or 0):
                links[key] = cell
    if header is None:
        raise TopologyError(f"{source}: no header line starting with GPU0")
    if not gpus:
        raise TopologyError(f"{source}: no GPU rows")
    return Topology(tuple(sorted(gpus)), links, source)


def _tokens(product: str) -> set[str]:
    return {t for t in _TOKEN_SPLIT.split(product.upper()) if t}


def _pcie_layout(count: int, pair_code: str) -> dict[tuple[int, int], str]:
    half = (count + 1) // 2
    links: dict[tuple[int, int], str] = {}
    for a, b in itertools.combinations(range(count), 2):
        if a // half != b // half:
            links[(a, b)] = "SYS"
        elif a // 2 == b // 2:
            links[(a, b)] = pair_code
        else:
            links[(a, b)] = "NODE"
    return links


@functools.lru_cache(maxsize=1024)
def builtin(product: str, count: int) -> Topology | None:
    """The built-in topology of a product (a `nvidia.com/gpu.product` label or a DCGM
    `modelName`) with `count` GPUs; None when the product is not in the table. Cached: a
    cluster has thousands of nodes and a few kinds of board, and a topology is immutable."""
    if count < 1:
        return None
    tok = _tokens(product)
    gpus = tuple(range(count))
    if "NVL" in tok and tok & _BRIDGED_MODELS:
        return Topology(
            gpus,
            _pcie_layout(count, "NV12"),
            f"built-in table: {product} cards bridged by NVLink in pairs",
            assumed=True,
        )
    if tok & {"PCIE", "NVL"}:
        return None  # PCIe cards whose bridges we cannot know
    if tok & _NVSWITCH_MODELS:
        links = dict.fromkeys(itertools.combinations(range(count), 2), "NV18")
        return Topology(gpus, links, f"built-in table: {product} all-to-all NVSwitch")
    if tok & _PCIE_ONLY_MODELS:
        return Topology(
            gpus,
            _pcie_layout(count, "PXB"),
            f"built-in table: {product} PCIe only (assumed layout: pairs under one switch, "
            "halves on two NUMA nodes)",
            assumed=True,
        )
    return None


def with_p2p(topo: Topology | None, pairs: Mapping[tuple[int, int], float]) -> Topology | None:
    """Apply DCGM_EXP_P2P_STATUS: status 0 is NVLink P2P, anything else is not."""
    if not pairs:
        return topo
    links = dict(topo.links) if topo else {}
    for (a, b), status in pairs.items():
        key = (min(a, b), max(a, b))
        code = links.get(key)
        nv = code is not None and link_rank(code) == 0
        if status == 0 and not nv:
            links[key] = "NV"
        elif status != 0 and (code is None or nv):
            links[key] = "PCIe"
    gpus = set(topo.gpus) if topo else set()
    gpus |= {g for pair in pairs for g in pair}
    source = f"{topo.source} + DCGM_EXP_P2P_STATUS" if topo else "DCGM_EXP_P2P_STATUS"
    return Topology(tuple(sorted(gpus)), links, source, topo.assumed if topo else False)


@dataclass(frozen=True)
class TopologyFiles:
    """Topologies read from a directory, by file stem (a node name or a product label)."""

    directory: str
    by_name: Mapping[str, Topology] = field(default_factory=dict)

    def for_node(self, node: str, product: str) -> Topology | None:
        return self.by_name.get(node) or (self.by_name.get(product) if product else None)


_CACHE: dict[tuple[str, tuple[tuple[str, int, int], ...]], TopologyFiles] = {}


def load_dir(directory: Path) -> TopologyFiles:
    """Read every `*.txt` in `directory` as `nvidia-smi topo -m` output (cached per directory
    and file state). Raises `ConfigError` with one line when it cannot."""
    try:
        files = sorted(p for p in directory.iterdir() if p.suffix == ".txt" and p.is_file())
        state = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    except OSError as exc:
        raise ConfigError(
            f"--topology {directory}: cannot read the directory ({exc.strerror or exc})"
        ) from None
    key = (str(directory.resolve()), state)
    if key in _CACHE:
        return _CACHE[key]
    out = TopologyFiles(str(directory), {p.stem: _read_one(p) for p in files})
    _CACHE[key] = out
    return out


def _read_one(path: Path) -> Topology:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ConfigError(f"--topology: cannot read {path} ({exc.strerror or exc})") from None
    try:
        return parse_topo(text, f"nvidia-smi topo -m file {path.name}")
    except TopologyError as exc:
        raise ConfigError(
            f"--topology: {exc}; save `nvidia-smi topo -m` output as <node>.txt "
            "or <gpu.product label>.txt"
        ) from None


def for_node(
    node: str,
    product: str,
    count: int,
    files: TopologyFiles | None = None,
    p2p: Mapping[tuple[int, int], float] | None = None,
) -> Topology | None:
    """The best-known topology of one node: its file, its product's file, else the built-in
    table, with DCGM P2P status applied on top."""
    topo = files.for_node(node, product) if files else None
    if topo is None:
        topo = builtin(product, count)
    return with_p2p(topo, p2p or {})
