"""This rank's samples in one contiguous buffer, and where every sample of the job lives.

Every rank owns a contiguous block of sample ids (``block_starts[r] .. block_starts[r+1]-1``) and
holds their codec records end to end in one uint8 buffer. The global index — for every sample id
its owner rank, offset in the owner's buffer and record length — is the same on every rank, so a
backend can fetch any sample without asking anyone where it is.

With replica groups (:mod:`~mdloader_plugin.mpi.groups`, ``group_size`` W < P) all of this holds
inside each group of
W ranks: blocks, owners and the window are the group's, ``owner_of`` answers a rank of the group,
and every group holds the whole data set: each rank reads its block of W from the file (the file
is read P / W times in all), or with ``replicate="copy"`` the file is read once and the blocks
are broadcast across groups (:mod:`.replicate`).

Under MPI the buffer is allocated by ``MPI_Win_allocate`` (once, never moved): that is the memory
the one-sided backend reads from, and with OpenMPI on one node it is shared memory that a Get
reads directly, with no help from the owner. Memory per rank is the records plus the global index
(:mod:`.index`: about 2.1 bytes a global sample compact, 16 ``full``, +8 with digests; a
node-shared compact index counts once a node). A file's block gets there streamed, a chunk at a
time (:mod:`.load`); the load's peak, and the budget it is checked against, are :mod:`.budget`'s.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from ..core.blocks import block_bounds, exclusive_offsets, owner_of
from ..core.errors import internal
from ..core.units import parse_bytes
from ..mpi import failing, groups
from ..mpi.agree import agree_settings, job_settings
from ..mpi.collectives import max_count
from ..mpi.world import agree
from ..records import codec
from ..sources.multi import parse_specs
from . import budget as mem
from .index import FullIndex, check_choice
from .index_build import allgather_blocks, build_index
from .load import FileSource, MultiFileSource, load, sharing
from .options import StoreOptions


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
        if self._multi_rank:
            failing.opened()  # an uncaught exception now ends the job (mpi.failing)

    @property
    def _multi_rank(self) -> bool:
        return self.world is not None and self.world.size > 1

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
        whole size, counted ``1 / ranks_per_node`` in ``index_bytes``); ``steady_bytes``
        (records + index: what stays after the load) and ``load_peak_bytes`` (the bound of the
        load's peak the budget check uses, :func:`.budget.load_peak`)."""
        lo, hi = self.local_range
        rep = {"records_bytes": int(self.buffer.nbytes), **self.index.memory_bytes(),
               "index_kind": self.index.describe(), "samples_local": hi - lo,
               "samples_global": self.num_samples, "dataset_bytes": int(self.nbytes.sum())}
        if self.digests is not None:
            rep["index_bytes"] += int(self.digests.nbytes)
        rep["steady_bytes"] = rep["records_bytes"] + rep["index_bytes"]
        rep["load_peak_bytes"] = mem.load_peak(rep["records_bytes"], rep["index_bytes"], hi - lo,
                                               self.meta.get("load_chunk_bytes"))
        return rep

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def from_records(cls, world, sizes: Sequence[int],
                     fill: Callable[[np.ndarray, np.ndarray], None],
                     num_samples: int, meta: Mapping | None = None, digests: bool | None = None,
                     max_memory_per_rank: int | None = None,
                     group_size=None, index: str | None = None,
                     index_share: str | None = None, *,
                     options: StoreOptions | None = None) -> "ShardStore":
        """Collective. Allocate this rank's buffer for records of `sizes`, let `fill(buf, offs)`
        write them, then exchange the index.

        Every rank must pass the sizes of exactly its block (``block_bounds`` over its group;
        `group_size`: an int, None for all ranks, or a :class:`~mdloader_plugin.mpi.groups.Group`).
        `index`: ``"compact"`` or ``"full"``; `index_share`: ``"rank"`` or ``"node"`` (one compact
        copy a node in shared memory), see :mod:`.index`. The options may come as one
        :class:`~.options.StoreOptions` (`options`); keywords given replace its fields."""
        opts = StoreOptions.of(options, digests=digests, max_memory_per_rank=max_memory_per_rank,
                               group_size=group_size, index=index, index_share=index_share)
        group = groups.make(world, opts.group_size)
        holder = world if group is None else group
        budget = parse_bytes(opts.max_memory_per_rank)
        sizes = np.asarray(sizes, dtype=np.int64)
        offs = exclusive_offsets(sizes)
        # one reduction before the first collective that depends on them: the index options
        # checked, and agreed with MDLOADER_MPI_MAX_COUNT, which cuts every collective below
        count = job_settings()["MDLOADER_MPI_MAX_COUNT"]
        agree_settings(world, {"MDLOADER_MPI_MAX_COUNT": count, "index": str(opts.index),
                               "index_share": str(opts.index_share)},
                       _checked_choice, opts.index, opts.index_share)
        agree(world, mem.check, "this rank's block", 0 if holder is None else holder.rank,
              _size(holder), int(sizes.sum()), sizes.size, num_samples, budget,
              digests=opts.digests, kind=opts.index,
              ranks_sharing=sharing(holder, opts.index_share), chunk=opts.load_chunk_bytes)
        buf, win = _allocate(holder, int(sizes.sum()))
        agree(world, fill, buf, offs)
        dig = _record_digests(buf, offs, sizes) if opts.digests else None
        idx = build_index(holder, sizes, block_bounds(num_samples, _size(holder)), opts.index,
                          opts.index_share)
        del offs
        g_dig = None if dig is None else allgather_blocks(holder, dig, num_samples)
        return cls(world, buf, idx.block_starts, idx.offsets, idx.nbytes,
                   meta=dict(meta or {}), digests=g_dig, window=win, group=group, index=idx)

    @classmethod
    def from_samples(cls, world, local_samples: Iterable[Mapping[str, np.ndarray]],
                     num_samples: int, progress: bool = False, **kw) -> "ShardStore":
        """Collective. Store this rank's samples (dicts of arrays) held in memory; a block of a
        file is read by :meth:`from_file`, which streams it."""
        samples = list(local_samples)
        sizes = agree(world, _record_sizes, samples)
        fill = _encoder(samples, progress and (world is None or world.rank == 0))
        return cls.from_records(world, sizes, fill, num_samples, **kw)

    @classmethod
    def from_file(cls, world, path: str, label: str = "trainset", keys=None, *,
                  options: StoreOptions | None = None, **kw) -> "ShardStore":
        """Collective. Each rank reads only its own block of `label` from an ADIOS2 file,
        streamed into its window in bounded chunks (:mod:`.load`).

        With ``max_memory_per_rank`` (bytes or ``"4GiB"``) every rank first sizes its records
        from the file's count arrays and the job stops before reading any data if its load peak
        would not fit (:mod:`.budget`), saying how many ranks would. With ``group_size`` W each
        rank reads its block of W (:mod:`~mdloader_plugin.mpi.groups`), or with
        ``replicate="copy"`` one group's rank reads it and copies it to the others
        (:mod:`.replicate`). Options: keywords of :class:`~.options.StoreOptions`, or `options`."""
        return load(cls, world, lambda: FileSource(path, label, keys), [path],
                    StoreOptions.of(options, **kw))

    @classmethod
    def from_files(cls, world, specs, label: str = "trainset", keys=None, required=(), *,
                   options: StoreOptions | None = None, **kw) -> "ShardStore":
        """Collective. Several files, each a named data set, as one store with one global index
        (:mod:`~mdloader_plugin.sources.multi`): data set ``d`` holds ids
        ``meta["dataset_starts"][d]..``, every sample carries its id in ``dataset_name``; keys
        are the common set (`required` ones must be in every file)."""
        specs = parse_specs(specs)
        return load(cls, world, lambda: MultiFileSource(specs, label, keys, tuple(required)),
                    [s.path for s in specs], StoreOptions.of(options, **kw))

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

    def close(self, exc=failing.CURRENT) -> None:
        """Free the window (collective). The buffer must not be used afterwards.

        Called while an exception propagates (a ``finally``, an ``except``) on several ranks, it
        takes the failing way (:mod:`~mdloader_plugin.mpi.failing`): this rank prints the
        exception's line and aborts the job, entering no collective. `exc`: the exception
        (default: the one being handled where close is called, ``sys.exc_info()``)."""
        exc = failing.propagating(exc)
        if self._closed:
            return
        if self._multi_rank and exc is not None:
            failing.fail(exc)  # does not return: no Win.Free, no communicator free
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
        if self._multi_rank:
            failing.closed()

    def __enter__(self) -> "ShardStore":
        return self

    def __exit__(self, typ, exc, tb) -> None:
        self.close(exc)  # None: a normal close, also inside an outer except block

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


def _record_sizes(samples) -> list[int]:
    return [codec.record_size(s) for s in samples]


def _size(world) -> int:
    return 1 if world is None else world.size


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


def _checked_choice(index, index_share) -> None:
    """The index options (:func:`.index.check_choice`) and ``MDLOADER_MPI_MAX_COUNT`` checked."""
    check_choice(index, index_share)
    max_count()
