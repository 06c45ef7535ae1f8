"""Loading: a rank's block of one file or several, read and encoded into its store in chunks.

A load never holds the block twice. Each rank first sizes its records from the files' count
arrays alone (``variable_count``, :func:`.budget.record_sizes`: a record's size follows from its
arrays' shapes), checks the load's peak against ``max_memory_per_rank`` (:func:`.budget.check`)
before it reads a byte of data, allocates its window of exactly that size, and then streams:
a chunk of about :func:`.budget.load_chunk` bytes of records is read (one box read a key, the
reading cost model of :mod:`~mdloader_plugin.sources.adios`), its samples are encoded one by
one into the window, and the chunk is dropped before the next is read. After the index is
built the freed heap goes back to the OS (``malloc_trim``). The peak is the records, the index
and about two chunks (``bench/store/load_peak.py`` measures it; figures in docs/how-it-works.md).

With ``replicate="copy"`` (:mod:`.replicate`) only one rank a block streams it from the file;
the others allocate their window from the broadcast sizes and receive the bytes.

Before any of that the ranks agree that they load the same data: a rank whose file (path or
size on disk) differs from the others' is a :class:`~mdloader_plugin.core.errors.DataError`
on every rank, naming the ranks and the files.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace

import numpy as np

from ..core.blocks import block_bounds
from ..core.errors import DataError
from ..core.log import get_logger
from ..core.units import mib, parse_bytes
from ..mpi import groups
from ..mpi.agree import require_same
from ..mpi.world import agree, allreduce_number
from ..records import codec
from ..sources.adios import GraphFile
from ..sources.multi import ID_KEY, MultiSource
from . import budget as mem, replicate
from .options import StoreOptions


class FileSource:
    """`label` of one ADIOS2 file, read a rank's block at a time (rank-local)."""

    def __init__(self, path, label: str, keys=None):
        self.what = f"{path} [{label}]"
        self.path, self.label = str(path), label
        self.counted, self.in_all = self.path, ""  # for "N samples but the job has P ranks"
        self.file = GraphFile(path)
        try:
            self.info = info = self.file.info(label)
            if info.ndata == 0:
                raise DataError(f"{path}: label {label!r} holds no samples (ndata=0); "
                                "choose a label that has samples")
            for k in keys or ():
                if k not in info.keys:
                    raise DataError(f"{path}: key {k!r} not in {label} "
                                    f"(keys: {', '.join(info.keys)})")
            self.keys = list(info.keys) if keys is None else list(keys)
        except BaseException:
            self.file.close()
            raise

    @property
    def num_samples(self) -> int:
        return self.info.ndata

    def sizes(self, lo: int, hi: int) -> np.ndarray:
        return mem.record_sizes(self.file, self.info, self.keys, lo, hi)

    def total_records(self, lo: int, hi: int) -> int:
        return mem.predict_total(self.info, self.keys)

    def pieces(self, lo: int, hi: int):
        """``(file, info, keys, start, stop, extra arrays)`` making up ids ``lo..hi-1``."""
        return [(self.file, self.info, self.keys, lo, hi, {})]

    def meta(self, log: bool = False) -> dict:
        return {"path": self.path, "label": self.label, "keys": list(self.keys),
                "attributes": self.file.global_attributes()}

    def close(self) -> None:
        self.file.close()


class MultiFileSource:
    """Several files as one source (:mod:`~mdloader_plugin.sources.multi`), rank-local."""

    def __init__(self, specs, label: str, keys=None, required=()):
        self.what = f"{len(specs)} data sets [{label}]"
        self.specs, self.label = specs, label
        self.counted, self.in_all = ", ".join(x.path for x in specs), " in all"
        self.src = MultiSource(specs, label, keys, required)

    @property
    def num_samples(self) -> int:
        return self.src.num_samples

    def sizes(self, lo: int, hi: int) -> np.ndarray:
        return mem.multi_record_sizes(self.src, lo, hi)

    def total_records(self, lo: int, hi: int) -> int | None:
        return None  # the budget's default: ranks blocks like this one

    def pieces(self, lo: int, hi: int):
        s = self.src
        return [(s.files[d], s.infos[d], s.keys, a, b,
                 {ID_KEY: np.full((1, 1), d, dtype=np.int64)}) for d, a, b in s.pieces(lo, hi)]

    def meta(self, log: bool = False) -> dict:
        """What the store keeps of the files; `log`: warn of dropped keys (one rank does)."""
        s = self.src
        if s.dropped and log:
            get_logger(0).warning("; ".join(f"key {k!r} dropped: missing from {', '.join(v)}"
                                            for k, v in s.dropped.items()))
        return {"path": [x.path for x in self.specs], "label": self.label, "keys": list(s.keys),
                "attributes": s.attributes(), "dataset_names": list(s.names),
                "dataset_starts": s.starts.tolist(),
                "dataset_weights": [x.weight for x in self.specs], "dropped_keys": s.dropped}

    def close(self) -> None:
        self.src.close()


def chunks(sizes: np.ndarray, chunk: int):
    """``(start, stop)`` runs of `sizes` of at most `chunk` bytes each (one sample at least)."""
    cum = np.cumsum(sizes)
    start = 0
    while start < sizes.size:
        base = int(cum[start - 1]) if start else 0
        stop = max(int(np.searchsorted(cum, base + chunk, side="right")), start + 1)
        yield start, stop
        start = stop


def stream(source, lo: int, hi: int, buf: np.ndarray, offs: np.ndarray, sizes: np.ndarray,
           chunk: int, progress: bool = False) -> int:
    """Rank-local. Read ids ``lo..hi-1`` of `source` a chunk at a time and encode every sample
    into `buf` at its offset; return the bytes read. A record whose size is not the one its
    counts gave is a DataError (the file's counts and arrays disagree)."""
    bar = _bar(hi - lo) if progress else None
    nread, i0 = 0, 0
    for f, info, keys, a, b, extra in source.pieces(lo, hi):
        for s, e in chunks(sizes[i0:i0 + b - a], chunk):
            block = f.read_block(info.label, a + s, a + e, keys, info)
            nread += block.nbytes_read
            for j, sample in enumerate(block, start=i0 + s):
                n = codec.encode_into(buf, int(offs[j]), {**sample, **extra} if extra else sample)
                if n != sizes[j]:
                    raise DataError(f"{f.path}: sample {a + j - i0} of {info.label} encodes to "
                                    f"{n} bytes but its variable_count entries give "
                                    f"{int(sizes[j])}; the file is corrupt")
            del block
            if bar is not None:
                bar.update(e - s)
        i0 += b - a
    if bar is not None:
        bar.close()
    return nread


def load(cls, world, open_source, paths, opts: StoreOptions):
    """Collective. The store of this rank's block of ``open_source()`` (a :class:`FileSource`
    or :class:`MultiFileSource`, opened on the ranks that read), built by `cls`.from_records."""
    t0 = time.perf_counter()
    check_same_data(world, paths)
    nodes = 1 if world is None else int(np.unique(world.node_of).size)
    mode = agree(world, replicate.resolve, opts.replicate, nodes)
    group = groups.make(world, opts.group_size)
    opts = replace(opts, group_size=group,
                   max_memory_per_rank=agree(world, parse_bytes, opts.max_memory_per_rank))
    holder = world if group is None else group
    copy = mode == "copy" and group is not None and group.count > 1
    comm, root = replicate.cross(world, group) if copy else (None, None)
    reads = not copy or group.index == root
    src, ranks = [], _size(holder)
    r = 0 if holder is None else holder.rank
    try:
        def size_block():  # rank-local: open, size this rank's block, check the budget
            if not reads:
                return None
            src.append(open_source())
            n = src[0].num_samples
            if n < ranks:
                raise DataError(f"{src[0].counted}: {src[0].label} has {n} samples"
                                f"{src[0].in_all} but the job has {ranks} ranks; run with at "
                                f"most {n} ranks")
            b = block_bounds(n, ranks)
            lo, hi = int(b[r]), int(b[r + 1])
            sizes = src[0].sizes(lo, hi)
            mem.check(src[0].what, r, ranks, int(sizes.sum()), hi - lo, n,
                      opts.max_memory_per_rank, digests=opts.digests, kind=opts.index,
                      ranks_sharing=sharing(holder, opts.index_share),
                      chunk=opts.load_chunk_bytes, total_records=src[0].total_records(lo, hi))
            return n, src[0].meta(log=r == 0), sizes, lo, hi

        got = agree(world, size_block)
        if copy:
            (n, meta), sizes = replicate.bcast_block(comm, root, got and got[:2], got and got[2])
            meta = meta if reads else {**meta, "bytes_read": 0}
        else:
            n, meta, sizes = got[:3]
        chunk = mem.load_chunk(int(sizes.sum()), opts.load_chunk_bytes)
        progress = _rank(world) == 0 and sizes.size >= 20000

        def fill(buf, offs):
            def mine():
                return stream(src[0], got[3], got[4], buf, offs, sizes, chunk, progress) \
                    if reads else 0
            meta["bytes_read"] = agree(world, mine) if copy else mine()
            if copy:
                replicate.bcast_records(comm, root, buf)

        store = cls.from_records(world, sizes, fill, n, meta=meta, options=opts)
    finally:
        for s in src:
            s.close()
        if comm is not None:
            comm.Free()
    del sizes, got
    trim_heap()
    _report(store, world, group, "copy" if copy else "read", chunk, src[0].what if src else
            meta.get("label", ""), time.perf_counter() - t0)
    return store


def _report(store, world, group, mode: str, chunk: int, what: str, seconds: float) -> None:
    meta = store.meta
    total = allreduce_number(world.comm, int(meta["bytes_read"])) if _size(world) > 1 \
        else meta["bytes_read"]
    meta.update(load_s=seconds, bytes_read_all_ranks=int(total), replicate=mode,
                load_chunk_bytes=int(chunk))
    rep, n = store.memory_report(), store.num_samples
    get_logger(_rank(world)).info(
        f"loaded {what}: {n} samples on {_size(world)} ranks{_groups(group)} in "
        f"{seconds:.2f} s{_copied(group, mode)}; read {mib(meta['bytes_read'])} on rank 0, "
        f"{mib(total)} on all ranks; memory on rank 0: records {mib(rep['records_bytes'])}, "
        f"index {mib(rep['index_bytes'])} ({rep['index_bytes'] / n:.2f} B a sample, "
        f"{rep['index_kind']}), load peak bound {mib(rep['load_peak_bytes'])}")


def check_same_data(world, paths, label: str | None = None) -> None:
    """Collective. Every rank names the same data (absolute paths, bytes on disk, the label),
    else one error on every rank naming the ranks and their files (exit 2), before any rank
    reads a byte: ranks given different files would otherwise build mismatched stores. Two
    reductions of a digest (:func:`~mdloader_plugin.mpi.agree.require_same`); the names travel
    only when they differ."""
    if world is None or world.size == 1:
        return
    text = data_identity(paths, label)
    require_same(world.comm, {"data": text}, "the data files",
                 "give every rank the same file(s) (the same path, the same copy)")


def data_identity(paths, label: str | None = None) -> str:
    """What names a data set: each file's :func:`file_identity` and the label
    (``/abs/a.bp (N bytes) [trainset]``); what ranks compare at load and a loader state records."""
    return ", ".join(file_identity(p) for p in paths) + (f" [{label}]" if label else "")


def file_identity(item) -> str:
    """``/abs/path (N bytes)``; a folder (an ADIOS2 ``.bp``) counts its files' bytes, a joined
    data set's (:mod:`..sources.joined`) those of its files' folders too."""
    if not isinstance(item, (str, os.PathLike)):
        return str(item)
    p = os.path.abspath(os.fspath(item))
    try:
        if os.path.isdir(p):
            size = sum(e.stat().st_size if e.is_file() else sum(
                f.stat().st_size for f in os.scandir(e.path) if f.is_file())
                for e in os.scandir(p) if e.is_file() or e.is_dir())
        else:
            size = os.stat(p).st_size
    except OSError:
        return f"{p} (missing)"
    return f"{p} ({size} bytes)"


def trim_heap() -> None:
    """Hand freed heap back to the OS. glibc keeps freed memory for reuse: after loading, each
    rank kept about its block size again on top of the store (measured: +30 MiB a rank for a
    34 MiB block on 2 ranks, gone after ``malloc_trim``). Best effort: a no-op where libc has
    no malloc_trim."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def sharing(holder, share: str) -> int:
    """Ranks one index copy serves: the node's ranks with ``index_share: node``, else 1."""
    return holder.local_size if share == "node" and holder is not None else 1


def _bar(total: int):
    from tqdm import tqdm

    return tqdm(total=total, desc="mdloader: store", unit="graph")


def _size(world) -> int:
    return 1 if world is None else world.size


def _rank(world) -> int:
    return 0 if world is None else world.rank


def _copied(group, mode: str) -> str:
    if group is None or group.count == 1:
        return ""
    return " (read once, copied across groups)" if mode == "copy" else " (each group read the file)"


def _groups(group) -> str:
    if group is None or group.count == 1:
        return ""
    return f" ({group.count} replica groups of {group.size})"

