"""The week in charts, as inline SVG for the HTML report.

matplotlib draws them (imported here, lazily, so `gpuaudit --help` stays fast) with the Agg
backend and text kept as SVG `<text>` (`svg.fonttype: none`), so the SVG references no font file
and the browser draws the labels with a local font. The output is deterministic: a fixed hash
salt and no date in the metadata. Names from the cluster reach matplotlib only as tick labels,
made visible-safe with `terminal()` and with mathtext off, and matplotlib escapes the text it
writes; the SVG is then cut down to one `<svg>` element whose ids carry a per-chart prefix so two
charts can share one HTML page.
"""

from __future__ import annotations

import io
import math
import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, cast

from gpuaudit.audit.breakdown import Charts
from gpuaudit.audit.capacity import CapacityPlan
from gpuaudit.report.text import terminal

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

ALLOCATED_COLOUR = "#3b82f6"
CAPACITY_COLOUR = "#6b7280"
ACTIVITY_COLOUR = "#ea580c"
TEXT_COLOUR = "#374151"
GRID_COLOUR = "#e5e7eb"

_RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "gpuaudit",
    "text.parse_math": False,
    "text.usetex": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9.0,
    "axes.edgecolor": GRID_COLOUR,
    "axes.labelcolor": TEXT_COLOUR,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "xtick.color": TEXT_COLOUR,
    "ytick.color": TEXT_COLOUR,
    "axes.grid": False,
}

_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
_ROOT_SIZE = re.compile(r'(<svg\b[^>]*?)\s(?:width|height)="[^"]*"')


def _midpoints(hours: tuple[float, ...]) -> list[float]:
    # Bucket end times; draw each value at the middle of its hour.
    step = _step(hours)
    return [t - step / 2 for t in hours]


def _step(hours: tuple[float, ...]) -> float:
    return hours[1] - hours[0] if len(hours) > 1 else 3600.0


def _svg(fig: Figure, prefix: str, label: str) -> str:
    """Serialise a figure to one self-contained `<svg>` element."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    text = _REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", text)
    # Scale with the page: keep the viewBox, drop the fixed size of the root element.
    while _ROOT_SIZE.match(text):
        text = _ROOT_SIZE.sub(r"\1", text, count=1)
    safe_label = label.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
    return text.replace(
        "<svg ", f'<svg class="chart" role="img" aria-label="{safe_label}" ', 1
    ).strip()


def _day_ticks(ax: Axes, start: float, end: float) -> None:
    """Unix-second x axis in UTC: a labelled tick at each midnight over a week, or every few
    hours over a day or two, with minor ticks between."""
    span = end - start
    if span > 2 * 86400:
        major_s, minor_s, fmt = 86400, 6 * 3600, "%a %d %b"
    elif span > 12 * 3600:
        major_s, minor_s, fmt = 6 * 3600, 3600, "%a %H:%M"
    else:
        major_s, minor_s, fmt = 2 * 3600, 3600, "%a %H:%M"
    first = int(start // major_s * major_s)
    major = [float(t) for t in range(first, int(end) + 1, major_s) if start <= t <= end]
    minor = [float(t) for t in range(first, int(end) + 1, minor_s) if start <= t <= end]
    labels = [datetime.fromtimestamp(t, timezone.utc).strftime(fmt) for t in major]
    ax.set_xticks(major, labels)
    ax.set_xticks([t for t in minor if t not in major], minor=True)
    ax.set_xlim(start, end)


def fleet_chart(charts: Charts, gpus_total: int) -> str:
    """Allocated GPUs (area) against the fleet size, and the mean engine activity of the
    allocated GPUs (line, right axis), per hour. Empty when there is nothing to draw."""
    if not charts.hours or not any(a > 0 for a in charts.allocated):
        return ""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context(cast(Any, _RC)):
        fig = Figure(figsize=(12.5, 3.4))
        ax = fig.add_subplot()
        x = _midpoints(charts.hours)
        alloc = list(charts.allocated)
        # Allocation holds for a whole bucket: draw it as steps over each bucket's span.
        edges = [t - _step(charts.hours) for t in charts.hours] + [charts.hours[-1]]
        held = [*alloc, alloc[-1]]
        ax.fill_between(edges, held, step="post", color=ALLOCATED_COLOUR, alpha=0.18, linewidth=0)
        ax.plot(
            edges,
            held,
            drawstyle="steps-post",
            color=ALLOCATED_COLOUR,
            linewidth=1.4,
            label="GPUs allocated",
        )
        top = max(max(alloc), float(gpus_total))
        if gpus_total > 0:
            ax.axhline(
                gpus_total,
                color=CAPACITY_COLOUR,
                linewidth=1,
                linestyle=(0, (4, 3)),
                label=f"GPUs in the fleet ({gpus_total:,})",
            )
        ax.set_ylim(0, top * 1.08 if top > 0 else 1)
        ax.set_ylabel("GPUs allocated")
        ax.grid(axis="y", color=GRID_COLOUR, linewidth=0.8)
        ax.set_axisbelow(True)
        _day_ticks(ax, charts.hours[0] - _step(charts.hours), charts.hours[-1])
        ax2 = ax.twinx()
        act = [math.nan if a is None else a * 100.0 for a in charts.activity]
        ax2.plot(x, act, color=ACTIVITY_COLOUR, linewidth=1.4, label="Mean engine activity")
        ax2.set_ylim(0, 105)
        ax2.set_ylabel("Engine activity (%)", color=ACTIVITY_COLOUR)
        ax2.tick_params(axis="y", colors=ACTIVITY_COLOUR)
        ax2.spines["right"].set_visible(True)
        ax2.spines["right"].set_color(GRID_COLOUR)
        ax2.spines["top"].set_visible(False)
        lines = ax.get_legend_handles_labels()
        lines2 = ax2.get_legend_handles_labels()
        ax.legend(
            lines[0] + lines2[0],
            lines[1] + lines2[1],
            loc="upper center",
            bbox_to_anchor=(0.5, -0.13),
            ncol=3,
            frameon=False,
        )
        return _svg(fig, "fleet", "Fleet GPUs allocated and mean engine activity per hour")


def heatmap_chart(charts: Charts) -> str:
    """Mean engine activity per namespace (rows, busiest first) and hour: red is idle, green
    busy, grey where the namespace held no GPU. Empty when there is nothing to draw."""
    rows = charts.heatmap_rows
    if not rows or not charts.hours:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    grid = np.array(
        [[math.nan if v is None else v * 100.0 for v in row] for row in charts.heatmap],
        dtype=float,
    )
    with matplotlib.rc_context(cast(Any, _RC)):
        fig = Figure(figsize=(12.5, 0.9 + 0.28 * len(rows)))
        ax = fig.add_subplot()
        cmap = colormaps["RdYlGn"].with_extremes(bad="#eef0f3")
        start, end = charts.hours[0] - _step(charts.hours), charts.hours[-1]
        image = ax.imshow(
            np.ma.masked_invalid(grid),
            aspect="auto",
            cmap=cmap,
            vmin=0,
            vmax=100,
            interpolation="nearest",
            extent=(start, end, len(rows) - 0.5, -0.5),
        )
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([terminal(r, 32) for r in rows])
        ax.tick_params(axis="y", length=0)
        for side in ("left", "bottom"):
            ax.spines[side].set_visible(False)
        _day_ticks(ax, start, end)
        bar = fig.colorbar(image, ax=ax, pad=0.01, fraction=0.025, aspect=12)
        bar.set_label("Engine activity (%)")
        bar.outline.set_visible(False)
        return _svg(fig, "heat", "Engine activity per namespace and hour")


BUSY_COLOUR = "#16a34a"
NEEDED_COLOUR = "#9333ea"
MAX_CAPACITY_PANELS = 6


def capacity_chart(plan: CapacityPlan) -> str:
    """Per GPU product (one panel each, at most `MAX_CAPACITY_PANELS`): GPUs held and busy per
    hour, against the product's GPUs (dashed) and the GPUs of the fewest nodes the peak hour
    needed (dotted). Empty when there is nothing to draw."""
    panels = [
        (product, p)
        for product, p in plan.by_product.items()
        if p.hour_ends and any(v for v in p.held_by_hour if v)
    ][:MAX_CAPACITY_PANELS]
    if not panels:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context(cast(Any, _RC)):
        fig = Figure(figsize=(12.5, 2.3 * len(panels) + 0.6))
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)
        for ax, (product, p) in zip((row[0] for row in axes), panels, strict=True):
            hours = p.hour_ends
            edges = [t - _step(hours) for t in hours] + [hours[-1]]
            held = [math.nan if v is None else v for v in p.held_by_hour]
            busy = [math.nan if v is None else v for v in p.busy_by_hour]
            ax.plot(
                edges,
                [*held, held[-1]],
                drawstyle="steps-post",
                color=ALLOCATED_COLOUR,
                linewidth=1.3,
                label="GPUs held",
            )
            ax.plot(
                edges,
                [*busy, busy[-1]],
                drawstyle="steps-post",
                color=BUSY_COLOUR,
                linewidth=1.1,
                label="GPUs busy",
            )
            ax.axhline(
                p.gpus,
                color=CAPACITY_COLOUR,
                linewidth=1,
                linestyle=(0, (4, 3)),
                label=f"GPUs of its {p.nodes:,} nodes",
            )
            ax.axhline(
                p.gpus_of_nodes_used,
                color=NEEDED_COLOUR,
                linewidth=1,
                linestyle=(0, (1, 2)),
                label=f"GPUs of the {p.min_nodes_at_peak:,} nodes the peak needed",
            )
            top = max([p.gpus, *(v for v in held if v == v)], default=1.0)
            ax.set_ylim(0, top * 1.1 if top > 0 else 1)
            ax.set_ylabel("GPUs")
            ax.set_title(terminal(plan.short_names.get(product, product), 60), loc="left")
            ax.grid(axis="y", color=GRID_COLOUR, linewidth=0.8)
            ax.set_axisbelow(True)
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, fontsize=8)
            _day_ticks(ax, hours[0] - _step(hours), hours[-1])
        return _svg(fig, "capacity", "GPUs held and busy per hour, by GPU product")


CAUSE_COLOURS = {
    "productive": "#16a34a",
    "idle": "#9ca3af",
    "stalled": "#dc2626",
    "throttled": "#f59e0b",
    "starting": "#3b82f6",
    "restarting": "#9333ea",
    "not_measured": "#e5e7eb",
}
"""A colour per cause of the ledger by cause; distinct in grey print by lightness too."""
CAUSE_HATCHES = {"not_measured": "//", "idle": "..", "stalled": "xx"}
"""Hatches, so that a black-and-white print still tells the causes apart."""


def cause_chart(parts: list[tuple[str, str, float]], allocated: float) -> str:
    """The allocated GPU-hours as one horizontal bar split by cause ((cause, words, GPU-hours)
    in ledger order), each part labelled in the legend with its GPU-hours. Empty when there
    is nothing to draw."""
    drawn = [(c, w, v) for c, w, v in parts if v > 0]
    if not drawn or allocated <= 0:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    with matplotlib.rc_context(cast(Any, _RC)):
        fig = Figure(figsize=(12.5, 1.6))
        ax = fig.subplots()
        left = 0.0
        for cause, words, value in drawn:
            ax.barh(
                [0],
                [value],
                left=left,
                height=0.6,
                color=CAUSE_COLOURS.get(cause, CAPACITY_COLOUR),
                edgecolor=TEXT_COLOUR,
                linewidth=0.5,
                hatch=CAUSE_HATCHES.get(cause),
                label=f"{terminal(words, 40)}: {value:,.1f} GPU-h ({value / allocated:.0%})",
            )
            left += value
        ax.set_xlim(0, allocated)
        ax.set_yticks([])
        ax.set_xlabel("GPU-hours allocated")
        ax.legend(
            loc="upper center", bbox_to_anchor=(0.5, -0.55), ncol=4, frameon=False, fontsize=8
        )
        return _svg(fig, "causes", "Allocated GPU-hours by cause")


SAVED_COLOUR = "#16a34a"
IDLE_COLOUR = "#dc2626"


def weeks_chart(
    labels: list[str],
    gpu_hours: list[tuple[str, list[float | None]]],
    findings: list[tuple[str, list[int | None]]],
) -> str:
    """The trend over the weeks `--history` keeps: GPU-hours per week (allocated, idle,
    realized savings: lines, a gap where a report lacks the figure) beside the findings open
    and fixed (bars). `labels` name the weeks, oldest first. Empty with fewer than two weeks."""
    if len(labels) < 2:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    colours = (ALLOCATED_COLOUR, IDLE_COLOUR, SAVED_COLOUR)
    x = list(range(len(labels)))
    ticks = [terminal(label, 20) for label in labels]
    with matplotlib.rc_context(cast(Any, _RC)):
        fig = Figure(figsize=(12.5, 3.2))
        left, right = fig.subplots(1, 2, width_ratios=(3, 2))
        for (name, values), colour in zip(gpu_hours, colours, strict=False):
            ys = [math.nan if v is None else v for v in values]
            left.plot(x, ys, color=colour, linewidth=1.6, marker="o", markersize=3, label=name)
        left.set_ylabel("GPU-hours")
        left.set_ylim(bottom=0)
        width = 0.8 / max(len(findings), 1)
        for i, (name, counts) in enumerate(findings):
            ys = [math.nan if n is None else float(n) for n in counts]
            shift = [t - 0.4 + width * (i + 0.5) for t in x]
            right.bar(shift, ys, width=width, color=colours[i * 2 % 3], label=name)
        right.set_ylabel("Findings")
        for ax in (left, right):
            ax.set_xticks(
                x, ticks, rotation=45 if len(x) > 8 else 0, ha="right" if len(x) > 8 else "center"
            )
            ax.grid(axis="y", color=GRID_COLOUR, linewidth=0.8)
            ax.set_axisbelow(True)
            ax.legend(
                loc="upper center",
                bbox_to_anchor=(0.5, -0.2 if len(x) <= 8 else -0.35),
                ncol=3,
                frameon=False,
            )
        return _svg(fig, "weeks", "GPU-hours and findings over the kept weeks")
