"""Several writers (``mdloader convert --writers W``): W ranks each assemble one run of
consecutive parts into a file of their own, side by side, and the output is the folder of those
files read as one data set (:mod:`..joined`).

Why: one writer moves every byte of the output through one rank, and keeps up with a few tens of
converting ranks of OC20-like structures (``bench/convert/rate.py``; the figure is in
docs/own-data.md); past that the rate is the writer's. With W writers each writes 1/W of the
bytes, in parallel.

Rules (all computed from the plan, the same on every rank): the parts are cut into W runs of
about equal structures (:func:`groups`); writer ``w`` is rank ``w * P // W`` (spread over the
job's nodes when ranks are placed node by node); the parts are claimed in an order that walks
the W runs at the same pace (:func:`claim_order`), so every writer has parts waiting all along
rather than the last writer all of its parts at the end. Before closing, the writers agree on
every key's shapes (:func:`..assemble.agree_shapes`: a key's varying dimension is the one one
file of all the graphs would have); rank 0 then moves the files into ``OUT`` beside the
manifest. The joined data set reads back byte for byte as the one file ``--writers 1`` writes.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

from ...core import durable
from ...core.errors import ConfigError, DataError
from ..assemble import agree_shapes
from ..joined import write_manifest


def check(writers: int, ranks: int, jobs: int) -> None:
    """A ConfigError for a writer count this run cannot have."""
    if writers < 1:
        raise ConfigError("--writers must be >= 1")
    if writers > 1 and jobs > 1:
        raise ConfigError("--writers is for MPI ranks (mpiexec -n P ... --writers W); with "
                          "--jobs one process writes")
    if writers > ranks:
        raise ConfigError(f"--writers {writers} needs at least {writers} ranks (this run has "
                          f"{ranks}); use at most one writer a rank, about one for every 16")


def groups(parts: list[dict], writers: int) -> list[tuple[int, int]]:
    """``[(first, stop)]``: the parts writer ``w`` assembles, W runs of consecutive parts with
    about as many structures each (none empty; at most one run a part)."""
    w = max(1, min(writers, len(parts)))
    ends = np.cumsum([p["stop"] - p["start"] for p in parts])
    cuts = [0]
    for i in range(1, w):
        c = int(np.searchsorted(ends, ends[-1] * i / w, side="left")) + 1
        cuts.append(min(max(c, cuts[-1] + 1), len(parts) - (w - i)))
    cuts.append(len(parts))
    return list(zip(cuts[:-1], cuts[1:]))


def writer_rank(w: int, ranks: int, writers: int) -> int:
    """The rank of writer `w`."""
    return w * ranks // writers


def mine(rank: int, ranks: int, runs: list[tuple[int, int]]) -> int | None:
    """The writer this rank is (its index into `runs`), or None."""
    for w in range(len(runs)):
        if writer_rank(w, ranks, len(runs)) == rank:
            return w
    return None


def claim_order(todo: list[int], runs: list[tuple[int, int]]) -> list[int]:
    """`todo` in the order the ranks take them: through every run at the same pace (by the
    fraction of the run a part is at), so that each writer's parts arrive all along."""
    if len(runs) == 1:
        return list(todo)
    starts = np.array([a for a, _ in runs])
    lengths = np.array([b - a for a, b in runs], dtype=np.float64)
    idx = np.asarray(todo, dtype=np.int64)
    w = np.searchsorted(starts, idx, side="right") - 1
    return idx[np.lexsort((w, (idx - starts[w]) / lengths[w]))].tolist()


def sub_file(work: str, w: int) -> str:
    """Where writer `w` writes its file while the run lasts."""
    return os.path.join(work, f"out-{w:04d}.bp")


def finish(comm, work: str, out: str, assembler, run: tuple[int, int] | None, nruns: int,
           vdims: dict, overwrite: bool, part_dir, guard) -> tuple:
    """Each writer adds the rest of its run; the writers agree on the keys' shapes and close
    their files; rank 0 moves them into `out` (written as ``OUT.parts/joined`` and renamed) with
    the manifest. Every rank gets ``(counts, notes)`` (what the parts left out, over all the
    writers)."""
    def add_rest():
        if assembler is None:
            return None
        while run[0] + assembler.parts < run[1]:
            assembler.add(part_dir(work, run[0] + assembler.parts))
        return assembler.shapes_seen()

    seen = comm.gather(_or_discard(guard, comm, add_rest, assembler), root=0)
    shapes = _or_discard(guard, comm, lambda: agree_shapes(seen, vdims, out) if comm.rank == 0
                         else None, assembler)
    shapes = comm.bcast(shapes, root=0)

    def close():
        if assembler is None:
            return None
        return assembler.close(shapes), assembler.notes()

    closed = comm.gather(_or_discard(guard, comm, close, assembler), root=0)

    def join():
        folder = os.path.join(work, "joined")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        mine_ = [c for c in closed if c is not None]
        names = [f"sub-{w:04d}.bp" for w in range(nruns)]
        for w, name in enumerate(names):
            os.replace(sub_file(work, w), os.path.join(folder, name))
        labels = list(mine_[0][0])
        counts = write_manifest(folder, names)
        if counts != {lab: sum(c[0][lab] for c in mine_) for lab in labels}:
            raise DataError(f"{out}: the files hold {counts} graphs, not what the writers "
                            "wrote; convert it again")
        if os.path.exists(out):
            if not overwrite:
                raise DataError(f"{out} appeared while converting; pass --overwrite to replace it")
            shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)
        durable.replace(folder, out)  # every file flushed before the name appears
        return counts, {"dropped": sorted({f for c in mine_ for f in c[1]["dropped"]}),
                        "cut": [sum(c[1]["cut"][i] for c in mine_) for i in (0, 1)]}

    result = guard(comm, join) if comm.rank == 0 else guard(comm, lambda: None)
    return comm.bcast(result, root=0)


def _or_discard(guard, comm, fn, assembler):
    """`fn()` agreed on by every rank; a writer's file is dropped when any rank failed."""
    try:
        return guard(comm, fn)
    except BaseException:
        if assembler is not None:
            assembler.discard()
        raise
