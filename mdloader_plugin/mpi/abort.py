"""Errors into exits: one line for a user error, and an abort of the whole job for a failure on
any one rank (an MPI job must never hang)."""

from __future__ import annotations

import contextlib
import sys
import traceback

from ..core.errors import MDLoaderError
from .launch_checks import _env_rank, _world_size_env, rank_prefix


def report_error(exc: BaseException, *, trace: bool = True, where: str = "") -> int:
    """Print one line for a user error (a traceback for a bug) and return the exit code.

    A user error wrapped by a framework (Hydra's ``InstantiationException`` around a loader's
    ``ConfigError``) is reported as the user error it wraps. `trace`: print a bug's traceback
    (False: it was printed already); `where`: said after a bug's type (``" in the mdloader-prefetch
    thread"``)."""
    exc = _user_error(exc) or exc
    if isinstance(exc, MDLoaderError):
        if getattr(exc, "agreed", False):  # the same error on every rank: say it once
            if _env_rank() == 0:
                print(f"mdloader: error: {exc}", file=sys.stderr, flush=True)
            return exc.exit_code
        print(f"mdloader: error: {rank_prefix()}{exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    if isinstance(exc, KeyboardInterrupt):
        print(f"mdloader: interrupted {rank_prefix()}".rstrip(), file=sys.stderr, flush=True)
        return 130
    if trace:
        traceback.print_exception(exc, file=sys.stderr)
    print(f"mdloader: error: {rank_prefix()}unexpected {type(exc).__name__}{where}: {exc}",
          file=sys.stderr, flush=True)
    return 1


def _user_error(exc: BaseException | None) -> MDLoaderError | None:
    """The :class:`MDLoaderError` in `exc`'s cause/context chain, if any."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, MDLoaderError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


@contextlib.contextmanager
def abort_on_error(comm=None):
    """Turn an exception on any one rank into an abort of the whole job.

    An MPI job must never hang: a rank that fails while the others wait in a collective or a
    one-sided epoch would leave them waiting until the allocation runs out. The error is
    printed as one line (with the rank), then ``MPI_Abort`` ends every rank with the same code.
    """
    try:
        yield
    except SystemExit as exc:
        if exc.code not in (0, None):
            _abort(comm, exc.code if isinstance(exc.code, int) else 1)
        raise
    except BaseException as exc:  # noqa: BLE001 - any failure must end the job
        code = report_error(exc)
        if not getattr(exc, "agreed", False):  # an agreed error is raised on every rank alike
            _abort(comm, code)
        raise SystemExit(code) from None


def _abort(comm, code: int) -> None:
    if _world_size_env() <= 1 and comm is None:
        return
    from mpi4py import MPI

    # COMM_WORLD even when `comm` is a duplicate of it: MPICH with a launcher that keeps the job
    # alive (-disable-auto-cleanup) ends only the calling rank on Abort of a duplicate
    if (comm if comm is not None else MPI.COMM_WORLD).Get_size() > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        MPI.COMM_WORLD.Abort(code)
