"""Memory budget per rank: ``max_memory_per_rank``, checked from the file's metadata before loading.

A rank's store is its records end to end plus the global index (:mod:`.index`; the budget
counts its bound before the sizes are known: 12 bytes a sample up to 4M samples, 4.125 above,
+8 with digests). A record's size follows from its arrays' shapes and dtypes alone
(:mod:`.codec`: a header of fixed size for a given set of keys, then each array padded to 8 bytes), and the shapes
follow from the file's ``variable_count`` entries and the variables' global shapes. So
:func:`predict_block` gives the *exact* size of this rank's records after reading only the count
arrays (16 bytes a sample a key), and a job that would not fit stops before any rank reads its
data, with the number of ranks that would fit. The total over all ranks comes from the
variables' global sizes with the padding bound (7 bytes an array), so the suggested number of
ranks is an upper bound for evenly sized samples, never too small.

Budgets are bytes (``4294967296``) or strings with a unit: ``"4GiB"``, ``"512 MiB"``, ``"8GB"``,
``"100k"`` (``k``/``M``/``G``/``T`` are powers of 1000, ``KiB``/``MiB``/``GiB``/``TiB`` of 1024).
"""

from __future__ import annotations

import numpy as np

from ..records import codec
from ..core.errors import MemoryBudgetError
from ..core.blocks import block_bounds
from ..core.units import human
from ..sampling.order import order_class, resolve
from ..sources.multi import ID_KEY
from .index import bound_bytes

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
    """Exact record size of each of samples ``start..stop-1`` (reads only the count arrays)."""
    sizes = np.full(stop - start, header_bytes(info, keys), dtype=np.int64)
    for key in keys:
        cnt, _ = f.read_extents(info.label, key, start, stop)
        sizes += (cnt * _row_bytes(info.keys[key]) + 7) // 8 * 8
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
    (`kind`, and `ranks_sharing` ranks a node-shared copy: :func:`index_bytes`)."""
    return block_records_bytes(sizes, shards) + \
        index_bytes(len(sizes), digests, kind=kind, ranks_sharing=ranks_sharing)


def block_records_bytes(sizes: np.ndarray, shards: int) -> int:
    """Bytes of records on the fullest of `shards` ranks holding `sizes` as the store shards
    them (``block_bounds``)."""
    cum = np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))])
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
    n = max(1, -(-int(np.sum(sizes)) // room))
    while per_rank_bytes(sizes, n, digests, **idx) > budget:  # uneven records: a few more
        n += 1
    return n


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


def ranks_needed(total_records: int, num_samples: int, budget: int, digests: bool) -> int | None:
    """Fewest ranks whose even share of `total_records` plus the index fits `budget` (None:
    the index alone does not fit)."""
    room = budget - index_bytes(num_samples, digests)
    if room <= 0:
        return None
    return max(1, -(-total_records // room))


def check_block(path, info, keys, rank: int, size: int, block_bytes: int, budget: int | None,
                digests: bool = False, kind: str = "compact", ranks_sharing: int = 1) -> None:
    """Raise :class:`MemoryBudgetError` if this rank's block and the index (`kind`, a
    node-shared copy counted ``1 / ranks_sharing``) exceed `budget`."""
    if budget is None:
        return
    idx = index_bytes(info.ndata, digests, kind=kind, ranks_sharing=ranks_sharing)
    if block_bytes + idx <= budget:
        return
    where = f"{path} [{info.label}]: rank {rank} needs {human(block_bytes + idx)} " \
            f"({human(block_bytes)} of records + {human(idx)} of index) but " \
            f"max_memory_per_rank is {human(budget)}"
    need = ranks_needed(predict_total(info, keys), info.ndata, budget, digests)
    if need is None:
        raise MemoryBudgetError(f"{where}; the index alone takes {human(idx)} "
                                f"({idx // info.ndata} B a sample): raise max_memory_per_rank")
    raise MemoryBudgetError(f"{where}; the data set is about "
                            f"{human(predict_total(info, keys))}: run with at least "
                            f"{max(need, size + 1)} ranks or raise max_memory_per_rank")
