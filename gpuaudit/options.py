"""Every option of `gpuaudit scan` and `gpuaudit snapshot save`, in one table: its flag, what it
holds, its default, its help and help panel. The flag gives the rest: `--fail-on` is read from
`GPUAUDIT_FAIL_ON` and from the key `fail_on` of `[scan]` in `gpuaudit.toml`.

The command line declares its options from this table and `gpuaudit.config` resolves and checks
their values by it; `docs/config.md` documents the `[scan]` keys it lists. Only the standard
library is imported, so that `gpuaudit --help` stays fast.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(enum.Enum):
    """What an option holds; the value is how an error about a `[scan]` key names it."""

    TEXT = "a string"
    FLAG = "true or false"
    NUMBER = "a number"
    PATH = "a path (a string)"
    LIST = "a list of strings"
    SPAN = "a string or a number"


@dataclass(frozen=True)
class Option:
    """One option of `scan` (and of `snapshot save` where it applies)."""

    flag: str
    """The long flag, e.g. `--fail-on`."""
    kind: Kind
    """What it holds."""
    panel: str
    """The help panel it is listed under."""
    help: str
    """Its help text."""
    default: object = None
    """Its default where that is not off, empty or unset."""
    short: str = ""
    """Its short flag, e.g. `-q`."""
    scan_only: bool = False
    """`snapshot save` does not take it."""
    in_file: str = "scan"
    """Where `gpuaudit.toml` sets it: `scan` for the `[scan]` key named after the option, else
    why the file does not (a secret, or another table)."""

    @property
    def name(self) -> str:
        """The option's name: the parameter, and the `[scan]` key (`fail_on`)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def envvar(self) -> str:
        """The environment variable it is read from (`GPUAUDIT_FAIL_ON`)."""
        return "GPUAUDIT_" + self.name.upper()


SOURCE, WINDOW, OUTPUT = "Data source", "Window", "Output"
CONFIG, PROM, KUBE = "Configuration", "Prometheus connection", "Kubernetes connection"
SECRET = "a secret, and a file is easily committed or shared"

OPTIONS: tuple[Option, ...] = (
    Option(
        "--demo",
        Kind.FLAG,
        SOURCE,
        "Audit the bundled demo cluster (no cluster needed).",
        scan_only=True,
    ),
    Option("--snapshot", Kind.PATH, SOURCE, "Audit a saved snapshot file.", scan_only=True),
    Option(
        "--prometheus-url",
        Kind.TEXT,
        SOURCE,
        "Collect live DCGM metrics from this Prometheus-compatible URL (path prefixes such as "
        "Mimir's /prometheus are kept).",
    ),
    Option(
        "--kubeconfig",
        Kind.PATH,
        KUBE,
        "Kubeconfig for reading pods, nodes and gang objects (default $KUBECONFIG, "
        "~/.kube/config, or the in-cluster service account).",
    ),
    Option("--context", Kind.TEXT, KUBE, "Kubeconfig context to use."),
    Option(
        "--namespace", Kind.LIST, KUBE, "Read pods of this namespace only; repeatable.", short="-n"
    ),
    Option(
        "--no-kubernetes",
        Kind.FLAG,
        KUBE,
        "Do not read the Kubernetes API; audit from DCGM pod labels alone.",
    ),
    Option(
        "--window",
        Kind.SPAN,
        WINDOW,
        "How far back to audit, e.g. 7d, 24h (default 7d; on a snapshot, a part of its "
        "recorded window, default all of it).",
    ),
    Option(
        "--end",
        Kind.SPAN,
        WINDOW,
        "End of the window: unix seconds or RFC 3339 (default now; on a snapshot, within its "
        "recorded window, default its end).",
    ),
    Option(
        "--step", Kind.SPAN, WINDOW, "Bucket size of hourly series (default 1h; live scans only)."
    ),
    Option(
        "--format",
        Kind.TEXT,
        OUTPUT,
        "Report format.",
        "table",
        short="-f",
        scan_only=True,
    ),
    Option(
        "--output",
        Kind.PATH,
        OUTPUT,
        "Write the report to this file instead of stdout.",
        scan_only=True,
        short="-o",
    ),
    Option(
        "--fail-on",
        Kind.TEXT,
        OUTPUT,
        "Exit 1 when a finding is at or above this severity: critical, high, medium, low, info, "
        "or none.",
        "none",
        scan_only=True,
    ),
    Option(
        "--config",
        Kind.PATH,
        CONFIG,
        "Settings file (default ./gpuaudit.toml when present).",
        in_file="it names the file",
    ),
    Option(
        "--set",
        Kind.LIST,
        CONFIG,
        "Override a check threshold, e.g. --set idle_tail_hours=12 (repeatable; "
        "`gpuaudit explain CODE` states each check's settings).",
        in_file="the thresholds have their own table, [checks]",
        scan_only=True,
    ),
    Option(
        "--topology",
        Kind.PATH,
        CONFIG,
        "Folder of `nvidia-smi topo -m` outputs, one per node (<node>.txt) or per product "
        "(<nvidia.com/gpu.product>.txt), for GPU030.",
        scan_only=True,
    ),
    Option(
        "--strict",
        Kind.FLAG,
        OUTPUT,
        "Exit 2 when any source answered only in part (the report says what is missing).",
        scan_only=True,
    ),
    Option(
        "--baseline",
        Kind.PATH,
        OUTPUT,
        "An earlier JSON report: mark findings new, worse or unchanged, list the resolved ones, "
        "and let only new or worse findings drive --fail-on (for CI).",
        scan_only=True,
    ),
    Option(
        "--previous",
        Kind.PATH,
        OUTPUT,
        "Last week's JSON report: show the trend (new, resolved, better, worse) without "
        "changing the exit code (for cron reports).",
        scan_only=True,
    ),
    Option(
        "--group-by-label",
        Kind.TEXT,
        OUTPUT,
        "Also break waste down by this pod label, e.g. team.",
        scan_only=True,
    ),
    Option(
        "--webhook",
        Kind.TEXT,
        OUTPUT,
        "Post the Markdown summary to this Slack-compatible incoming webhook URL.",
        in_file=SECRET,
        scan_only=True,
    ),
    Option("--quiet", Kind.FLAG, OUTPUT, "No progress bar or summary line on stderr.", short="-q"),
    Option(
        "--prometheus-token",
        Kind.TEXT,
        PROM,
        "Bearer token for Prometheus (never printed).",
        in_file=SECRET,
    ),
    Option("--prometheus-token-file", Kind.PATH, PROM, "File holding the bearer token."),
    Option("--prometheus-user", Kind.TEXT, PROM, "Basic-auth user name."),
    Option(
        "--prometheus-password",
        Kind.TEXT,
        PROM,
        "Basic-auth password (never printed).",
        in_file=SECRET,
    ),
    Option(
        "--header",
        Kind.LIST,
        PROM,
        "Extra HTTP header 'Name: value', repeatable (X-Scope-OrgID for Mimir/Cortex, "
        "THANOS-TENANT for Thanos). In the environment separate headers with spaces and write "
        "'Name:value'.",
        short="-H",
    ),
    Option(
        "--ca-file", Kind.PATH, PROM, "CA bundle that signs the Prometheus server's certificate."
    ),
    Option("--client-cert", Kind.PATH, PROM, "Client certificate (PEM) for mutual TLS."),
    Option("--client-key", Kind.PATH, PROM, "Client key (PEM) for mutual TLS."),
    Option(
        "--insecure-skip-tls-verify",
        Kind.FLAG,
        PROM,
        "Do not verify the server's TLS certificate (not recommended).",
    ),
    Option(
        "--cluster-label",
        Kind.TEXT,
        PROM,
        "NAME=VALUE selecting one cluster's series in a central Prometheus.",
    ),
    Option("--timeout", Kind.NUMBER, PROM, "Seconds to wait for one answer.", 120.0),
)
"""In the order `gpuaudit scan --help` lists them."""

BY_FLAG = {o.flag: o for o in OPTIONS}
BY_NAME = {o.name: o for o in OPTIONS}
