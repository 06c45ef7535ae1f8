"""Replica groups: ranks split into ``P / W`` groups of ``W`` consecutive ranks, each holding the
whole data set sharded over its ``W`` ranks.

Rank ``r`` belongs to group ``r // W`` and holds block ``r % W`` of the data set; every group
has the same blocks, so a sample's record lies at the same offset on the same group rank of every
group, and a rank only ever reads from its own group. ``W = P`` (the default) is one group: the
data set sharded over all ranks. A smaller ``W`` costs memory (each rank holds ``N / W`` records
instead of ``N / P``) and buys locality: with ``W`` = ranks per node no fetch leaves the node.

Groups are aligned with nodes: a group lies inside one node, or is made of whole nodes (so ``W``
is a divisor or a multiple of the ranks per node where every node has as many ranks, and ``W``
divides ``P``). Anything else is refused with the list of valid values.

:class:`Group` looks like a :class:`~mdloader_plugin.mpi.world.World` (``comm``, ``rank``, ``size``,
``node_of``, ...) restricted to the group, so the store and the backends work on it unchanged:
the store allocates its window and exchanges its index on the group's communicator, the
one-sided backend reads windows of its group, the collective backend's Alltoallv spans the group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.errors import ConfigError, internal
from .agree import agree_settings

ALIASES = ("group_size", "width")  # DDStore's users call it width (--ddstore_width)


@dataclass
class Group:
    """This rank's replica group, World-like (``rank``/``size`` are inside the group)."""

    comm: object
    rank: int
    size: int
    node_of: np.ndarray = field(repr=False)  # node index of every rank of the group
    index: int = 0       # which group this rank is in
    count: int = 1       # number of groups (P / W)
    world_size: int = 1  # P
    local_rank: int = 0
    local_size: int = 1
    owned: bool = True   # the communicator is this group's own (freed by close)

    @property
    def num_nodes(self) -> int:
        return int(np.unique(self.node_of).size) if self.size else 0

    @property
    def first_rank(self) -> int:
        """World rank of this group's rank 0."""
        return self.index * self.size

    def rows(self, plan: np.ndarray) -> np.ndarray:
        """The group's rows of a ``[P, b]`` step plan (what its ranks need)."""
        return plan[self.first_rank:self.first_rank + self.size]

    def world_ranks(self, group_ranks) -> np.ndarray:
        return np.asarray(group_ranks, dtype=np.int64) + self.first_rank

    def close(self) -> None:
        if self.comm is not None and self.owned:
            from mpi4py import MPI

            if not MPI.Is_finalized():
                self.comm.Free()
        self.comm = None


def valid_sizes(node_of: np.ndarray) -> list[int]:
    """Every group size that divides P and keeps groups aligned with nodes (ascending)."""
    node_of = np.asarray(node_of)
    p = int(node_of.size)
    return [w for w in range(1, p + 1) if p % w == 0 and _aligned(node_of, w)]


def _aligned(node_of: np.ndarray, w: int) -> bool:
    """Every group of `w` consecutive ranks lies in one node or is a union of whole nodes."""
    counts = np.bincount(node_of)
    for g in range(node_of.size // w):
        nodes = node_of[g * w:(g + 1) * w]
        uniq, inside = np.unique(nodes, return_counts=True)
        if uniq.size > 1 and not np.array_equal(inside, counts[uniq]):
            return False
    return True


def parse(value, what: str = "group_size"):
    """``None``/``"all"``/``0`` -> None (one group of all ranks), ``"auto"`` -> "auto", else an
    integer >= 1 (a ConfigError otherwise)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "all")):
        return None
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    if isinstance(value, bool):
        raise ConfigError(f"{what}: expected auto, all or a number of ranks, got {value!r}")
    try:
        w = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what}: expected auto, all or a number of ranks, got {value!r}") \
            from None
    if w != value and str(w) != str(value).strip():
        raise ConfigError(f"{what}: expected a whole number of ranks, got {value!r}")
    if w == 0:
        return None
    if w < 0:
        raise ConfigError(f"{what} must be >= 1 (or auto, or all), got {value!r}")
    return w


def from_options(opts: dict, what: str = "mdloader") -> object:
    """The group size of a config section that may spell it ``group_size`` or ``width``."""
    given = [k for k in ALIASES if opts.get(k) is not None]
    if len(given) > 1 and parse(opts[given[0]]) != parse(opts[given[1]]):
        raise ConfigError(f"{what}: group_size {opts['group_size']!r} and width "
                          f"{opts['width']!r} disagree; set one (width is DDStore's name)")
    return parse(opts[given[0]], f"{what}.{given[0]}") if given else None


def check_size(w: int, node_of: np.ndarray) -> None:
    """Raise a ConfigError naming the valid sizes unless `w` is one."""
    node_of = np.asarray(node_of)
    p = int(node_of.size)
    if w in valid_sizes(node_of):
        return
    rpn = np.bincount(node_of)
    per_node = f"{rpn[0]} ranks a node" if np.all(rpn == rpn[0]) else "uneven ranks a node"
    why = f"does not divide the {p} ranks" if p % w else "would split a node across groups"
    raise ConfigError(f"group_size {w} {why}; with {per_node} choose one of "
                      f"{', '.join(map(str, valid_sizes(node_of)))} (or auto)")


def make(world, group_size=None) -> Group | None:
    """Collective. This rank's :class:`Group` for `group_size` (None: all ranks), or None on one
    process without MPI. A Group passed in is returned as is."""
    if isinstance(group_size, Group):
        return group_size
    if world is None:  # one process: only W = 1
        w = parse(group_size)
        if w not in (None, 1):
            check_size(w, np.zeros(1, dtype=np.int64))
        return None
    # the size checked and agreed in one reduction (ranks given different sizes would split
    # into groups that do not match): one line on every rank, said once
    w = agree_settings(world, {"group_size": _size_text(group_size, world.size)}, _resolved,
                       group_size, world)
    index = world.rank // w
    owned = world.size > 1
    comm = world.comm.Split(color=index, key=world.rank) if owned else world.comm
    node_of = np.asarray(world.node_of[index * w:(index + 1) * w])
    me = world.rank - index * w
    same = node_of == node_of[me]
    return Group(comm, me, w, node_of, index, world.size // w, world.size,
                 int(same[:me].sum()), int(same.sum()), owned)


def _resolved(group_size, world) -> int:
    """`group_size` as a number of ranks of `world` (None: all), checked (:func:`check_size`)."""
    w = parse(group_size)
    if w == "auto":
        raise internal("group_size auto must be resolved by the estimator before the store is "
                       "built (mdloader_plugin.loader.open)")
    w = world.size if w is None else w
    check_size(w, world.node_of)
    return w


def _size_text(group_size, size: int) -> str:
    """`group_size` as comparable text (all ranks and their number read alike)."""
    try:
        w = parse(group_size)
    except Exception:  # noqa: BLE001 - its own error follows, on every rank alike
        return repr(group_size)
    return str(size if w is None else w)
