"""Memory budget per rank: ``max_memory_per_rank``, checked from the file's metadata before loading.

A rank's store is its records end to end plus the global index (:mod:`.index`; the budget
counts its bound before the sizes are known: 12 bytes a sample up to 4M samples, 4.125 above,
+8 with digests). A record's size follows from its arrays' shapes and dtypes alone
(:mod:`mdloader_plugin.records.codec`: a header of fixed size for a given set of keys, then each
array padded to 8 bytes), and the shapes follow from the file's ``variable_count`` entries and the
variables' global shapes. So :func:`predict_block` gives the *exact* size of this rank's records
after reading only the count arrays (16 bytes a sample a key), and a job that would not fit stops
before any rank reads its data, with the number of ranks that would fit. The total over all ranks
comes from the variables' global sizes with the padding bound (7 bytes an array), so the suggested
number of ranks is an upper bound for evenly sized samples, never too small.

Budgets are bytes (``4294967296``) or strings with a unit: ``"4GiB"``, ``"512 MiB"``, ``"8GB"``,
``"100k"`` (``k``/``M``/``G``/``T`` are powers of 1000, ``KiB``/``MiB``/``GiB``/``TiB`` of 1024).
"""

from __future__ import annotations

import numpy as np

from ..core.blocks import block_bounds, inclusive_bounds

from ..records import codec
from ..core.errors import MemoryBudgetError
from ..core.units import human
from ..sampling.order import order_class, resolve
from ..sources.multi import ID_KEY
from .index import bound_bytes

#: A rank reads and encodes its block this many bytes of records at a time (bounds of
#: :func:`load_chunk`): the chunk's arrays as read, and ADIOS2's staging of them.
CHUNK_MIN = 4 << 10
CHUNKS = 32  # a block is read in about this many chunks (between the two bounds)
CHUNK_MAX = 32 << 20
#: Chunks' worth of memory a load holds beside the records and the index (a chunk's arrays as
#: read, a row of ``edge_index`` in ADIOS2's buffer and ours, heap not yet returned);
#: ``bench/store/load_peak.py`` measures the peak against this bound.
LOAD_CHUNKS = 4
#: Bytes a sample of the block the load holds until the index is built (sizes, offsets).
LOAD_BYTES_A_SAMPLE = 24
#: Bytes a load holds whatever the block's size (the progress bar's and the reader's modules
#: and buffers first used by a large block, heap not yet returned)
LOAD_FIXED_BYTES = 0
#: Samples whose count arrays are read at a time to size records (8 bytes a sample a read).
SIZES_CHUNK = 1 << 20


def header_bytes(info, keys) -> int:
    """Codec header of one record holding `keys` (the same for every sample)."""
    return codec.record_size(_empty(info, keys))


def _empty(info, keys) -> dict:
    return {k: np.zeros([0] * max(len(info.keys[k].shape), 1), info.keys[k].dtype) for k in keys}


def _row_bytes(k) -> int:
    """Bytes of one unit along the key's varying dimension."""
    dims = [d for i, d in enumerate(k.shape) if i != k.vdim]
    return int(np.prod(dims, dtype=np.int64)) * k.dtype.itemsize


def record_sizes(f, info, keys, start: int, stop: int) -> np.ndarray:
    """Exact record size of each of samples ``start..stop-1`` (reads only the count arrays, at
    most ``SIZES_CHUNK`` samples a read: the load's memory beside the sizes stays bounded)."""
    sizes = np.full(stop - start, header_bytes(info, keys), dtype=np.int64)
    for lo in range(start, stop, SIZES_CHUNK):
        hi = min(lo + SIZES_CHUNK, stop)
        part = sizes[lo - start:hi - start]
        for key in keys:
            part += (f.read_counts(info.label, key, lo, hi) * _row_bytes(info.keys[key]) + 7) \
                // 8 * 8
    return sizes


def multi_record_sizes(src, lo: int = 0, hi: int | None = None) -> np.ndarray:
    """Exact record size of each of global ids ``lo..hi-1`` (default: all) of several files
    (a :class:`~mdloader_plugin.sources.multi.MultiSource`), the ``dataset_name`` tag every
    sample carries included; reads only the count arrays."""
    hi = src.num_samples if hi is None else hi
    parts = [np.zeros(0, dtype=np.int64)]
    for d, a, b in src.pieces(lo, hi):
        info = src.infos[d]
        empty = _empty(info, src.keys)
        tag = codec.record_size({**empty, ID_KEY: np.zeros((1, 1), np.int64)}) - \
            codec.record_size(empty)
        parts.append(record_sizes(src.files[d], info, src.keys, a, b) + tag)
    return np.concatenate(parts)


def predict_block(f, info, keys, start: int, stop: int) -> int:
    """Exact bytes of the records of samples ``start..stop-1`` (reads only the count arrays)."""
    return int(record_sizes(f, info, keys, start, stop).sum())


def per_rank_bytes(sizes: np.ndarray, shards: int, digests: bool = False, *,
                   kind: str = "compact", ranks_sharing: int = 1) -> int:
    """The store's size on its fullest rank when records of `sizes` (every sample, in id order)
    are sharded over `shards` ranks as the store does (``block_bounds``): records + index
    (`kind`, and `ranks_sharing` ranks a node-shared copy: :func:`index_bytes`) at the load's
    peak (:func:`load_peak`), the figure the load's own check compares."""
    return load_peak(block_records_bytes(sizes, shards),
                     index_bytes(len(sizes), digests, kind=kind, ranks_sharing=ranks_sharing),
                     -(-len(sizes) // shards))


def block_records_bytes(sizes: np.ndarray, shards: int) -> int:
    """Bytes of records on the fullest of `shards` ranks holding `sizes` as the store shards
    them (``block_bounds``)."""
    cum = inclusive_bounds(sizes)
    b = block_bounds(len(sizes), shards)
    return int((cum[b[1:]] - cum[b[:-1]]).max())


def fewest_ranks(sizes: np.ndarray, budget: int, digests: bool = False, *,
                 kind: str = "compact", ranks_sharing: int = 1) -> int | None:
    """Fewest ranks over which the store of `sizes` fits `budget` a rank (None: the index
    alone does not fit)."""
    idx = dict(kind=kind, ranks_sharing=ranks_sharing)
    room = budget - index_bytes(len(sizes), digests, **idx)
    if room <= 0 or int(np.max(sizes)) > room:
        return None
    fits = lambda n: per_rank_bytes(sizes, n, digests, **idx) <= budget  # noqa: E731
    lo = max(1, -(-int(np.sum(sizes)) // room))  # never enough below this
    if fits(lo):
        return lo
    hi = lo + 1  # uneven records and the load's buffers: more, found by doubling
    while not fits(hi):
        if hi >= len(sizes):
            return None
        lo, hi = hi, min(2 * hi, len(sizes))
    while hi - lo > 1:  # fits(hi), not fits(lo)
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def predict_total(info, keys) -> int:
    """Upper bound of all samples' records: every variable's bytes, headers, padding."""
    data = sum(int(np.prod(info.keys[k].shape, dtype=np.int64)) * info.keys[k].dtype.itemsize
               for k in keys)
    return data + info.ndata * (header_bytes(info, keys) + 7 * len(keys))


def index_bytes(num_samples: int, digests: bool = False, *, kind: str = "compact",
                ranks_sharing: int = 1) -> int:
    """Bytes of the global index a rank holds for ``num_samples`` samples (with digests if
    asked): the bound of :func:`.index.bound_bytes` for `kind`; a node-shared compact index
    (``index_share: node``) counted ``1 / ranks_sharing`` (the ranks of the node)."""
    return bound_bytes(num_samples, digests, kind, ranks_sharing)


def scale_bytes(num_samples: int, *, index: str = "compact", index_share: str = "rank",
                ranks_per_node: int = 1, order: str = "auto", shuffle: bool = True,
                digests: bool = False) -> dict:
    """The parts of a rank's memory that grow with the whole data set (docs/scale.md), before
    the record sizes are known: ``index`` (the bound of :func:`.index.bound_bytes`: 4-byte size
    codes; a node-shared index counted ``1 / ranks_per_node``) and ``order`` (a ``torch`` list
    or a ``feistel`` order's keys; the run of step plans is not included)."""
    share = ranks_per_node if index_share == "node" else 1
    return {"index": bound_bytes(num_samples, digests, index, share),
            "order": order_class(resolve(order, num_samples), shuffle).bytes_for(num_samples)}


def load_chunk(records_bytes: int, chunk: int | None = None) -> int:
    """Bytes of records a rank reads and encodes at a time while loading: `chunk` when given,
    else ``1 / CHUNKS`` of its records between ``CHUNK_MIN`` and ``CHUNK_MAX``."""
    if chunk is not None:
        return max(int(chunk), 1)
    return int(min(max(records_bytes // CHUNKS, CHUNK_MIN), CHUNK_MAX))


def load_peak(records_bytes: int, index: int, local_samples: int,
              chunk: int | None = None) -> int:
    """The bound of a rank's memory while it loads its block: the records (the window) and the
    index, plus what the load holds besides (``LOAD_CHUNKS`` chunks of :func:`load_chunk`, and
    ``LOAD_BYTES_A_SAMPLE`` for the block's sizes and offsets, and ``LOAD_FIXED_BYTES``).
    ``bench/store/load_peak.py`` measures the peak against it (docs/how-it-works.md, "Memory")."""
    extra = LOAD_CHUNKS * min(load_chunk(records_bytes, chunk), records_bytes)
    return int(records_bytes + index + extra + LOAD_BYTES_A_SAMPLE * local_samples +
               LOAD_FIXED_BYTES)


def check(what: str, rank: int, ranks: int, records_bytes: int, local_samples: int,
          num_samples: int, budget: int | None, *, digests: bool = False,
          kind: str = "compact", ranks_sharing: int = 1, chunk: int | None = None,
          total_records: int | None = None) -> None:
    """The budget check: raise :class:`MemoryBudgetError` (one line: the load peak, the budget
    and what to change) when this rank's load peak (:func:`load_peak` of its block and the
    index) exceeds `budget`. `total_records`: all ranks' records (default: `ranks` blocks like
    this one), for the number of ranks that would fit."""
    if budget is None:
        return
    idx = index_bytes(num_samples, digests, kind=kind, ranks_sharing=ranks_sharing)
    peak = load_peak(records_bytes, idx, local_samples, chunk)
    if peak <= budget:
        return
    where = (f"{what}: rank {rank} needs {human(peak)} while loading ({human(records_bytes)} "
             f"of records + {human(idx)} of index + {human(peak - records_bytes - idx)} of load "
             f"buffers) but max_memory_per_rank is {human(budget)}")
    total = ranks * records_bytes if total_records is None else int(total_records)
    need = _ranks_to_fit(total, num_samples, idx, budget, chunk)
    if need is None and idx >= budget:
        share = "" if kind != "compact" or ranks_sharing > 1 else \
            ", or share one index a node (--index-share node)"
        raise MemoryBudgetError(f"{where}; the index alone takes {human(idx)} "
                                f"({idx // max(num_samples, 1)} B a sample): raise "
                                f"max_memory_per_rank{share}")
    if need is None:
        floor = load_peak(-(-total // max(num_samples, 1)), idx, 1, chunk)
        raise MemoryBudgetError(f"{where}; even one sample a rank would need {human(floor)} "
                                "while loading: raise max_memory_per_rank")
    raise MemoryBudgetError(f"{where}; the data set is about {human(total)}: run with at least "
                            f"{max(need, ranks + 1)} ranks, a larger group_size (fewer replica "
                            "groups), --index-share node (one index a node), or raise "
                            "max_memory_per_rank")


def _ranks_to_fit(total: int, num_samples: int, idx: int, budget: int,
                  chunk: int | None) -> int | None:
    """Fewest ranks whose even share of `total` bytes of records loads within `budget` (None:
    not even one sample a rank does)."""
    def fits(n):
        return load_peak(-(-total // n), idx, -(-num_samples // n), chunk) <= budget

    if not fits(max(num_samples, 1)):
        return None
    lo, hi = 0, 1  # fits(hi), not fits(lo)
    while not fits(hi):
        lo, hi = hi, min(2 * hi, max(num_samples, 1))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi
