"""`--debug`: every request logged to stderr (credentials are redacted where the requests are
logged)."""

from __future__ import annotations

import logging
import sys


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


class _StderrHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is when a record is emitted (not when it was made)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must never break a run
            self.handleError(record)
