"""MDLoader's logger: INFO on rank 0 only (progress and decisions), warnings from every rank."""

from __future__ import annotations

import logging
import os
import sys

from .errors import ConfigError
from .options import env

_CONFIGURED = False


def get_logger(rank: int | None = None) -> logging.Logger:
    """The ``mdloader`` logger; the first call decides its level from the rank."""
    global _CONFIGURED
    log = logging.getLogger("mdloader")
    if not _CONFIGURED:
        if rank is None:
            rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", 0)))
        if not log.handlers:
            h = logging.StreamHandler(sys.stderr)
            h.setFormatter(logging.Formatter("mdloader: %(message)s"))
            log.addHandler(h)
            log.propagate = False
        level = env("MDLOADER_LOG_LEVEL") or ("INFO" if rank == 0 else "WARNING")
        if not isinstance(logging.getLevelName(level.strip().upper()), int):
            raise ConfigError(f"MDLOADER_LOG_LEVEL={level!r} is not a log level; use DEBUG, "
                              "INFO, WARNING or ERROR, or unset it")
        log.setLevel(level.strip().upper())
        _CONFIGURED = True
    return log
