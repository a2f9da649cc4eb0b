"""`--debug` (or `GPUAUDIT_DEBUG=1`): every request logged to stderr (credentials are redacted
where the requests are logged), and an internal error shown with its traceback."""

from __future__ import annotations

import logging
import os
import sys

ENVVAR = "GPUAUDIT_DEBUG"
"""The one environment variable behind `--debug`, on the root command and on the subcommands."""

_TRUE = ("1", "true", "yes", "on", "y", "t")


def configure(debug: bool) -> None:
    """Log the `gpuaudit` loggers to stderr when `debug`, else not at all: a run in the same
    process after a `--debug` one (tests, embedding) logs nothing."""
    logger = logging.getLogger("gpuaudit")
    if debug:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("gpuaudit: debug: %(name)s: %(message)s"))
        logger.handlers[:] = [handler]
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    else:
        logger.handlers[:] = []
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


def enabled() -> bool:
    """Whether `--debug` is on for this run: set by a flag, or `GPUAUDIT_DEBUG` is true (read
    here too, for an error raised before the options were parsed)."""
    on = any(isinstance(h, _StderrHandler) for h in logging.getLogger("gpuaudit").handlers)
    return on or os.environ.get(ENVVAR, "").strip().lower() in _TRUE


class _StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is when a record is emitted (not when it was made)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never break a run
            self.handleError(record)
