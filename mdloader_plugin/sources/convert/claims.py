"""Who converts which part: claim files, so MPI ranks, forked workers (``--jobs``) and one
process share one rule (see :mod:`.parallel`)."""

from __future__ import annotations

import json
import os

from ...core.errors import DataError, MDLoaderError


class Claims:
    """Which rank converts which part, agreed through the file system: a part is taken by the
    rank that creates its claim file (``O_EXCL``, atomic on local and parallel file systems),
    so MPI ranks, forked workers and one process share one rule. A rank first tries the part
    one round (`size`) after its last, then the next free one, then any it skipped; a failure
    leaves ``failed-RANK`` (its one line), after which no rank takes a part."""

    def __init__(self, folder: str, n: int, rank: int, size: int):
        self.folder, self.n, self.rank, self.size = folder, n, rank, size
        self.known = bytearray(n)  # parts this rank knows are taken
        self.at = rank

    def take(self, below: int | None = None) -> int | None:
        """A part index (into the to-do list) now this rank's, or None when none is left (or
        none below `below`, or a rank failed)."""
        while not self.failed():
            j = self.known.find(b"\0", min(self.at, self.n))
            j = self.known.find(b"\0") if j < 0 else j
            if j < 0 or (below is not None and j >= below):
                return None
            self.known[j] = 1
            try:
                os.close(os.open(os.path.join(self.folder, f"{j:06d}"),
                                 os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                self.at = j + 1
                continue
            self.at = j + self.size
            return j
        return None

    workers: list = []  # forked workers (``--jobs``): one that died is a failure

    def failed(self) -> bool:
        return bool(os.listdir(os.path.join(self.folder, "failed"))) or any(
            w.exitcode not in (None, 0) for w in self.workers)

    def fail(self, exc: BaseException) -> None:
        """Leave this rank's one line; no rank takes a part after it."""
        code = getattr(exc, "exit_code", 1) if isinstance(exc, MDLoaderError) else 1
        msg = (str(exc) if isinstance(exc, MDLoaderError)
               else f"unexpected {type(exc).__name__}: {exc}")
        path = os.path.join(self.folder, "failed", f"{self.rank:06d}")
        with open(path + ".tmp", "w") as f:
            json.dump([msg, code], f)
        os.replace(path + ".tmp", path)

    def failure(self) -> DataError | None:
        """The lowest failed rank's error (forked workers report through here), or a line
        for a worker that died without one."""
        folder = os.path.join(self.folder, "failed")
        names = sorted(f for f in os.listdir(folder) if not f.endswith(".tmp"))
        if not names:
            dead = [w.exitcode for w in self.workers if w.exitcode not in (None, 0)]
            return DataError(f"a conversion worker died (exit code {dead[0]}); run the "
                             "command again to resume") if dead else None
        with open(os.path.join(folder, names[0])) as f:
            msg, code = json.load(f)
        out = DataError(msg)
        out.exit_code = code
        return out


def fork_workers(k: int, loop) -> list:
    """``k - 1`` forked processes running ``loop(rank)`` for ranks ``1..k-1`` (``--jobs``)."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(loop, r), daemon=True) for r in range(1, k)]
    for p in procs:
        p.start()
    return procs


def _worker(loop, rank: int) -> None:
    try:
        loop(rank)
    except KeyboardInterrupt:
        os._exit(130)
