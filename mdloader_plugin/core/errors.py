"""User-facing errors: one line naming the file, key or rank and what to do.

`MDLoaderError` is what bad input raises. The CLI prints ``mdloader: error: <message>`` and exits 2;
under MPI, :func:`mdloader_plugin.mpi.abort.abort_on_error` turns any error on any rank into an
abort of the whole communicator so no rank is left waiting in a collective or a Get.
"""

from __future__ import annotations


class MDLoaderError(Exception):
    """A problem with the user's input or environment (not a bug in MDLoader)."""

    exit_code = 2


class DataError(MDLoaderError):
    """A data file is missing, unreadable or does not follow the expected layout."""


class ConfigError(MDLoaderError):
    """A configuration value or command-line argument is invalid."""


class MemoryBudgetError(MDLoaderError):
    """The data set would not fit in the per-rank memory budget."""


def internal(msg: str) -> AssertionError:
    """An invariant of MDLoader itself was broken: a bug to report, not a user error."""
    return AssertionError(f"Internal error: {msg} (please report this as an MDLoader bug)")
