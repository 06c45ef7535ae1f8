"""Where the data set lives: resolve ``group_size`` (``auto`` asks the estimator), then load.

:func:`open_store` is what the integrations and the CLI call instead of
:meth:`ShardStore.from_file <mdloader_plugin.store.shard.ShardStore.from_file>` when the group size
may be ``auto``, one file or several (:meth:`ShardStore.from_files
<mdloader_plugin.store.shard.ShardStore.from_files>`). ``auto`` needs the record sizes before any
data is read: rank 0 reads them from the file's count arrays
(:func:`~mdloader_plugin.store.budget.record_sizes`, 16 bytes a sample a key; with several files
every file's, in global id order, each record with its ``dataset_name`` tag:
:func:`~mdloader_plugin.store.budget.multi_record_sizes`, so the sizing is the sum over the files'
records plus the one index), every rank detects its node's budget (the smallest wins), rank 0 runs
:func:`~mdloader_plugin.estimator.group_size.choose_layout` with its own profile and logs every
candidate (a rank that read another profile is named in one ``MDLOADER-AGREE`` warning line),
and the chosen ``W`` is broadcast; then every rank reads its block of ``W``. An explicit ``W`` (or
none: all ranks) skips all of that. First of all, every rank must name the same data files
(:func:`same_data`: the same absolute paths and sizes, else one error line naming the ranks).
"""

from __future__ import annotations

import numpy as np

from ..mpi import groups
from ..core.errors import ConfigError
from ..core.log import get_logger
from ..estimator.group_size import choose_layout, detect_budget
from ..estimator.online import blind_to_network
from ..estimator.profile import get_profile, identity
from ..mpi.agree import compare_inputs
from ..mpi.world import agree
from ..sources.adios import GraphFile
from ..sources.multi import MultiSource, parse_specs
from ..store import budget as mem
from ..core.units import parse_bytes
from ..store.load import check_same_data
from ..store.shard import ShardStore


def open_store(world, path, label: str = "trainset", *, group_size=None,
               batch_size: int | None = None, backend: str = "auto", profile=None,
               max_memory_per_rank=None, keys=None, digests: bool = False, required=(),
               index: str = "compact", index_share: str = "rank", replicate=None):
    """Collective. The :class:`~mdloader_plugin.store.shard.ShardStore` of ``path[label]`` with
    `group_size` ``None``/``"all"`` (all ranks), an int, or ``"auto"`` (needs `batch_size`).
    `path` is one file, or a list of data sets (what ``ShardStore.from_files`` takes; `required`:
    keys every file must have); `index` and `index_share` as :meth:`ShardStore.from_records
    <mdloader_plugin.store.shard.ShardStore.from_records>` takes them; `replicate`: how the groups
    get their copies (:mod:`~mdloader_plugin.store.replicate`)."""
    same_data(world, path, label)
    w = agree(world, groups.parse, group_size)
    if w == "auto":
        budget = agree(world, parse_bytes, max_memory_per_rank)
        w = choose_group_size(world, path, label, keys, batch_size, backend, profile, budget,
                              digests, required, index=index,
                              index_share=index_share).group_size
    if _several(path):
        return ShardStore.from_files(world, path, label, keys, required, group_size=w,
                                     digests=digests, max_memory_per_rank=max_memory_per_rank,
                                     index=index, index_share=index_share, replicate=replicate)
    return ShardStore.from_file(world, path, label, keys, group_size=w, digests=digests,
                                max_memory_per_rank=max_memory_per_rank, index=index,
                                index_share=index_share, replicate=replicate)


def same_data(world, path, label: str = "trainset") -> None:
    """Collective. Every rank names the same data (one path or a list of them) with the same
    label, else one error line naming the ranks and their files, exit 2 on every rank
    (:func:`~mdloader_plugin.store.load.check_same_data`)."""
    check_same_data(world, list(path) if _several(path) else [path], label)


def _several(path) -> bool:
    return isinstance(path, (list, tuple))


def choose_group_size(world, path, label, keys, batch_size, backend, profile, budget,
                      digests=False, required=(), index="compact", index_share="rank"):
    """Collective. The estimator's (backend, W) for this file (or list of data sets) and job,
    the same on every rank; the memory a rank counts the index as the store will hold it
    (`index`, `index_share`: a node-shared index once a node)."""
    source = "max_memory_per_rank"
    if budget is None:
        found = [detect_budget(world.local_size if world is not None else 1)]
        if world is not None and world.size > 1:  # the tightest node decides, for everyone
            found = world.comm.allgather(found[0])
        known = [b for b in found if b[0] is not None]
        budget, source = min(known) if known else found[0]

    def decide():
        if world is not None and world.rank != 0:
            return None
        return _decide(world, path, label, keys, batch_size, backend, profile, budget, source,
                       digests, required, index, index_share)

    if world is not None and world.size > 1:
        prof = agree(world, get_profile, profile)  # rank 0's decides; a difference is said once
        compare_inputs(world.comm, {"profile": identity(prof)}, get_logger(world.rank),
                       "the group size choice")
    dec = agree(world, decide)
    if world is not None and world.size > 1:
        dec = world.comm.bcast(dec, root=0)
    if world is None or world.rank == 0:
        log = get_logger(0)
        for line in dec.log_lines():
            log.info(line)
    return dec


def _decide(world, path, label, keys, batch_size, backend, profile, budget, source, digests,
            required=(), index="compact", index_share="rank"):
    if not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ConfigError(f"group_size auto needs the batch size (samples per rank per step), "
                          f"got {batch_size!r}")
    sizes = _record_sizes(path, label, keys, required)
    node_of = np.zeros(1, dtype=np.int64) if world is None else world.node_of
    return decide_layout(sizes, node_of, batch_size, backend, profile, budget, source, digests,
                         index, index_share)


def decide_layout(sizes: np.ndarray, node_of: np.ndarray, batch_size: int, backend: str = "auto",
                  profile=None, budget: int | None = None, source: str = "max_memory_per_rank",
                  digests: bool = False, index: str = "compact", index_share: str = "rank",
                  widths=None):
    """``group_size: auto``'s choice for records of `sizes` (every sample, id order) on ranks
    placed as `node_of`, among `widths` (default: every valid group size); what the loader
    decides at run time and ``mdloader plan`` ahead of it."""
    rpn = int(np.bincount(node_of).max())
    idx = lambda w: {"kind": index,  # noqa: E731
                     "ranks_sharing": index_sharing(node_of, w, index_share)}
    blind = blind_to_network(get_profile(profile), int(np.unique(node_of).size))
    return choose_layout(
        groups.valid_sizes(node_of) if widths is None else widths, rpn, int(batch_size),
        float(sizes.mean()),
        float(sizes.std()), lambda w: mem.per_rank_bytes(sizes, w, digests, **idx(w)), budget,
        source, profile, None if backend == "auto" else [backend],
        fewest=lambda: None if budget is None else mem.fewest_ranks(
            sizes, budget, digests, **idx(node_of.size)),
        node_local=rpn if blind else None)


def index_sharing(node_of: np.ndarray, w: int, index_share: str = "rank") -> int:
    """Ranks that share one copy of the index in groups of `w` ranks (``groups.make``: ranks
    ``g*w .. g*w+w-1``): 1 unless ``index_share == "node"``, then the fewest ranks of a group on
    one node (the store shares the index among a group's ranks on a node, ``store._sharing``;
    the rank with the fewest partners holds the largest share, so it sizes every rank)."""
    if index_share != "node":
        return 1
    node_of = np.asarray(node_of)
    return int(min(c for g in range(node_of.size // w)
                   for c in np.bincount(node_of[g * w:(g + 1) * w]) if c > 0))


def _record_sizes(path, label, keys, required) -> np.ndarray:
    """Every sample's exact record size, in global id order (one file, or several)."""
    if _several(path):
        with MultiSource(parse_specs(path), label, keys, required) as src:
            return mem.multi_record_sizes(src)
    with GraphFile(path) as f:
        info = f.info(label)
        names = list(info.keys) if keys is None else [k for k in keys if k in info.keys]
        return mem.record_sizes(f, info, names, 0, info.ndata)
