"""NVIDIA XID codes: what each means and what NVIDIA says to do about it.

Sources, as read for this table:

- NVIDIA's Xid catalog for Ampere and newer GPUs, "Analyzing Xid Errors with the Xid Catalog"
  (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, with its downloadable
  `Xid-Catalog.xlsx`): per code a mnemonic, a description and a "Resolution Bucket (Immediate
  Action)" (`RESTART_APP`, `RESET_GPU`, `RESTART_BM`, `CONTACT_SUPPORT`, `IGNORE`, or a
  `WORKFLOW_*` pointer to a longer procedure). The rows of 8, 11 and 13 (`RESTART_APP`) were
  read on the page itself; the rest follow a transcription of the spreadsheet (the
  `xid_catalog.go` table of the gputop project, generated from the same spreadsheet). Where the
  catalog gives a `WORKFLOW_*` bucket, `bucket` below names the workflow's first action and
  says so in `Entry.note`.
- NVIDIA GPU Memory Error Management (https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/):
  "User Visible Statistics" (XID 48 an uncorrectable ECC error, 94 contained, 95 uncontained,
  63 a row-remapping entry recorded in the InfoROM, 64 a failure to record one), "Row
  Remapping" (a remap takes effect at the next GPU reset), and "Error Recovery and Response
  Flags": with the row-remapping *pending* flag set, "unaffected applications can continue
  running without affecting accuracy and performance, and new workloads can be launched"; the
  row-remapping *failure* flag is defined by the RMA policy thresholds (grounds for an RMA).
- NVML `nvmlRemappedRowsInfo_v2_t` (`bPending`, `bFailureOccurred`), which DCGM exports as
  `DCGM_FI_DEV_ROW_REMAP_PENDING` (field 396) and `DCGM_FI_DEV_ROW_REMAP_FAILURE` (395).
- dcgm-exporter's `xid_errors.go` for the short texts it puts in `err_msg` (its own text wins
  when a series carries one).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Bucket(enum.Enum):
    """What to do about an XID, from least to most disruptive (NVIDIA's resolution buckets,
    folded into the actions a Kubernetes operator takes)."""

    IGNORE = "no action"
    """Informational (`IGNORE`): nothing to do now."""
    RESTART_APP = "restart the application"
    """The application crashed or misbehaved (`RESTART_APP`); the GPU itself is usable."""
    RESET_GPU = "reset the GPU"
    """The GPU must be reset (`RESET_GPU`): stop the work on it, `nvidia-smi -r`."""
    REBOOT = "reboot the node"
    """The node must be rebooted (`RESTART_BM`, `RESTART_VM`): cordon and drain it first."""
    CONTACT_SUPPORT = "contact support (RMA)"
    """Hardware service (`CONTACT_SUPPORT`, `CHECK_MECHANICALS`): drain, replace the GPU."""

    @property
    def rank(self) -> int:
        """Higher is more disruptive."""
        return list(Bucket).index(self)


@dataclass(frozen=True)
class Entry:
    """One XID code of the catalog."""

    code: int
    mnemonic: str
    text: str
    """NVIDIA's short description."""
    bucket: Bucket
    catalog: str
    """The catalog's immediate-action bucket as it names it (`RESET_GPU`, `WORKFLOW_XID_48`)."""
    note: str = ""
    """Why `bucket` is what it is where the catalog points to a workflow."""


_TABLE = """
  8 RESTART_APP          ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT      GPU stopped processing
 11 RESTART_APP          ROBUST_CHANNEL_GR_ERROR_MISSING_HW          Invalid or corrupted push buffer stream
 13 RESTART_APP          ROBUST_CHANNEL_GR_EXCEPTION                 Graphics Engine Exception
 25 RESTART_APP          ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY            Invalid or illegal push buffer stream
 31 RESTART_APP          ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT       GPU memory page fault
 32 RESTART_APP          ROBUST_CHANNEL_PBDMA_ERROR                  Invalid or corrupted push buffer stream
 38 IGNORE               ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT    Driver firmware error
 43 IGNORE               ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR     GPU stopped processing
 44 IGNORE               ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW        Graphics Engine fault during context switch
 45 WORKFLOW_XID_45      ROBUST_CHANNEL_PREEMPTIVE_REMOVAL           Preemptive cleanup, due to previous errors
 46 RESET_GPU            ROBUST_CHANNEL_GPU_TIMEOUT_ERROR            GPU stopped processing
 48 WORKFLOW_XID_48      ROBUST_CHANNEL_GPU_ECC_DBE                  Double Bit ECC Error
 54 CHECK_MECHANICALS    SILENT_RUNNING_PWR_REDUCED_CLOCKING         Auxiliary power is not connected to the GPU board
 62 RESET_GPU            PMU_HALT_ERROR                              Internal micro-controller halt
 63 IGNORE               INFOROM_DRAM_RETIREMENT_EVENT               ECC page retirement or row remapping recording event
 64 RESET_GPU            INFOROM_DRAM_RETIREMENT_FAILURE             ECC page retirement or row remapper recording failure
 68 RESTART_APP          ROBUST_CHANNEL_NVDEC0_ERROR                 NVDEC0 Exception
 69 RESTART_APP          ROBUST_CHANNEL_GR_CLASS_ERROR               Graphics Engine class error
 74 WORKFLOW_NVLINK_ERR  NVLINK_ERROR                                NVLINK Error
 79 RESTART_BM           ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS   GPU has fallen off the bus
 80 RESTART_APP          PBDMA_PUSHBUFFER_CRC_MISMATCH               Corrupted data sent to GPU
 92 IGNORE               EXCESSIVE_SBE_INTERRUPTS                    High single-bit ECC error rate
 94 RESTART_APP          ROBUST_CHANNEL_CONTAINED_ERROR              Contained ECC error
 95 RESET_GPU            ROBUST_CHANNEL_UNCONTAINED_ERROR            Uncontained ECC error
109 RESET_GPU            ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR          Context Switch Timeout Error
110 RESET_GPU            SEC_FAULT_ERROR                             Security Fault Error
119 RESET_GPU            GSP_RPC_TIMEOUT                             GSP RPC Timeout
120 RESET_GPU            GSP_ERROR                                   GSP Error
121 IGNORE               C2C_ERROR                                   C2C Link Error
136 RESET_GPU            ALI_TRAINING_FAIL                           Link Training Failed
140 RESET_GPU            UNRECOVERABLE_ECC_ERROR_ESCAPE              Unrecovered ECC Error
143 RESET_GPU            GPU_INIT_ERROR                              GPU Initialization Failure
144 WORKFLOW_NVLINK5_ERR NVLINK_SAW_ERROR                            NVLINK Error
145 WORKFLOW_NVLINK5_ERR NVLINK_RLW_ERROR                            NVLINK Error
149 WORKFLOW_NVLINK5_ERR NVLINK_NETIR_ERROR                          NVLINK Error
150 WORKFLOW_NVLINK5_ERR NVLINK_MSE_ERROR                            NVLINK Error
154 XID_154              GPU_RECOVERY_ACTION_CHANGED                 GPU Recovery Action Changed
155 RESET_GPU            NVLINK_SW_DEFINED_ERROR                     NVLINK Error
156 RESET_GPU            RESOURCE_RETIREMENT_EVENT                   Resource Retirement Event
157 IGNORE               RESOURCE_RETIREMENT_FAILURE                 Resource Retirement Failure
158 RESET_GPU            GPU_FATAL_TIMEOUT                           GPU Fatal Timeout
"""  # noqa: E501
"""code, the catalog's immediate-action bucket, mnemonic, description (dcgm-exporter's
wording where it has the code)."""

_BY_CATALOG_NAME: dict[str, tuple[Bucket, str]] = {
    "IGNORE": (Bucket.IGNORE, ""),
    "RESTART_APP": (Bucket.RESTART_APP, ""),
    "RESET_GPU": (Bucket.RESET_GPU, ""),
    "RESTART_BM": (Bucket.REBOOT, ""),
    "RESTART_VM": (Bucket.REBOOT, ""),
    "CONTACT_SUPPORT": (Bucket.CONTACT_SUPPORT, ""),
    "CHECK_MECHANICALS": (Bucket.CONTACT_SUPPORT, ""),
    "WORKFLOW_XID_45": (
        Bucket.RESTART_APP,
        "the application was stopped after another error; the other XID decides",
    ),
    "WORKFLOW_XID_48": (
        Bucket.RESET_GPU,
        "an uncorrectable memory error: the row remap it triggers takes effect at a GPU reset",
    ),
    "WORKFLOW_NVLINK_ERR": (
        Bucket.RESET_GPU,
        "the NVLink workflow starts with a GPU reset; a link that fails again needs service",
    ),
    "WORKFLOW_NVLINK5_ERR": (
        Bucket.RESET_GPU,
        "the NVLink workflow starts with a GPU reset; a link that fails again needs service",
    ),
    "XID_154": (
        Bucket.REBOOT,
        "the driver's kernel-log line names the action (reset or reboot); taken as the larger",
    ),
}
"""The catalog's bucket names -> (the action taken here, why where it is not literal)."""


def _parse(table: str) -> dict[int, Entry]:
    out: dict[int, Entry] = {}
    for line in table.strip().splitlines():
        code, catalog, mnemonic, text = line.split(None, 3)
        action, note = _BY_CATALOG_NAME[catalog]
        out[int(code)] = Entry(int(code), mnemonic, text.strip(), action, catalog, note)
    return out


CATALOG: dict[int, Entry] = _parse(_TABLE)
"""XID code -> its catalog entry."""

MEANINGS: dict[int, str] = {
    **{code: e.text for code, e in CATALOG.items()},
    61: "Internal micro-controller breakpoint/warning",
}
"""XID code -> short meaning (61 is in dcgm-exporter's table, not in the Ampere catalog)."""

UNKNOWN_BUCKET = Bucket.RESET_GPU
"""What a code missing from this table is taken to need: a reset, the catalog's commonest
hardware-side action (the finding says the code is not in gpuaudit's copy of the catalog)."""


def entry(code: int) -> Entry:
    """The catalog entry of `code`; an unknown code gets `UNKNOWN_BUCKET`."""
    found = CATALOG.get(code)
    if found is not None:
        return found
    return Entry(
        code, "", MEANINGS.get(code, "unknown XID"), UNKNOWN_BUCKET, "", "not in the catalog"
    )


def bucket(code: int) -> Bucket:
    return entry(code).bucket


def codes_in(*buckets: Bucket) -> tuple[int, ...]:
    """The catalogued codes whose bucket is one of `buckets`, ascending."""
    return tuple(sorted(c for c, e in CATALOG.items() if e.bucket in buckets))


def meaning(code: int, exporter_text: str = "") -> str:
    """The exporter's text when given, else the table's, else `unknown XID`."""
    return exporter_text or MEANINGS.get(code, "unknown XID")
