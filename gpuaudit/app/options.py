"""Every option of `gpuaudit scan` and `gpuaudit snapshot save`, in one table: its flag, what it
holds, its default, its help and help panel. The flag gives the rest: `--fail-on` is read from
`GPUAUDIT_FAIL_ON` and from the key `fail_on` of `[scan]` in `gpuaudit.toml`.

The command line declares each option with its entry (`gpuaudit.console.params.option`, in the
commands' `Annotated` parameters) and `gpuaudit.app.config` resolves and checks their values by
it; `docs/config.md` documents the `[scan]` keys it lists. Only the standard library and the
bounds' defaults are imported, so that `gpuaudit --help` stays fast.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from gpuaudit.sources.bounds import (
    DEFAULT_ANSWER_MIB,
    DEFAULT_OBJECTS,
    DEFAULT_PARALLEL,
    DEFAULT_QUERIES,
    DEFAULT_TIMEOUT_S,
)


class Kind(enum.Enum):
    """What an option holds; the value is how an error about a `[scan]` key names it."""

    TEXT = "a string"
    FLAG = "true or false"
    NUMBER = "a number"
    PATH = "a path (a string)"
    LIST = "a list of strings"
    SPAN = "a string or a number"
    REPORTS = "a list of FORMAT=FILE strings"


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
    env_lines: bool = False
    """Its environment variable holds one value per line (a header value has spaces), not
    values separated by spaces."""
    in_file: str = "scan"
    """Where `gpuaudit.toml` sets it: `scan` for the `[scan]` key named after the option, else
    why the file does not (a secret, or another table)."""
    live_only: bool = False
    """It shapes a live collection (a connection, what to query), so it cannot apply to a
    saved snapshot or the demo: `scan --snapshot` and `scan --demo` refuse it."""
    value: str = ""
    """What `--help` shows for its value (`URL`, `FILE`); by default what its kind holds, and
    nothing for a flag."""

    @property
    def name(self) -> str:
        """The option's name: the parameter, and the `[scan]` key (`fail_on`)."""
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def envvar(self) -> str:
        """The environment variable it is read from (`GPUAUDIT_FAIL_ON`)."""
        return "GPUAUDIT_" + self.name.upper()

    @property
    def metavar(self) -> str:
        """What `--help` shows after the flag for its value; empty for a flag."""
        return self.value or _METAVARS[self.kind]


_METAVARS = {
    Kind.TEXT: "TEXT",
    Kind.FLAG: "",
    Kind.NUMBER: "NUMBER",
    Kind.PATH: "FILE",
    Kind.LIST: "TEXT",
    Kind.SPAN: "TEXT",
    Kind.REPORTS: "FORMAT=FILE",
}

SOURCE, WINDOW, OUTPUT = "Data source", "Window", "Output"
CONFIG, PROM, KUBE = "Configuration", "Prometheus connection", "Kubernetes connection"
SECRET = "a secret, and a file is easily committed or shared"
PER_RUN = "it is chosen for one run"

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
        value="URL",
    ),
    Option(
        "--kubeconfig",
        Kind.PATH,
        KUBE,
        "Kubeconfig for reading pods, nodes and gang objects (default $KUBECONFIG, "
        "~/.kube/config, or the in-cluster service account; live scans only).",
        live_only=True,
    ),
    Option(
        "--context",
        Kind.TEXT,
        KUBE,
        "Kubeconfig context to use (live scans only).",
        value="NAME",
        live_only=True,
    ),
    Option(
        "--namespace",
        Kind.LIST,
        KUBE,
        "A team's own view: the findings, summary, capacity plan and ledgers of the pods of "
        "this namespace only (a node's or a GPU's finding where it names one of them); "
        "repeatable, or a comma list. Live, only its Kubernetes objects are read "
        "(cluster-scoped ones such as nodes whole); a snapshot or the demo is audited whole "
        "and narrowed after the series are joined to its pods.",
        short="-n",
        value="NAMESPACE",
    ),
    Option(
        "--no-kubernetes",
        Kind.FLAG,
        KUBE,
        "Do not read the Kubernetes API; audit from DCGM pod labels alone (live scans only).",
        live_only=True,
    ),
    Option(
        "--window",
        Kind.SPAN,
        WINDOW,
        "How far back to audit, e.g. 7d, 24h (default 7d; on a snapshot, a part of its "
        "recorded window, default all of it).",
        value="DURATION",
    ),
    Option(
        "--end",
        Kind.SPAN,
        WINDOW,
        "End of the window: unix seconds or RFC 3339 (default now; on a snapshot, within its "
        "recorded window, default its end).",
        value="TIME",
    ),
    Option(
        "--step",
        Kind.SPAN,
        WINDOW,
        "Bucket size of hourly series, at least the scrape interval (default 1h; live scans only).",
        value="DURATION",
        live_only=True,
    ),
    Option(
        "--max-window",
        Kind.SPAN,
        WINDOW,
        "The longest --window accepted, a guard against a typo that would query years of data.",
        "366d",
    ),
    Option(
        "--format",
        Kind.TEXT,
        OUTPUT,
        "Report format.",
        "table",
        short="-f",
        scan_only=True,
        value="table|json|markdown|html|junit|showback|focus",
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
        "--report",
        Kind.REPORTS,
        OUTPUT,
        "Also write the report in FORMAT to FILE, e.g. --report json=report.json --report "
        "junit=gpuaudit.xml --report showback=showback.csv --report focus=focus.csv (the "
        "showback and FOCUS 1.2 cost CSVs); repeatable. Every report comes from the one "
        "collection and is written before the exit code is decided.",
        scan_only=True,
    ),
    Option(
        "--fail-on",
        Kind.TEXT,
        OUTPUT,
        "Exit 1 when a finding is at or above this severity: critical, high, medium, low, info, "
        "or none. An audit that audited nothing (no DCGM series, or every check skipped) exits "
        "2 unless this is none.",
        "none",
        scan_only=True,
        value="SEVERITY",
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
        value="NAME=VALUE",
    ),
    Option(
        "--topology",
        Kind.PATH,
        CONFIG,
        "Folder of `nvidia-smi topo -m` outputs, one per node (<node>.txt) or per product "
        "(<nvidia.com/gpu.product>.txt), for GPU030.",
        scan_only=True,
        value="DIR",
    ),
    Option(
        "--timezone",
        Kind.TEXT,
        CONFIG,
        "The cluster's time zone, an IANA name such as Europe/Berlin (default UTC): gpuaudit fix "
        "writes the busy hours of a part-time workload's KEDA cron schedule in it.",
        "UTC",
        scan_only=True,
        value="ZONE",
    ),
    Option(
        "--strict",
        Kind.FLAG,
        OUTPUT,
        "Exit 2 when the audit is incomplete: a source answered only in part, or nothing was "
        "audited (the report says what is missing).",
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
        "Last week's JSON report: say first which of its findings were fixed (and how), are "
        "still open or waived, which are new, and the realized savings per week; show the trend "
        "(new, resolved, better, worse) without changing the exit code (for cron reports).",
        scan_only=True,
    ),
    Option(
        "--history",
        Kind.PATH,
        OUTPUT,
        "A folder that keeps this JSON report (gpuaudit-<window end>.json, created if missing) "
        "and the last --history-keep before it: the newest earlier one is last week's report "
        "unless --previous names one, and the Markdown and HTML reports show the trend over "
        "the kept weeks (for the weekly cron job).",
        scan_only=True,
        value="DIR",
    ),
    Option(
        "--history-keep",
        Kind.NUMBER,
        OUTPUT,
        "How many reports --history keeps, this one included (1 to 520); older gpuaudit "
        "reports there are removed, no other file.",
        26,
        scan_only=True,
        value="N",
    ),
    Option(
        "--group-by-label",
        Kind.TEXT,
        OUTPUT,
        "Also break waste down by this pod label, e.g. team.",
        scan_only=True,
        value="LABEL",
    ),
    Option(
        "--owner-keys",
        Kind.LIST,
        OUTPUT,
        "The label and annotation keys a finding's owner is read from, first wins, on the "
        "object that owns the pod, then the pod, then its namespace; repeatable (default owner, "
        "team, app.kubernetes.io/part-of). The gpuaudit.io/contact annotation says how to "
        "reach the owner.",
        scan_only=True,
        value="KEY",
    ),
    Option(
        "--per-owner",
        Kind.PATH,
        OUTPUT,
        "Also write one Markdown and one HTML report per owner into this folder (created if "
        "missing; a file of that name already there is refused): their findings, GPU-hours "
        "and money, their rank among owners, and the gpuaudit fix changes to their objects.",
        scan_only=True,
        value="DIR",
    ),
    Option(
        "--what-if",
        Kind.TEXT,
        OUTPUT,
        "Show the capacity plan under a scenario: release-idle adds, per GPU product, the "
        "nodes the window's work would have needed after releasing the idle reservations "
        "gpuaudit found (GPU001, GPU002's idle tails) and what that frees. JSON always "
        "carries these figures (capacity.after_release_idle).",
        scan_only=True,
        value="SCENARIO",
    ),
    Option(
        "--idle-rule",
        Kind.TEXT,
        OUTPUT,
        "How the showback shares each GPU product's idle and unallocated cost among the "
        "groups that held it: none (its own lines), proportional (to allocated GPU-hours) or "
        "even; every output names the rule (docs/showback.md).",
        "none",
        scan_only=True,
        value="none|proportional|even",
    ),
    Option(
        "--all",
        Kind.FLAG,
        OUTPUT,
        "List every finding in the table, one row each, with its message and recommendation "
        "(by default similar findings fold into one row and only the top ones are detailed).",
        scan_only=True,
        in_file=PER_RUN,
    ),
    Option(
        "--webhook",
        Kind.TEXT,
        OUTPUT,
        "Post the Markdown summary to this Slack-compatible incoming webhook URL, and each "
        "owner's findings to the URL the webhooks table of gpuaudit.toml names for them "
        "(Slack or Teams); every post within 30 s in all.",
        in_file=SECRET,
        scan_only=True,
        value="URL",
    ),
    Option("--quiet", Kind.FLAG, OUTPUT, "No progress bar or summary line on stderr.", short="-q"),
    Option(
        "--debug",
        Kind.FLAG,
        OUTPUT,
        "Log every request (credentials redacted) and the samples each query read to stderr, "
        "and show the traceback of an internal error.",
        in_file=PER_RUN,
    ),
    Option(
        "--prometheus-token",
        Kind.TEXT,
        PROM,
        "Bearer token for Prometheus (never printed).",
        in_file=SECRET,
        value="TOKEN",
        live_only=True,
    ),
    Option(
        "--prometheus-token-file", Kind.PATH, PROM, "File holding the bearer token.", live_only=True
    ),
    Option(
        "--prometheus-user", Kind.TEXT, PROM, "Basic-auth user name.", value="NAME", live_only=True
    ),
    Option(
        "--prometheus-password",
        Kind.TEXT,
        PROM,
        "Basic-auth password (never printed).",
        in_file=SECRET,
        value="PASSWORD",
        live_only=True,
    ),
    Option(
        "--header",
        Kind.LIST,
        PROM,
        "Extra HTTP header 'Name: value', repeatable (X-Scope-OrgID for Mimir/Cortex, "
        "THANOS-TENANT for Thanos). Values are never printed. In GPUAUDIT_HEADER put one "
        "header per line.",
        short="-H",
        value="'NAME: VALUE'",
        live_only=True,
        env_lines=True,
    ),
    Option(
        "--ca-file",
        Kind.PATH,
        PROM,
        "CA bundle that signs the Prometheus server's certificate.",
        live_only=True,
    ),
    Option(
        "--client-cert", Kind.PATH, PROM, "Client certificate (PEM) for mutual TLS.", live_only=True
    ),
    Option("--client-key", Kind.PATH, PROM, "Client key (PEM) for mutual TLS.", live_only=True),
    Option(
        "--insecure-skip-tls-verify",
        Kind.FLAG,
        PROM,
        "Do not verify the server's TLS certificate (not recommended).",
        live_only=True,
    ),
    Option(
        "--cluster-label",
        Kind.TEXT,
        PROM,
        "NAME=VALUE reads one cluster's series in a central Prometheus, Thanos, Mimir or "
        "VictoriaMetrics; NAME alone audits every cluster it holds in one scan (the same "
        "queries, grouped by the label; a section per cluster in every report). A scan of "
        "every cluster does not read Kubernetes (one kubeconfig context is one cluster): "
        "--kubeconfig, --context and --namespace are refused with it.",
        value="NAME[=VALUE]",
        live_only=True,
    ),
    Option(
        "--timeout",
        Kind.NUMBER,
        PROM,
        "Seconds one request may take, last byte included, on Prometheus and on the "
        "Kubernetes API (more than 0, at most 3600). Prometheus is asked to stop evaluating "
        "a query at nine tenths of it; a query stopped so, or left unanswered (at most 8 a "
        "collection), is cut smaller and sent again.",
        DEFAULT_TIMEOUT_S,
        value="SECONDS",
        live_only=True,
    ),
    Option(
        "--max-answer-mib",
        Kind.NUMBER,
        PROM,
        "Largest answer read, in MiB once decompressed: one Prometheus answer or one "
        "Kubernetes list page.",
        DEFAULT_ANSWER_MIB,
        live_only=True,
    ),
    Option(
        "--max-queries",
        Kind.NUMBER,
        PROM,
        "Most Prometheus queries one collection sends, time chunks and shards included.",
        DEFAULT_QUERIES,
        live_only=True,
    ),
    Option(
        "--parallel-queries",
        Kind.NUMBER,
        PROM,
        "Prometheus queries in flight at once (1 to 16): the backend evaluates each on a "
        "core of its own. The answers are the same; only the time and the load change.",
        DEFAULT_PARALLEL,
        live_only=True,
    ),
    Option(
        "--max-objects",
        Kind.NUMBER,
        KUBE,
        "Most objects read of one Kubernetes resource; a longer list is cut off there and the "
        "report marked incomplete.",
        DEFAULT_OBJECTS,
        live_only=True,
    ),
)
"""In the order `gpuaudit scan --help` lists them."""

BY_FLAG = {o.flag: o for o in OPTIONS}
BY_NAME = {o.name: o for o in OPTIONS}
