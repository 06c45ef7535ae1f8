"""``max_atoms``: fairchem's atom-capped batches, as a batch table MDLoader fetches.

fairchem's ``MaxAtomDistributedBatchSampler`` (fairchem-core 2.x,
``fairchem/core/datasets/samplers/max_atom_distributed_sampler.py``) packs batches once, at
start-up, and only shuffles their order each epoch. :class:`MaxAtomsBatches` computes the same
batches for every rank at once (a pure function of the atom counts, the options, the epoch and
the number of ranks; no MPI):

1. order: ``numpy.random.default_rng(seed).permutation(N)``, the same every epoch (fairchem
   shuffles here whatever ``shuffle`` says);
2. pack greedily: a graph joins the open batch unless that would pass ``max_atoms`` atoms; a
   graph above ``max_atoms`` is left out (fairchem logs how many; so does the loader). This is
   :class:`~.node_budget.NodeBudgetBatches`'s packing with ``oversized_sample: skip`` and no graph
   cap; fairchem's ``min_atoms`` (default 0) is not offered;
3. distribute, every epoch: the batch order ``torch.randperm(B)`` seeded with ``seed + epoch``
   (``range(B)`` without shuffle), padded by repeating its head to a multiple of the ranks (or,
   with ``drop_last``, cut), rank ``r`` taking entries ``r, r + P, ...``.

So no batch holds more than ``max_atoms`` atoms, and a rank's batches are exactly fairchem's.
Batches differ in graph count; a step's plan is ``[P, b_max]`` store ids with short rows padded
by -1, which both backends skip. Every rank runs ``ceil(B / P)`` steps (``floor`` with
``drop_last``).

Resume on another world size. The batches do not depend on the number of ranks, and step ``k``
on ``P`` ranks has consumed exactly the head ``order[:k P]`` of the epoch's batch order. So a
state saved on ``P`` ranks continues on ``P'`` as a list over batches, like the schedule's over
samples (:func:`~.schedule.resume_position` with one batch an entry): the rest of that epoch deals
``order[offset:]`` to the ``P'`` ranks and every packed graph is served once. The plan's
``num_entries`` (batches) is what that position counts.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import ConfigError
from .node_budget import NodeBudgetBatches


def pack(order: np.ndarray, costs: np.ndarray, cap: int, window: int = 1 << 20) -> tuple:
    """fairchem's greedy packing of `order` (list positions) under `cap` atoms, without a
    Python object a graph: ``(flat, starts, atoms)``, the packed positions in batch order,
    batch ``k`` being ``flat[starts[k]:starts[k + 1]]`` with ``atoms[k]`` atoms. A graph above
    `cap` is left out; a graph joins the open batch unless that would pass `cap`; the last
    batch is kept. Worked through `window` positions at a time (a batch may span windows), a
    Python step a batch, not a graph."""
    small = order.size < 2**31
    flats, sizes, atoms = [], [], []
    open_n, open_c = 0, 0  # graphs and atoms of the batch still open
    for w in range(0, order.size, window):
        idx = order[w:w + window]
        c = costs[idx]
        idx = idx[c <= cap]
        c = costs[idx]
        flats.append(idx.astype(np.int32) if small else idx)
        if not c.size:
            continue
        cs = np.cumsum(c, dtype=np.int64)
        before = np.concatenate([[0], cs[:-1]])  # atoms of this window before each graph
        j = int(np.searchsorted(cs, cap - open_c, side="right"))  # where the open batch ends
        if j == c.size:
            open_n, open_c = open_n + j, open_c + int(cs[-1])
            continue
        nxt = np.searchsorted(cs, before + cap, side="right")  # greedy end from each start
        cuts, k = [j], int(nxt[j])
        while k < c.size:
            cuts.append(k)
            k = int(nxt[k])
        cut = np.asarray(cuts, dtype=np.int64)
        sizes += [[open_n + j], np.diff(cut)]
        atoms += [[open_c + int(before[j])], np.diff(before[cut])]
        open_n, open_c = int(c.size - cut[-1]), int(cs[-1] - before[cut[-1]])
    if open_n:
        sizes.append([open_n])
        atoms.append([open_c])
    flat = np.concatenate(flats) if flats else np.zeros(0, np.int32)
    n = np.concatenate([np.asarray(x, dtype=np.int64) for x in sizes]) if sizes else []
    starts = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=starts[1:])
    total = (np.concatenate([np.asarray(x, dtype=np.int64) for x in atoms]) if atoms
             else np.zeros(0, np.int64))
    return flat, starts, total.astype(np.int32)


class MaxAtomsBatches(NodeBudgetBatches):
    """fairchem's atom-capped batches over a list of graphs (module docstring).

    Args:
        natoms: atoms of every list entry.
        max_atoms: the atom cap of a batch.
        world_size: ranks the batches are dealt to.
        ids: the store id of every list entry (default: the entry's position).
        shuffle: fairchem's sampler's option.
        seed: fairchem's sampler's option.
        drop_last: fairchem's sampler's option.
    """

    order = "max_atoms"

    def __init__(self, natoms, max_atoms: int, world_size: int, *, ids=None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        if int(max_atoms) <= 0:
            raise ConfigError(f"loader max_atoms must be a positive number of atoms, got "
                              f"{max_atoms!r}")
        super().__init__(natoms, int(max_atoms), world_size, ids=ids, shuffle=True, seed=seed,
                         oversized_sample="skip", drop_last=drop_last)
        self.shuffle = bool(shuffle)  # the batch order's; the packing always shuffles
        order = np.random.default_rng(self.seed).permutation(self.num_samples)
        flat, self.starts, self._atoms = pack(order, self.costs, self.max_nodes)
        del order
        self.num_entries = int(self.starts.size - 1)
        self.skipped = self.num_samples - int(flat.size)
        # what the epochs need: the batches' store ids (4 B a packed graph below 2^31 ids)
        small = self.ids.size == 0 or int(self.ids.max()) < 2**31
        if ids is None and flat.dtype == (np.int32 if small else np.int64):
            self.flat = flat  # positions are the ids
        else:
            self.flat = self.ids[flat].astype(np.int32 if small else np.int64)
        del flat
        self.costs = self.ids = None  # packed once: neither is needed again
        if self.num_entries < self.world_size:
            raise ConfigError(f"loader max_atoms {self.max_nodes}: {self.num_entries} batches "
                              f"for {self.world_size} ranks (fairchem's sampler refuses fewer "
                              "batches than ranks); lower max_atoms or use fewer ranks")
        self._resume: tuple[int, int] | None = None  # (epoch, offset in batches)
        self._list: tuple | None = None  # ((epoch, offset), the epoch's dealt batch list)

    def _order(self, epoch: int) -> list[int]:
        return np.random.default_rng(self.seed).permutation(self.num_samples).tolist()

    def batches(self, epoch: int = 0) -> list[list[int]]:
        """The packed batches (store ids), the same every epoch."""
        return [self.flat[a:b].tolist() for a, b in zip(self.starts[:-1], self.starts[1:])]

    def batch_atoms(self) -> np.ndarray:
        """Atoms of every packed batch."""
        return self._atoms

    def epoch_list(self, epoch: int) -> np.ndarray:
        """The batches (indices into :meth:`batches`) served in `epoch`, step-major: step ``s``
        gives rank ``r`` entry ``s P + r``; a resumed epoch starts at its offset."""
        offset = self.offset_of(epoch)
        key = (epoch, offset)
        if self._list is not None and self._list[0] == key:
            return self._list[1]
        nb, p = self.num_entries, self.world_size
        if self.shuffle:
            import torch

            g = torch.Generator().manual_seed(self.seed + epoch)
            order = torch.randperm(nb, generator=g).numpy()
        else:
            order = np.arange(nb, dtype=np.int64)
        rest = order[offset:]
        if self.drop_last:
            out = rest[:rest.size - rest.size % p]
        else:
            out = np.resize(rest, -(-rest.size // p) * p) if rest.size else rest
        self._list = (key, out)
        return out

    def steps(self, epoch: int) -> list[list[list[int]]]:
        """Every step of `epoch`: the batch (store ids) of each rank, in rank order."""
        lst, p, packed = self.epoch_list(epoch), self.world_size, self.batches()
        return [[packed[b] for b in lst[s:s + p]] for s in range(0, lst.size, p)]

    def steps_in(self, epoch: int) -> int:
        return int(self.epoch_list(epoch).size) // self.world_size

    def _batch(self, k: int) -> np.ndarray:
        return self.flat[self.starts[k]:self.starts[k + 1]]

    def step_table(self, epoch: int, step: int) -> np.ndarray:
        """``[P, b_max]`` store ids of `step` (short rows padded with -1)."""
        p = self.world_size
        rows = [self._batch(int(k)) for k in self.epoch_list(epoch)[step * p:(step + 1) * p]]
        out = np.full((p, max(r.size for r in rows)), -1, dtype=np.int64)
        for r, row in enumerate(rows):
            out[r, :row.size] = row
        return out

    def batch_len(self, step: int, epoch: int | None = None) -> int:
        k = int(self.epoch_list(0 if epoch is None else epoch)[step * self.world_size + self.rank])
        return int(self.starts[k + 1] - self.starts[k])

    def offset_of(self, epoch: int) -> int:
        return self._resume[1] if self._resume is not None and self._resume[0] == epoch else 0

    def resume_at(self, epoch: int, offset: int) -> None:
        if not 0 <= offset <= self.num_entries:
            raise ConfigError(f"loader state offset {offset} is outside this data set's "
                              f"{self.num_entries} batches of max_atoms {self.max_nodes}; is it "
                              "from another data set or max_atoms?")
        self._resume = (int(epoch), int(offset)) if offset else None

    @property
    def order_bytes(self) -> int:
        listed = 0 if self._list is None else self._list[1].nbytes
        return int(self.flat.nbytes + self.starts.nbytes + self._atoms.nbytes + listed)

