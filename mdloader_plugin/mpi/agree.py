"""Decisions the whole job shares: made once, on rank 0, and broadcast.

A choice that every rank must make alike (the backend, the replica group size) cannot be left to
each rank with its own inputs: ranks that read different profile files (one rewritten while the
job started, a different ``MDLOADER_PROFILE`` on some nodes) or sit on nodes with different rank
counts (``srun -N2 -n6``) would choose differently, and a job whose ranks run different backends
hangs until its watchdog ends it. :func:`decide_once` runs the choice on rank 0 alone and
broadcasts it; before that, :func:`compare_inputs` compares what every rank would have decided
from (a digest a named input, two small buffer collectives) and, where they differ, rank 0 logs
one warning line naming the ranks and the inputs (``MDLOADER-AGREE ...``); the job runs on rank
0's decision. The same difference is said once a process, whichever decision meets it first.

At 8,192 ranks the comparison moves 8 bytes an input a rank (a ``Bcast`` and an ``Allreduce``);
only when some input differs are the differing values gathered (as text) to name them.
:func:`require_same` is the same comparison for inputs that must not differ (the data files):
an error on every rank instead of a warning.
"""

from __future__ import annotations

import hashlib

import numpy as np

from ..core.errors import ConfigError, MDLoaderError

#: inputs whose difference this process has already reported (say each once)
_SAID: set = set()
#: distinct values a warning names per input before "and N more"
SHOW = 4


def digest(text: str) -> int:
    """A 63-bit digest of `text` (stable across processes and runs, unlike ``hash``)."""
    raw = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return int.from_bytes(raw, "little") & ((1 << 63) - 1)


def compare_inputs(comm, inputs: dict, log=None, what: str = "the job's decisions") -> list:
    """Collective over `comm` (None: one process). The names of the `inputs` whose value differs
    from rank 0's on some rank; rank 0 logs one warning line naming, for each, the ranks and
    their values (each input once a process). `inputs` is ``{name: text}`` or ``{name: (text,
    shown)}`` (compare `text`, name `shown`: a profile's contents, shown by its path), with the
    same names on every rank."""
    bad, values = _differing(comm, inputs)
    if not bad:
        return []
    new = [i for i, k in enumerate(bad) if k not in _SAID]
    _SAID.update(bad)
    if comm.Get_rank() == 0 and log is not None and new:
        log.warning(warning_line([bad[i] for i in new], [[v[i] for i in new] for v in values],
                                 what))
    return bad


def require_same(comm, inputs: dict, what: str, fix: str) -> None:
    """Collective over `comm` (None: one process). Like :func:`compare_inputs`, but a difference
    is an error: a :class:`ConfigError` on every rank (``agreed``: rank 0 prints the one line
    naming the ranks and their values, then `fix`; every rank exits 2), never a hang."""
    bad, values = _differing(comm, inputs)
    if not bad:
        return
    text = (f"ranks disagree on {what} ({_listing(bad, values)}): {fix}" if values is not None
            else f"ranks disagree on {what}: {fix}")  # the others: rank 0 names them
    err = ConfigError(text)
    err.agreed = True
    raise err


def _differing(comm, inputs: dict) -> tuple[list, "list | None"]:
    """(names whose value differs from rank 0's somewhere, on rank 0 every rank's shown values
    of those names; None elsewhere). Two buffer collectives; a gather only when some differ."""
    if comm is None or comm.Get_size() == 1:
        return [], None
    from mpi4py import MPI

    names = sorted(inputs)
    pairs = {k: v if isinstance(v, tuple) else (v, v) for k, v in inputs.items()}
    mine = np.array([digest(str(pairs[k][0])) for k in names], dtype=np.int64)
    root = mine.copy()
    comm.Bcast(root, root=0)
    flags = (mine != root).astype(np.int64)
    differ = np.zeros_like(flags)
    comm.Allreduce(flags, differ, op=MPI.MAX)
    bad = [k for k, d in zip(names, differ) if d]
    if not bad:
        return [], None
    return bad, comm.gather([str(pairs[k][1]) for k in bad], root=0)


def warning_line(bad: list, values: list, what: str) -> str:
    """The one line: for each differing input, each distinct value and the ranks that had it."""
    return (f"MDLOADER-AGREE warning: ranks' inputs to {what} differ ({_listing(bad, values)}); "
            "every rank uses rank 0's decision")


def _listing(bad: list, values: list) -> str:
    parts = []
    for i, name in enumerate(bad):
        by_value: dict = {}
        for rank, vals in enumerate(values):
            by_value.setdefault(vals[i], []).append(rank)
        shown = [f"{rank_text(r)} {v}" for v, r in list(by_value.items())[:SHOW]]
        more = len(by_value) - SHOW
        parts.append(f"{name}: " + "; ".join(shown) + (f"; and {more} more" if more > 0 else ""))
    return " | ".join(parts)


def rank_text(ranks: list) -> str:
    """``rank 0``, ``ranks 1-3``, ``ranks 0,2,5-7``."""
    spans, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            spans.append(str(start) if start == r else f"{start}-{r}")
            start = None
    word = "rank" if len(ranks) == 1 else "ranks"
    return f"{word} {','.join(spans)}"


def everywhere(comm, fn, *args, **kwargs):
    """Collective over `comm` (None: one process). ``fn(*args, **kwargs)`` on every rank; a
    failure on any rank raised on every rank (:func:`~.world.agree` on a bare communicator)."""
    from types import SimpleNamespace

    from .world import agree

    world = None if comm is None else SimpleNamespace(comm=comm, rank=comm.Get_rank(),
                                                      size=comm.Get_size())
    return agree(world, fn, *args, **kwargs)


def decide_once(comm, decide, *args, **kwargs):
    """Collective over `comm` (None: one process). ``decide(*args, **kwargs)`` run on rank 0
    only, its result broadcast to every rank. A failure there is raised on every rank (an
    ``agreed`` :class:`MDLoaderError`: rank 0 says it once) instead of leaving the others in
    the broadcast."""
    if comm is None or comm.Get_size() == 1:
        return decide(*args, **kwargs)
    out, err = None, None
    if comm.Get_rank() == 0:
        try:
            out = ("ok", decide(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - every rank raises it below
            err = exc
            out = ("error", type(exc).__name__, str(exc), isinstance(exc, MDLoaderError))
    out = comm.bcast(out, root=0)
    if out[0] == "ok":
        return out[1]
    if err is not None and not out[3]:
        raise err  # a bug: its traceback on rank 0
    exc = (type(err) if err is not None else MDLoaderError)(
        out[2] if out[3] else f"rank 0 failed: {out[1]}: {out[2]}")
    exc.agreed = True
    raise exc
