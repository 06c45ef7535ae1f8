"""Conversion in parts, over MPI ranks, forked workers (``--jobs``) or one process: what
:func:`convert.convert` runs.

The inputs' files (a folder's shards, or one file) are cut into *parts*: ranges of consecutive
structures of one file, of at most ``part_size`` each (default: about 16 a rank, 1 to 4,096
structures). Each part is taken by the first rank free (:class:`.claims.Claims`: a claim
file created atomically), converted, and spooled to ``OUT.parts/part-NNNNNN`` (written under a
temporary name and renamed when complete). Rank 0 meanwhile adds the finished parts, in part
order, to one file (:class:`..assemble.PartAssembler`: each array written in blocks of about
64 MB as soon as they wait, under ``OUT.parts/out.bp``), and converts a part itself only when
no finished part waits; at the end it writes what is left, renames the file to ``OUT`` and
removes the parts folder. So the output holds the same arrays, in the same order, with the same
splits, as one process converting every structure in source order, no two processes ever write
one file, and the one writer works while the others convert rather than after them. With
``writers`` > 1, W ranks do what rank 0 does here, each for its run of parts and its own file
(:mod:`.writers`).

Resume: the plan (inputs, their sizes and modification times, every option, the converter's
version, the parts) is saved as ``OUT.parts/plan.json``; a run that finds the same plan keeps
the finished parts and converts the rest, whatever its number of ranks (the file is rewritten
from all parts). A plan of other inputs or options is an error unless ``overwrite``; a plan
another version of the converter saved (:data:`PART_FORMAT`, the package's version) starts
again from nothing, saying so: its parts are never joined to this version's.

Crashes and second runs: rank 0 holds a lock on ``OUT.parts`` for the whole run
(:mod:`.lock`: a second conversion into the same ``OUT`` stops with one line; the kernel
drops the lock when its holder dies, so a killed run's resume is never blocked). A part, the
plan and the output are flushed to disk before their names appear (:mod:`...core.durable`),
so a crash cannot leave one that looks done with lost contents.

Errors: a rank that fails leaves its one line in the claims folder, after which no rank takes a
part; then every rank agrees (one reduction) and the lowest failing rank's line is raised on
every rank (exit 2 for bad input), naming the file and the structure index within it.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import traceback
from itertools import islice

import numpy as np

from ... import __version__
from ...core import durable
from ...core.errors import DataError, MDLoaderError
from ..writer import GraphWriter
from .claims import Claims, fork_workers
from .lock import NAME as LOCK_NAME

PART_SIZE_MAX = 4096
PARTS_A_RANK = 16
#: the format of a part folder and of ``plan.json``: raise it when either changes, so that a
#: resume never joins parts an older converter wrote (the package's version is compared too)
PART_FORMAT = 1


class Serial:
    """The few communicator calls this module makes, for one process without MPI."""

    rank, size = 0, 1

    def allreduce(self, value, op=None):
        return value

    def bcast(self, value, root=0):
        return value

    def allgather(self, value):
        return [value]

    def Barrier(self):
        pass


def agree(comm, err: BaseException | None) -> None:
    """Raise on every rank when any rank has an error: the lowest such rank's one line, said
    once (exit 2 for bad input, 1 with a traceback on that rank for anything else). One sum
    when no rank failed; the lines are gathered only when one did."""
    failed = int(err is not None)
    if comm.size > 1:
        failed = int(comm.allreduce(np.array([failed], dtype=np.int64))[0])
    if not failed:
        return
    said = None
    if isinstance(err, MDLoaderError):
        said = (str(err), err.exit_code)
    elif err is not None:
        traceback.print_exception(err, file=sys.stderr)
        said = (f"unexpected {type(err).__name__}: {err}", 1)
    every = comm.allgather(said) if comm.size > 1 else [said]
    msg, code = next(x for x in every if x is not None)
    out = DataError(msg)
    out.exit_code, out.agreed = code, True
    raise out


def _guard(comm, fn, *args):
    """``fn(*args)`` on this rank, then :func:`agree` on whether any rank failed."""
    err, value = None, None
    try:
        value = fn(*args)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - turned into one agreed line below
        err = exc
    agree(comm, err)
    return value


def shards_of(src: str, mod) -> list[str]:
    """The files `src` is read from (a folder: its shards), in source order."""
    return list(mod.shards(src)) if hasattr(mod, "shards") else [src]


def count_shards(comm, streams) -> list[np.ndarray]:
    """Structures in every shard of every stream, counted by the ranks in turn."""
    flat = [(s, sh) for s, (src, mod) in enumerate(streams) for sh in shards_of(src, mod)]

    def count():
        n = np.zeros(len(flat), dtype=np.int64)
        for i in range(comm.rank, len(flat), comm.size):
            s, sh = flat[i]
            n[i] = streams[s][1].count(sh)
        return n

    n = _guard(comm, count)
    n = comm.allreduce(n) if comm.size > 1 else n
    out, at = [], 0
    for src, mod in streams:
        k = len(shards_of(src, mod))
        out.append(n[at:at + k])
        at += k
        if out[-1].sum() <= 0:
            agree(comm, DataError(f"{src}: the input holds no structures"))
    return out


def make_parts(streams, counts, part_size: int) -> list[dict]:
    """The parts: ``{stream, shard, start, stop, first}`` (``first``: the index of ``start``
    within its stream); a source without ranges gives one part a shard."""
    parts = []
    for s, ((src, mod), ns) in enumerate(zip(streams, counts)):
        first = 0
        for shard, n in zip(shards_of(src, mod), ns.tolist()):
            step = part_size if hasattr(mod, "iterate_range") else n
            cuts = list(range(0, n, step)) + [n]
            hints = mod.offsets(shard, cuts) if hasattr(mod, "offsets") else [None] * len(cuts)
            for a, b, ha, hb in zip(cuts[:-1], cuts[1:], hints[:-1], hints[1:]):
                parts.append({"stream": s, "shard": shard, "start": a, "stop": b,
                              "first": first + a, "hint": None if ha is None else [ha, hb]})
            first += n
    return parts


def structures(mod, part) -> object:
    """The structures of one part, in source order."""
    if hasattr(mod, "iterate_range"):
        return mod.iterate_range(part["shard"], part["start"], part["stop"], part["hint"])
    return islice(mod.iterate(part["shard"]), part["start"], part["stop"])


def version() -> str:
    """The converter's version, as plans record it."""
    return f"mdloader {__version__}, part format {PART_FORMAT}"


def fingerprint(streams, options: dict) -> dict:
    """What a resumable run must match: the converter's version, the inputs (size, mtime) and
    every option."""
    files = []
    for src, mod in streams:
        for sh in shards_of(src, mod):
            st = os.stat(sh) if os.path.exists(sh) else None
            files.append([sh, st.st_size if st else 0, st.st_mtime_ns if st else 0])
    return {"version": version(), "files": files, "options": options}


def prepare(comm, work: str, plan: dict, build, overwrite: bool, lock=None) -> list[int]:
    """Take `lock` (rank 0; every rank learns the outcome before any writes), then save the plan
    in `work` with the parts `build()` makes (or check the plan there and keep its parts); the
    parts still to convert."""
    def check():
        if lock is not None:
            lock.take()
        path = os.path.join(work, "plan.json")
        if os.path.exists(path) and not overwrite:
            with open(path) as f:
                old = json.load(f)
            was = old.get("fingerprint", {}).get("version")
            if was != plan["fingerprint"]["version"]:
                print(f"mdloader convert: {work} was written by another version of mdloader "
                      f"convert ({was or 'one older than its version check'}; this is "
                      f"{plan['fingerprint']['version']}): its parts are not reused, converting "
                      "from the start", file=sys.stderr, flush=True)
            elif old.get("fingerprint") != plan["fingerprint"]:
                raise DataError(f"{work} holds an interrupted conversion of other inputs or "
                                "options: run that command again to finish it, or remove "
                                f"{work} (or pass --overwrite) to start this one")
            else:
                plan["parts"] = old["parts"]
                return True
        plan["parts"] = build()
        _empty(work)
        durable.write_text(path, json.dumps(plan))
        return False

    resumed = _guard(comm, check) if comm.rank == 0 else _guard(comm, lambda: None)
    resumed, plan["parts"] = comm.bcast((resumed, plan["parts"]), root=0)
    todo = [i for i in range(len(plan["parts"])) if not os.path.isdir(part_dir(work, i))]
    if resumed and comm.rank == 0:
        print(f"mdloader convert: resuming {work}: {len(plan['parts']) - len(todo)} of "
              f"{len(plan['parts'])} parts already done", file=sys.stderr, flush=True)
    return todo


def _empty(work: str, strict: bool = True) -> None:
    """`work` made and emptied, all but the lock file (held by this run); `strict`: an entry
    that cannot be removed is an error."""
    os.makedirs(work, exist_ok=True)
    for name in os.listdir(work):
        p = os.path.join(work, name)
        try:
            if name != LOCK_NAME:
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        except OSError:
            if strict:
                raise


def part_dir(work: str, i: int) -> str:
    """The folder of part `i` (present only once the part is complete)."""
    return os.path.join(work, f"part-{i:06d}")


def run_parts(comm, work: str, plan: dict, todo: list[int], convert_part, progress=None,
              assembler=None, jobs: int = 1, run: tuple[int, int] | None = None,
              writers: int = 1, lock=None):
    """Convert the parts of `todo` (in the order given), each taken by the first rank free
    (:class:`Claims`); a writer meanwhile feeds the finished parts of its `run` (default: all),
    in order, to its `assembler`, and converts only when none waits. Every rank then agrees on
    whether any failed. ``jobs > 1`` (one process, no MPI): ``jobs - 1`` forked workers convert
    beside this process. `writers`: how many ranks assemble (see :mod:`.writers`); `lock`:
    the output's lock, which a forked worker does not keep."""
    ident = comm.bcast(f"{os.getpid()}-{time.time_ns()}" if comm.rank == 0 else None, root=0)
    claims_dir = os.path.join(work, f"claims-{ident}")
    rank, size = comm.rank, comm.size
    if jobs > 1:
        rank, size = 0, jobs
    if rank == 0:
        os.makedirs(os.path.join(claims_dir, "failed"), exist_ok=True)
    comm.Barrier()
    parts, workers, err = plan["parts"], [], None
    run = run or (0, len(parts))

    def work_as(r: int) -> None:  # a forked worker's life
        if lock is not None:
            lock.close_inherited()
        mine = Claims(claims_dir, len(todo), r, jobs)
        try:
            _claim_loop(mine, parts, todo, work, convert_part)
        except Exception as exc:  # noqa: BLE001 - reported through the claims folder
            if not isinstance(exc, MDLoaderError):
                traceback.print_exc()
            mine.fail(exc)

    claims = Claims(claims_dir, len(todo), rank, size)
    try:
        if jobs > 1:
            workers = claims.workers = fork_workers(jobs, work_as)
        if assembler is not None or rank == 0:
            below = (len(todo) - (size - writers)
                     if assembler is not None and size > writers else None)
            seen = _Finished(parts, todo, work, progress) if (
                rank == 0 and writers > 1 and progress is not None) else None
            _root_loop(claims, parts, todo, work, convert_part, progress, assembler, run, below,
                       seen)
        else:
            _claim_loop(claims, parts, todo, work, convert_part)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - agreed on below
        err = exc
        claims.fail(exc)
    finally:
        for w in workers:
            w.join()
    if err is None and workers:
        err = claims.failure()
    _wait(comm)
    agree(comm, err)


def _claim_loop(claims: Claims, parts, todo, work, convert_part) -> None:
    """Take and convert parts until none is left (or a rank failed)."""
    while True:
        j = claims.take()
        if j is None:
            return
        convert_part(parts[todo[j]], part_dir(work, todo[j]))


def _root_loop(claims, parts, todo, work, convert_part, progress, assembler, run, below,
               seen) -> None:
    """A writer: assemble every finished part of its `run` in order; convert one when none
    waits (below `below` in the claim order while its run is unfinished, leaving the last
    parts to the ranks that only convert); then help convert the rest. Rank 0 reports the
    parts finished anywhere (`seen`) when it is one writer of several."""
    lo, hi = run
    nxt = lo + assembler.parts if assembler is not None else hi
    pending = set(todo)
    whole = (lo, hi) == (0, len(parts))  # the one writer: done when its run is
    more = True
    while True:
        fed = 0
        while nxt < hi and os.path.isdir(part_dir(work, nxt)):
            assembler.add(part_dir(work, nxt))
            if progress is not None and seen is None and nxt in pending:
                progress(parts[nxt]["stop"] - parts[nxt]["start"])
            nxt, fed = nxt + 1, fed + 1
        if seen is not None:
            seen.poll(force=not more)
        if claims.failed():
            return
        if more and not fed:
            j = claims.take(below if nxt < hi else None)
            if j is not None:
                convert_part(parts[todo[j]], part_dir(work, todo[j]))
                if assembler is None and progress is not None:
                    progress(parts[todo[j]]["stop"] - parts[todo[j]]["start"])
                continue
            more = nxt < hi and below is not None and claims.known.find(b"\0") >= 0
        if nxt >= hi and (whole or not more) and (seen is None or not seen.left):
            return
        if not fed:
            time.sleep(0.005)


class _Finished:
    """Rank 0's progress when several ranks write: the parts found finished, looked for at
    most once a second (one listing of the parts folder: a part's folder appears complete)."""

    def __init__(self, parts, todo, work, progress):
        self.parts, self.work, self.progress = parts, work, progress
        self.left, self.at = set(todo), 0.0

    def poll(self, force: bool = False) -> None:
        now = time.monotonic()
        if not self.left or now - self.at < (0.1 if force else 1.0):
            return
        self.at = now
        for name in os.listdir(self.work):
            i = int(name[5:]) if name.startswith("part-") and name[5:].isdigit() else -1
            if i in self.left:
                self.left.discard(i)
                self.progress(self.parts[i]["stop"] - self.parts[i]["start"])


def _wait(comm) -> None:
    """Every rank here, without spinning a core in MPI while rank 0 still assembles."""
    if comm.size == 1:
        return
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.005)


def finish(comm, work: str, out: str, assembler, nparts: int, overwrite: bool,
           lock=None) -> tuple:
    """Rank 0 adds the parts `assembler` has not taken yet, ends the file (written under a
    temporary name, flushed to disk) and renames it to `out`; then the ranks remove `work`
    and rank 0 drops `lock` (each rank the parts
    ``rank, rank + size, ...``, so removing them is not one rank's tail).
    Every rank gets ``(counts, notes)`` (the assembler's: what the parts left out)."""
    def write_out():
        try:
            while assembler.parts < nparts:
                assembler.add(part_dir(work, assembler.parts))
            counts = assembler.close()
        except BaseException:
            assembler.discard()
            raise
        if os.path.exists(out):
            if not overwrite:
                raise DataError(f"{out} appeared while converting; pass --overwrite to replace it")
            shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)
        durable.replace(assembler.path, out)
        return counts, assembler.notes()

    result = _guard(comm, write_out) if comm.rank == 0 else _guard(comm, lambda: None)
    result = comm.bcast(result, root=0)
    clean(comm, work, nparts, lock)
    return result


def clean(comm, work: str, nparts: int, lock=None) -> None:
    """The ranks remove `work` (each the parts ``rank, rank + size, ...``, so removing them is
    not one rank's tail); rank 0 removes the lock file last and drops the lock."""
    for i in range(comm.rank, nparts, comm.size):
        shutil.rmtree(part_dir(work, i), ignore_errors=True)
    comm.Barrier()
    if comm.rank != 0:
        return
    if lock is None:
        shutil.rmtree(work, ignore_errors=True)
        return
    _empty(work, strict=False)
    lock.release(remove=True)


def spool_part(folder: str, graphs, meta: dict, labels, chunk_bytes: int | None = None) -> None:
    """Spool `graphs` (``(label, graph)`` pairs) as the part `folder`."""
    w = GraphWriter(folder + ".out", labels=labels, in_memory=True)
    try:
        for label, g in graphs:
            w.add(label, g)
        w.save_part(folder, meta)
    except BaseException:
        w.discard()
        raise
