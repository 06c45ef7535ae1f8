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


class MaxAtomsBatches(NodeBudgetBatches):
    """fairchem's atom-capped batches over a list of graphs (module docstring).

    Args:
        natoms: atoms of every list entry.
        max_atoms: the atom cap of a batch.
        world_size: ranks the batches are dealt to.
        ids: the store id of every list entry (default: the entry's position).
        shuffle, seed, drop_last: fairchem's sampler's options.
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
        packed = NodeBudgetBatches.batches(self, 0)
        flat = np.fromiter((i for b in packed for i in b), dtype=np.int64,
                           count=sum(len(b) for b in packed))
        self.starts = np.zeros(len(packed) + 1, dtype=np.int64)
        np.cumsum([len(b) for b in packed], out=self.starts[1:])
        self.num_entries = len(packed)
        self.skipped = self.num_samples - int(flat.size)
        self._atoms = (np.add.reduceat(self.costs[flat], self.starts[:-1]).astype(np.int32)
                       if flat.size else np.zeros(0, np.int32))
        # what the epochs need: the batches' store ids (4 B a packed graph below 2^31 ids)
        small = self.ids.size == 0 or int(self.ids.max()) < 2**31
        self.flat = self.ids[flat].astype(np.int32 if small else np.int64)
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


MaxAtomsPlan = MaxAtomsBatches  # its old name
