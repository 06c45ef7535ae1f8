"""Deterministic global sampling: which sample ids every rank needs at every step.

The order is the one ``torch.utils.data.DistributedSampler`` gives for the same
``(num_samples, world_size, seed, epoch, shuffle, drop_last)``: a ``torch.randperm`` seeded with
``seed + epoch``, padded by repeating its head (or truncated with ``drop_last``) to a multiple of
the world size, and dealt round-robin (rank ``r`` takes positions ``r, r + P, r + 2P, ...``).
Each rank's share is then cut into batches of ``batch_size`` (the last one may be short; every
rank gets the same number of steps and the same batch sizes).

Because the plan is a pure function of ``(seed, epoch, step)``, every rank knows what every other
rank needs: the collective backend needs no request round, and any step can be replayed for a
resume or for checking that two backends agree byte for byte. Resume state is
``SamplerState(seed, epoch, step)`` plus the ``world_size``, ``batch_size`` and ``offset`` it was
taken with.

Resuming on another number of ranks (or batch size). Round-robin dealing means the first ``k``
steps of an epoch consume a *prefix* of the epoch's padded order: ``k * B * P`` entries. The
padding repeats the order's head, so that prefix is the head ``perm[:offset]`` of the epoch's
permutation with ``offset = min(k * B * P, N)`` (``drop_last``: ``min(k * B * P, P * (N // P))``).
The rest of that epoch is then dealt exactly like a DistributedSampler epoch over the list
``perm[offset:]`` on the new world size (padded by repeating its own head, or trimmed with
``drop_last``): no sample already served comes back, every remaining one is served (repeats only
as padding, fewer than the new world size), and later epochs are normal. The offset composes, so
a resumed run can be resumed again on yet another size. Same world size and batch size: the
original table is kept and the remaining batches are exactly those of an uninterrupted run.

Several data sets (``mix``, :mod:`.sampling`): the epoch's list is the mix's expanded list (ids of
small data sets repeated, of large ones cut, each repeat an entry of its own) in the order of a
``DistributedSampler`` permutation of its positions, and everything above applies to that list:
``num_samples`` is then the expanded epoch size, ``num_ids`` the store's sample count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class SamplerState:
    """Where an iteration stands: the next step to serve is ``step`` of ``epoch``.

    ``world_size`` and ``batch_size`` are those the steps were counted with (0: unknown, taken
    to be the loader's own); ``offset`` is where this epoch's list starts in its permutation
    (non-zero only in an epoch resumed on another world size, see the module doc)."""

    seed: int
    epoch: int
    step: int
    world_size: int = 0
    batch_size: int = 0
    offset: int = 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SamplerState":
        try:
            extra = [int(d.get(k, 0)) for k in ("world_size", "batch_size", "offset")]
            st = cls(int(d["seed"]), int(d["epoch"]), int(d["step"]), *extra)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"loader state must have integer seed, epoch, step; "
                             f"got {d!r}") from exc
        if min(st.epoch, st.step, st.world_size, st.batch_size, st.offset) < 0:
            raise ValueError(f"loader state has negative entries: {d!r}")
        return st


def consumed_prefix(list_len: int, world_size: int, batch_size: int, step: int,
                    drop_last: bool) -> int:
    """Entries of an epoch's list (``perm[offset:]``, length `list_len`) consumed by its first
    `step` steps on `world_size` ranks of `batch_size`: a prefix, because dealing is round robin
    and padding repeats the head."""
    served = list_len - list_len % world_size if drop_last else list_len
    return min(step * batch_size * world_size, served)


def resume_position(state: SamplerState, num_samples: int, world_size: int, batch_size: int,
                    drop_last: bool) -> tuple[int, int]:
    """``(offset, step)`` that continue `state` on `world_size` ranks with `batch_size`.

    Same world size and batch size: the state as it is (the remaining batches are exactly those
    of an uninterrupted run). Otherwise the consumed prefix becomes the new offset and the rest of
    the epoch starts at step 0; a finished epoch becomes an empty one."""
    p_old = state.world_size or world_size
    b_old = state.batch_size or batch_size
    if (p_old, b_old) == (world_size, batch_size):
        return state.offset, state.step
    list_len = num_samples - state.offset
    per_rank = list_len // p_old if drop_last else -(-list_len // p_old)
    if state.step >= -(-per_rank // b_old):
        return num_samples, 0
    return state.offset + consumed_prefix(list_len, p_old, b_old, state.step, drop_last), 0


def epoch_permutation(num_samples: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    """The global order of one epoch, identical to DistributedSampler's."""
    if not shuffle:
        return np.arange(num_samples, dtype=np.int64)
    import torch  # the generator must be torch's to match DistributedSampler bit for bit

    g = torch.Generator()
    g.manual_seed(seed + epoch)
    return torch.randperm(num_samples, generator=g).numpy().astype(np.int64, copy=False)


class GlobalSampler:
    """Plans of all ranks for every step of every epoch.

    Args:
        num_samples: size of the data set (global).
        world_size: number of ranks taking batches.
        batch_size: samples per rank per step.
        shuffle: shuffle each epoch (``seed + epoch``) or keep file order.
        seed: base seed, the same on every rank.
        drop_last: drop the tail that does not divide evenly among ranks (else pad by repeating
            the head of the order, as DistributedSampler does).
        weights: optional per-sample cost (e.g. atoms). Each step's ids are then re-dealt among
            the ranks so their summed weights are about equal (:func:`balance_plan`); the ids of
            a step, and so of an epoch, do not change, only which rank takes which.
        mix: a :class:`~mdloader_plugin.sampling.Mix` over the store's data sets (None: every
            sample once an epoch).
    """

    def __init__(self, num_samples: int, world_size: int, batch_size: int, *,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 weights: np.ndarray | None = None, mix=None):
        if num_samples <= 0:
            raise ValueError(f"the data set is empty (num_samples={num_samples})")
        self.num_ids, self.mix = num_samples, mix
        if mix is not None:
            if mix.world_size not in (None, world_size):
                raise ValueError(f"sampling {mix.name!r} was planned for {mix.world_size} ranks, "
                                 f"not {world_size}")
            num_samples = mix.size
        if world_size <= 0:
            raise ValueError(f"world_size must be >= 1, got {world_size}")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if drop_last and num_samples < world_size:
            raise ValueError(f"drop_last with {num_samples} samples on {world_size} ranks leaves "
                             "no sample for some ranks; use fewer ranks or drop_last=False")
        self.num_samples = num_samples
        self.world_size = world_size
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.per_rank = self._per_rank(num_samples)
        self._cache: tuple[int, np.ndarray] | None = None
        if weights is not None:
            weights = np.asarray(weights)
            if weights.shape != (self.num_ids,):
                raise ValueError(f"weights must have one entry per sample ({self.num_ids}), got "
                                 f"shape {weights.shape}")
        self.weights = weights
        self.partial: tuple[int, int] | None = None  # (epoch, offset) of a resumed epoch

    def _per_rank(self, n: int) -> int:
        return n // self.world_size if self.drop_last else -(-n // self.world_size)

    def resume_at(self, epoch: int, offset: int) -> None:
        """Serve only ``perm[offset:]`` in `epoch` (the rest of an epoch begun elsewhere)."""
        if not 0 <= offset <= self.num_samples:
            raise ValueError(f"resume offset {offset} outside 0..{self.num_samples}")
        self.partial = (int(epoch), int(offset)) if offset else None
        self._cache = None

    def offset_of(self, epoch: int) -> int:
        return self.partial[1] if self.partial and self.partial[0] == epoch else 0

    def per_rank_in(self, epoch: int) -> int:
        return self._per_rank(self.num_samples - self.offset_of(epoch))

    def steps_in(self, epoch: int) -> int:
        """Steps of `epoch` (fewer in a resumed epoch)."""
        return -(-self.per_rank_in(epoch) // self.batch_size)

    @property
    def total_size(self) -> int:
        return self.per_rank * self.world_size

    @property
    def steps_per_epoch(self) -> int:
        return -(-self.per_rank // self.batch_size)

    def batch_len(self, step: int, epoch: int | None = None) -> int:
        per_rank = self.per_rank if epoch is None else self.per_rank_in(epoch)
        return min(self.batch_size, per_rank - step * self.batch_size)

    def epoch_table(self, epoch: int) -> np.ndarray:
        """``[world_size, per_rank]`` sample ids: row ``r`` is rank ``r``'s order this epoch."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        order = (self.mix.order(self.seed, epoch, self.shuffle) if self.mix is not None else
                 epoch_permutation(self.num_samples, self.seed, epoch, self.shuffle))
        order = order[self.offset_of(epoch):]
        per_rank = self._per_rank(order.size)
        total = per_rank * self.world_size
        if total > order.size:
            reps = -(-(total - order.size) // order.size)
            order = np.concatenate([order, np.tile(order, reps)[: total - order.size]])
        else:
            order = order[:total]
        table = np.ascontiguousarray(order.reshape(per_rank, self.world_size).T)
        self._cache = (epoch, table)
        return table

    def plan(self, epoch: int, step: int) -> np.ndarray:
        """``[world_size, b]`` ids every rank takes at `step` of `epoch` (b = this step's size)."""
        if not 0 <= step < self.steps_in(epoch):
            raise IndexError(f"step {step} outside 0..{self.steps_in(epoch) - 1}")
        lo = step * self.batch_size
        plan = self.epoch_table(epoch)[:, lo:lo + self.batch_size]
        return plan if self.weights is None else balance_plan(plan, self.weights)

    def rank_indices(self, epoch: int, rank: int) -> np.ndarray:
        """All ids rank `rank` takes in `epoch`, in order (DistributedSampler's ``__iter__``)."""
        if self.weights is not None:
            return np.concatenate([self.plan(epoch, s)[rank] for s in range(self.steps_in(epoch))])
        return self.epoch_table(epoch)[rank]


def balance_plan(plan: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Re-deal a step's ``[P, b]`` ids so every rank keeps ``b`` ids with about equal weight.

    Heaviest first, dealt in serpentine rounds (ranks 0..P-1, then P-1..0, ...): every rank gets
    one id a round, and each round's imbalance is at most the spread of that round's weights, so
    the totals differ by at most about one sample's weight. Vectorised: O(Pb log Pb) a step.
    """
    ranks, b = plan.shape
    if ranks == 1 or b == 0:
        return plan
    ids = plan.reshape(-1)
    deal = ids[np.argsort(-weights[ids], kind="stable")].reshape(b, ranks)
    deal[1::2] = deal[1::2, ::-1]
    return np.ascontiguousarray(deal.T)
