"""What the report tests share: names a hostile cluster could choose, the demo's audit result,
an earlier report for the trend sections, and an HTML page parsed as a browser's tokenizer
reads it."""

from __future__ import annotations

import copy
import dataclasses
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from gpuaudit import snapshot
from gpuaudit.audit.assemble import AuditResult, run_checks
from gpuaudit.audit.settings import settings_from
from gpuaudit.inventory import build
from gpuaudit.inventory.ownership import Owner
from tests.support.factories import Series, gpu_labels, make_pod
from tests.support.factories import snapshot as make_snapshot
from tests.support.paths import DEMO

HOSTILE = {
    "html": "<script>alert(1)</script><img src=x onerror=alert(2)>",
    "markup": "pod-[bold]x[/bold]-[link](http://evil.example/x)",
    "pipe": "a | pipe | b",
    "md": "*star* _under_ `tick` ~~strike~~ $x^2$ @here #1 www.evil.example",
    "ansi": "evil-\x1b[31mred\x1b[0m",
    "newline": "line1\nline2\rline3",
    "quote": "q\"uo'te&amp;",
    "long": "x" * 5000,
}
HOSTILE_CLUSTER = "<b>[red]cluster[/red]</b>\x1b]0;title\x07"


def write_hostile_snapshot(directory: Path) -> Path:
    """A tiny idle cluster whose namespaces, pods, nodes, labels and cluster name are all
    hostile text; every pod is idle for 8 hours, so each becomes a finding."""
    series = []
    pods = []
    for i, (key, name) in enumerate(HOSTILE.items()):
        ns = f"ns-{key}" if key != "html" else "<script>ns</script>"
        series.append(
            Series(
                gpu_labels(uuid=f"GPU-{i}", gpu=str(i), pod=name, namespace=ns, host="node-a"),
                act=[0.0] * 8,
            )
        )
        pods.append(make_pod(name, namespace=ns, node="node-a", labels={"team": name}))
    snap = make_snapshot(series, hours=8, pods=pods)
    snap = snap.with_manifest(cluster=HOSTILE_CLUSTER)
    path = directory / "hostile.json"
    snapshot.write(snap, path)
    return path


def demo_result(**kw: Any) -> AuditResult:
    """The demo audited in-process, for renderer tests that need a result the CLI cannot make
    (incomplete data, waivers). Keyword arguments go to `run_checks`."""
    inv = build(snapshot.read(DEMO))
    return run_checks(inv, settings_from({}), **kw)


def with_owners(*owners: Owner | None) -> AuditResult:
    """The demo's result with its first listed findings' owners replaced by `owners` (None:
    nothing names one)."""
    result = demo_result()
    swap = {
        id(f): dataclasses.replace(f, owner=o)
        for f, o in zip(result.primaries, owners, strict=False)
    }
    return dataclasses.replace(result, findings=tuple(swap.get(id(f), f) for f in result.findings))


def previous_report(doc: dict[str, Any]) -> dict[str, Any]:
    """An earlier report made from this week's JSON so that every trend status occurs: of the
    findings of 10 GPU-hours or more, the first is dropped (new), the second had three times
    the GPU-hours (improved), the third half (worse), and a hostile finding that is gone now
    (resolved)."""
    prev = copy.deepcopy(doc)
    findings = prev["findings"]
    sized = [f for f in findings if f["impact"]["gpu_hours"] >= 10]
    sized[1]["impact"]["gpu_hours"] *= 3
    sized[2]["impact"]["gpu_hours"] /= 2
    gone = copy.deepcopy(sized[3])
    gone["fingerprint"] = "GPU001|Pod|old|gone"
    gone["resource"].update(namespace="old", name=RESOLVED_NAME)
    findings.remove(sized[0])
    findings.append(gone)
    prev["summary"]["wasted_cost"] += 1000
    prev["generated_at"] = "2026-11-16T06:00:00Z"
    return prev


RESOLVED_NAME = "gone-<i>x</i>-|-`y`"


class Page(HTMLParser):
    """An HTML document as a browser's tokenizer reads it: elements with their attributes, the
    text nodes, and the contents of `<style>` elements."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.texts: list[str] = []
        self.styles: list[str] = []
        self._style = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        self._style = self._style or tag == "style"

    def handle_endtag(self, tag: str) -> None:
        if tag == "style":
            self._style = False

    def handle_data(self, data: str) -> None:
        (self.styles if self._style else self.texts).append(data)

    @property
    def text(self) -> str:
        """The text nodes, joined with spaces."""
        return " ".join(self.texts)

    def tags(self) -> set[str]:
        return {tag for tag, _ in self.elements}
