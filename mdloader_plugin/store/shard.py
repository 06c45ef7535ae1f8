"""This rank's samples in one contiguous buffer, and where every sample of the job lives.

Every rank owns a contiguous block of sample ids (``block_starts[r] .. block_starts[r+1]-1``) and
holds their codec records end to end in one uint8 buffer. The global index — for every sample id
its owner rank, offset in the owner's buffer and record length — is the same on every rank, so a
backend can fetch any sample without asking anyone where it is.

With replica groups (:mod:`.groups`, ``group_size`` W < P) all of this holds inside each group of
W ranks: blocks, owners and the window are the group's, ``owner_of`` answers a rank of the group,
and every group holds the whole data set: each rank reads its block of W from the file (the file
is read P / W times in all), or with ``replicate="copy"`` the file is read once and the blocks
are broadcast across groups (:mod:`.replicate`).

Under MPI the buffer is allocated by ``MPI_Win_allocate`` (once, never moved): that is the memory
the one-sided backend reads from, and with OpenMPI on one node it is shared memory that a Get
reads directly, with no help from the owner. Memory per rank is the records plus the global index
(:mod:`.index`: about 2.1 bytes a global sample compact, 16 ``full``, +8 with digests; a
node-shared compact index counts once a node).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..core.blocks import block_bounds, exclusive_offsets, owner_of
from ..core.errors import DataError, MemoryBudgetError, internal
from ..records import codec
from . import budget as mem, replicate
from ..core.log import get_logger
from ..core.units import mib, parse_bytes
from ..mpi import groups
from ..mpi.world import agree, allreduce_number
from ..sources.adios import GraphFile
from ..sources.multi import MultiSource, parse_specs
from .index import FullIndex, bound_bytes, check_choice
from .index_build import allgather_blocks, build_index


@dataclass
class ShardStore:
    """Records of this rank's samples plus the global index.

    Attributes:
        buffer: uint8 array of this rank's records (exposed through ``window`` when size > 1).
        block_starts: ``[W + 1]`` first sample id of every group rank's block (W = P: no groups).
        offsets: ``[N]`` offset of every sample's record in its owner's buffer (an array, or the
            index's on-demand :class:`~.index.Column`: ``offsets[ids]`` either way).
        nbytes: ``[N]`` record length of every sample (likewise).
        meta: label, keys, path and global attributes of the source.
        digests: ``[N]`` 8-byte digest of every record (only if built with ``digests=True``).
        group: this rank's replica group (:class:`~mdloader_plugin.mpi.groups.Group`), None on one
            process without MPI.
        index: the global index answering both (:mod:`.index`); made from `offsets` and
            `nbytes` when not given.
    """

    world: object
    buffer: np.ndarray
    block_starts: np.ndarray
    offsets: np.ndarray
    nbytes: np.ndarray
    meta: dict = field(default_factory=dict)
    digests: np.ndarray | None = None
    window: object = None
    group: object = None
    _readers: int = 0
    index: object = None
    _closed: bool = field(default=False, init=False, repr=False)

    def __post_init__(self):
        if self.index is None:
            self.index = FullIndex(self.block_starts, self.offsets, self.nbytes)

    # -- queries ---------------------------------------------------------------------------
    @property
    def num_samples(self) -> int:
        return int(self.offsets.size)

    @property
    def local_range(self) -> tuple[int, int]:
        holder = self.group if self.group is not None else self.world
        r = holder.rank if holder is not None else 0
        return int(self.block_starts[r]), int(self.block_starts[r + 1])

    def owner_of(self, ids: np.ndarray) -> np.ndarray:
        """Rank (inside this rank's group) that holds each of `ids`."""
        return owner_of(self.block_starts, ids)

    def local_record(self, sample_id: int) -> np.ndarray:
        self._check_open(f"sample {sample_id}")
        lo, hi = self.local_range
        if not lo <= sample_id < hi:
            raise IndexError(f"sample {sample_id} is not on this rank (owns {lo}..{hi - 1})")
        o, n = int(self.offsets[sample_id]), int(self.nbytes[sample_id])
        return self.buffer[o:o + n]

    def memory_report(self) -> dict:
        """This rank's bytes: ``records_bytes`` (its buffer) and ``index_bytes`` (its share of
        the global index, digests included; ``index_shared_bytes`` is a node-shared index's
        whole size, counted ``1 / ranks_per_node`` in ``index_bytes``)."""
        rep = {"records_bytes": int(self.buffer.nbytes), **self.index.memory_bytes(),
               "index_kind": self.index.describe(),
               "samples_local": self.local_range[1] - self.local_range[0],
               "samples_global": self.num_samples, "dataset_bytes": int(self.nbytes.sum())}
        if self.digests is not None:
            rep["index_bytes"] += int(self.digests.nbytes)
        return rep

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_records(cls, world, sizes: Sequence[int], fill: Callable[[np.ndarray, np.ndarray], None],
                     num_samples: int, meta: Mapping | None = None, digests: bool = False,
                     max_memory_per_rank: int | None = None,
                     group_size=None, index: str = "compact",
                     index_share: str = "rank") -> "ShardStore":
        """Collective. Allocate this rank's buffer for records of `sizes`, let `fill(buf, offs)`
        write them, then exchange the index.

        Every rank must pass the sizes of exactly its block (``block_bounds`` over its group;
        `group_size`: an int, None for all ranks, or a :class:`~.groups.Group`). `index`:
        ``"compact"`` or ``"full"``; `index_share`: ``"rank"`` or ``"node"`` (one compact copy a
        node in shared memory), see :mod:`.index`."""
        group = groups.make(world, group_size)
        holder = world if group is None else group

        max_memory_per_rank = parse_bytes(max_memory_per_rank)
        sizes = np.asarray(sizes, dtype=np.int64)
        offs = exclusive_offsets(sizes)
        total = int(sizes.sum())
        agree(world, check_choice, index, index_share)
        agree(world, _check_budget, total, num_samples, max_memory_per_rank, digests, index,
              _sharing(holder, index_share), _size(holder))
        buf, win = _allocate(holder, total)
        fill(buf, offs)
        dig = _record_digests(buf, offs, sizes) if digests else None
        idx = build_index(holder, sizes, block_bounds(num_samples, _size(holder)), index,
                          index_share)
        g_dig = None if dig is None else allgather_blocks(holder, dig, num_samples)
        return cls(world, buf, idx.block_starts, idx.offsets, idx.nbytes,
                   meta=dict(meta or {}), digests=g_dig, window=win, group=group, index=idx)

    @classmethod
    def from_samples(cls, world, local_samples: Iterable[Mapping[str, np.ndarray]],
                     num_samples: int, progress: bool = False, **kw) -> "ShardStore":
        """Collective. Store this rank's samples (dicts of arrays), e.g. a block read from a file."""
        samples = list(local_samples)
        sizes = agree(world, _record_sizes, samples)
        fill = _encoder(samples, progress and (world is None or world.rank == 0))
        return cls.from_records(world, sizes, fill, num_samples, **kw)

    @classmethod
    def from_file(cls, world, path: str, label: str = "trainset", keys=None,
                  **kw) -> "ShardStore":
        """Collective. Each rank reads only its own block of `label` from an ADIOS2 file.

        With ``max_memory_per_rank`` (bytes or ``"4GiB"``) every rank first predicts its store's
        size from the file's metadata (:mod:`.budget`) and the job stops before reading any data
        if one would not fit, saying how many ranks would. With ``group_size`` W each rank reads
        its block of W (:mod:`.groups`), or with ``replicate="copy"`` one group's rank reads it
        and copies it to the others (:mod:`.replicate`)."""
        return cls._load(world, _read_block, (path, label, keys), f"{path} [{label}]", **kw)

    @classmethod
    def from_files(cls, world, specs, label: str = "trainset", keys=None, required=(),
                   **kw) -> "ShardStore":
        """Collective. Several files, each a named data set, as one store with one global index
        (:mod:`.sources.multi`): data set ``d`` holds ids ``meta["dataset_starts"][d]..``, every
        sample carries its id in ``dataset_name``; keys are the common set (`required` ones
        must be in every file)."""
        specs = parse_specs(specs)
        what = f"{len(specs)} data sets [{label}]"
        return cls._load(world, _read_multi_block, (specs, label, keys, tuple(required)), what,
                         **kw)

    @classmethod
    def _load(cls, world, read, args: tuple, what: str, **kw) -> "ShardStore":
        """Collective. `read(world, *args, budget, digests)` gives ``(ndata, samples, meta)``
        of this rank's block; store them and log what was loaded."""
        import time

        t0 = time.perf_counter()
        kw["max_memory_per_rank"] = agree(world, parse_bytes, kw.get("max_memory_per_rank"))
        nodes = 1 if world is None else int(np.unique(world.node_of).size)
        mode = agree(world, replicate.resolve, kw.pop("replicate", None), nodes)
        kw["group_size"] = group = groups.make(world, kw.get("group_size"))
        holder = world if group is None else group
        if mode == "copy" and group is not None and group.count > 1:
            store, block, meta = cls._load_copied(world, group, read, args, **kw)
            ndata = store.num_samples
        else:
            mode = "read"
            ndata, block, meta = agree(world, read, holder, *args, kw["max_memory_per_rank"],
                                       bool(kw.get("digests")), _index_kw(holder, kw))
            store = cls.from_samples(world, block, ndata, meta=meta, progress=True, **kw)
        del block
        _trim_heap()
        if world is not None and world.size > 1:
            total_read = allreduce_number(world.comm, int(meta["bytes_read"]))  # GIL-free
        else:
            total_read = meta["bytes_read"]
        store.meta["load_s"] = time.perf_counter() - t0
        store.meta["bytes_read_all_ranks"] = int(total_read)
        store.meta["replicate"] = mode
        rep = store.memory_report()
        get_logger(0 if world is None else world.rank).info(
            f"loaded {what}: {ndata} samples on {_size(world)} ranks{_groups(group)} in "
            f"{store.meta['load_s']:.2f} s{_copied(group, mode)}; read "
            f"{mib(meta['bytes_read'])} on rank 0, "
            f"{mib(total_read)} on all ranks; memory on rank 0: records "
            f"{mib(rep['records_bytes'])}, index {mib(rep['index_bytes'])} "
            f"({rep['index_bytes'] / ndata:.2f} B a sample, {rep['index_kind']})")
        return store

    @classmethod
    def _load_copied(cls, world, group, read, args: tuple, **kw):
        """Collective. Read once, copy across groups (:mod:`.replicate`): block ``i`` is read by
        rank ``i`` of one group and broadcast to rank ``i`` of the others."""
        comm, root = replicate.cross(world, group)
        reader = group.index == root
        try:
            def read_mine():
                if not reader:
                    return None, None, None, None
                ndata, block, meta = read(group, *args, kw["max_memory_per_rank"],
                                          bool(kw.get("digests")), _index_kw(group, kw))
                block = list(block)
                return ndata, block, meta, _record_sizes(block)

            got = agree(world, read_mine)
            (ndata, meta), sizes = replicate.bcast_block(comm, root, (got[0], got[2]), got[3])
            block = got[1] if reader else []
            if not reader:
                meta = {**meta, "bytes_read": 0}
            encode = _encoder(block, world.rank == 0) if reader else None

            def fill(buf, offs):
                if reader:
                    encode(buf, offs)
                replicate.bcast_records(comm, root, buf)

            store = cls.from_records(world, sizes, fill, ndata, meta=meta, **kw)
        finally:
            comm.Free()
        return store, block, meta

    def open_epoch(self):
        """The window, inside the one passive-target epoch (``Lock_all``) all its readers share.

        Several loaders may read one store (train and a checker, or both backends of ``auto``);
        MPI allows one ``Lock_all`` a window at a time, so the store counts its readers."""
        self._check_open("its window")
        if self.window is None:
            raise internal("a multi-rank store has no window (closed?)")
        if self._readers == 0:
            from mpi4py import MPI

            self.window.Lock_all(MPI.MODE_NOCHECK)
        self._readers += 1
        return self.window

    def close_epoch(self) -> None:
        self._readers -= 1
        if self._readers == 0 and self.window is not None:
            self.window.Unlock_all()

    def close(self) -> None:
        """Free the window (collective). The buffer must not be used afterwards."""
        if self.window is not None and self._readers:
            raise internal(f"store closed with {self._readers} loaders open")
        if self.window is not None:
            self.window.Free()
            self.window = None
            self.buffer = np.empty(0, dtype=np.uint8)
        if hasattr(self.index, "close"):  # a node-shared index frees its window
            self.index.close()
        if self.group is not None:
            self.group.close()
        self._closed = True

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise ValueError(f"the store is closed: {what} can no longer be read; close a "
                             "store after the loaders that read it")


def _encoder(samples, progress: bool = False):
    """``fill(buf, offs)`` that encodes `samples` into their records (a bar for large blocks)."""
    def fill(buf, offs):
        items = zip(samples, offs.tolist())
        if progress and len(samples) >= 20000:
            from tqdm import tqdm

            items = tqdm(items, total=len(samples), desc="mdloader: store", unit="graph")
        for s, o in items:
            codec.encode_into(buf, o, s)

    return fill


def _trim_heap() -> None:
    """Hand the freed file block back to the OS. glibc keeps freed heap memory for reuse: after
    loading, each rank kept about its block size again on top of the store (measured: +30 MiB a
    rank for a 34 MiB block on 2 ranks, gone after ``malloc_trim``). Best effort: a no-op where
    libc has no malloc_trim."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _size(world) -> int:
    return 1 if world is None else world.size


def _copied(group, mode: str) -> str:
    if group is None or group.count == 1:
        return ""
    return " (read once, copied across groups)" if mode == "copy" else " (each group read the file)"


def _groups(group) -> str:
    if group is None or group.count == 1:
        return ""
    return f" ({group.count} replica groups of {group.size})"


def _read_block(world, path, label, keys, budget=None, digests=False, index=None):
    """Rank-local: read this rank's block of `label` (one bulk read per key), after checking the
    predicted store size against `budget`."""
    with GraphFile(path) as f:
        info = f.info(label)
        if info.ndata == 0:
            raise DataError(f"{path}: label {label!r} holds no samples (ndata=0); "
                            "choose a label that has samples")
        if info.ndata < _size(world):
            raise DataError(f"{path}: {label} has {info.ndata} samples but the job has "
                            f"{_size(world)} ranks; run with at most {info.ndata} ranks")
        bounds = block_bounds(info.ndata, _size(world))
        r = world.rank if world is not None else 0
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        if budget is not None:
            names = list(info.keys) if keys is None else [k for k in keys if k in info.keys]
            mem.check_block(path, info, names, r, _size(world),
                            mem.predict_block(f, info, names, lo, hi), budget, digests,
                            **(index or {}))
        block = f.read_block(label, lo, hi, keys, info)
        meta = {"path": str(path), "label": label, "keys": list(block.arrays),
                "attributes": f.global_attributes(), "bytes_read": block.nbytes_read}
    return info.ndata, block, meta


def _read_multi_block(world, specs, label, keys, required, budget=None, digests=False,
                      index=None):
    """Rank-local: this rank's block of the global ids of several files (:mod:`.sources.multi`),
    after checking the predicted store size against `budget`; dropped keys are logged once."""
    with MultiSource(specs, label, keys, required) as src:
        n = src.num_samples
        if n < _size(world):
            raise DataError(f"{', '.join(s.path for s in specs)}: {label} has {n} samples in all "
                            f"but the job has {_size(world)} ranks; run with at most {n} ranks")
        bounds = block_bounds(n, _size(world))
        r = world.rank if world is not None else 0
        lo, hi = int(bounds[r]), int(bounds[r + 1])
        if budget is not None:
            idx = index or {}
            _check_budget(int(mem.multi_record_sizes(src, lo, hi).sum()), n, budget, digests,
                          idx.get("kind", "compact"), idx.get("ranks_sharing", 1), _size(world))
        samples, nread = src.read_range(lo, hi)
        meta = {"path": [s.path for s in specs], "label": label, "keys": list(src.keys),
                "attributes": src.attributes(), "bytes_read": nread,
                "dataset_names": list(src.names), "dataset_starts": src.starts.tolist(),
                "dataset_weights": [s.weight for s in specs], "dropped_keys": src.dropped}
    if src.dropped and r == 0:
        get_logger(0).warning("; ".join(f"key {k!r} dropped: missing from {', '.join(v)}"
                                        for k, v in src.dropped.items()))
    return n, samples, meta


def _record_sizes(samples) -> list[int]:
    return [codec.record_size(s) for s in samples]


def _index_kw(holder, kw: dict) -> dict:
    """The index a rank will hold, for the budget checks made before reading: ``kind`` and
    ``ranks_sharing`` (a node-shared index counted once a node)."""
    return {"kind": kw.get("index") or "compact",
            "ranks_sharing": _sharing(holder, kw.get("index_share") or "rank")}


def _sharing(world, share: str) -> int:
    return world.local_size if share == "node" and world is not None else 1


def _check_budget(total: int, num_samples: int, budget: int | None, digests: bool = False,
                  kind: str = "compact", sharing: int = 1, ranks: int = 1) -> None:
    """Raise when this rank's block (`total` bytes, one of `ranks` blocks) and the index do not
    fit `budget`, naming how many ranks would."""
    index = bound_bytes(num_samples, digests, kind, sharing)
    need = total + index
    if budget is None or need <= budget:
        return
    msg = (f"this rank needs {mib(need)} for its block and the index but max_memory_per_rank "
           f"is {mib(budget)}")
    if index >= budget:
        raise MemoryBudgetError(f"{msg}; the index alone is {mib(index)}: raise "
                                "max_memory_per_rank (more ranks do not shrink the index)")
    fewer = max(ranks + 1, math.ceil(ranks * total / (budget - index)))
    raise MemoryBudgetError(f"{msg}; run with about {fewer} ranks (or more) instead of {ranks}, "
                            "a larger group_size, or raise max_memory_per_rank")


def _allocate(world, nbytes: int):
    """This rank's record buffer: window memory under MPI, plain memory on one rank."""
    if world is None or world.size == 1:
        return np.empty(nbytes, dtype=np.uint8), None
    from mpi4py import MPI

    win = MPI.Win.Allocate(max(nbytes, 8), disp_unit=1, comm=world.comm)
    buf = np.frombuffer(win.tomemory(), dtype=np.uint8, count=max(nbytes, 8))[:nbytes]
    return buf, win


def _record_digests(buf, offs, sizes) -> np.ndarray:
    out = np.empty(len(sizes), dtype=np.uint64)
    mv = memoryview(buf)
    for i, (o, n) in enumerate(zip(offs, sizes)):
        out[i] = int.from_bytes(hashlib.blake2b(mv[o:o + n], digest_size=8).digest(), "little")
    return out
