"""The schedule: which sample ids every rank takes at every step of every epoch.

The dealing is the one ``torch.utils.data.DistributedSampler`` does for the same
``(num_samples, world_size, seed, epoch, shuffle, drop_last)``: the epoch's permutation, padded
by repeating its head (or truncated with ``drop_last``) to a multiple of the world size, and dealt
round-robin (rank ``r`` takes positions ``r, r + P, r + 2P, ...``). Each rank's share is then cut
into batches of ``batch_size`` (the last one may be short; every rank gets the same number of
steps and the same batch sizes).

The permutation is an :mod:`.order`: ``torch`` is DistributedSampler's own (``torch.randperm``
seeded with ``seed + epoch``: the same ids in the same order, a list of ``N`` ids an epoch),
``feistel`` a keyed bijection evaluated only at the positions a step needs (no list, no
epoch-start cost; another sequence with the same guarantees), ``auto`` (default) ``torch`` up to
4M samples and ``feistel`` above. A step is computed from positions: step ``k`` of rank ``r``
takes padded-list positions ``q = (k B + j) P + r``, i.e. permutation positions ``offset +
q mod (N - offset)``, so a step costs ``P B`` order evaluations and nothing is materialised.

Because the schedule is a pure function of ``(seed, epoch, step)``, every rank knows what every
other rank needs: the collective backend needs no request round, and any step can be replayed for a
resume or for checking that two backends agree byte for byte. Resume state is
``ResumeState(seed, epoch, step)`` plus the ``world_size``, ``batch_size``, ``offset`` and
``order`` it was taken with (a state resumes only under the same order).

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

Several data sets (``mix``, :mod:`.mixes`): the epoch's list is the mix's expanded list (ids of
small data sets repeated, of large ones cut, each repeat an entry of its own) in the order of a
``DistributedSampler`` permutation of its positions, and everything above applies to that list:
``num_samples`` is then the expanded epoch size, ``num_ids`` the store's sample count.

A rank's own step plans come from :meth:`Schedule.planner` (:mod:`.planner`, ``O(b)`` a step);
the whole world's step (``O(P b)``), which the loader never computes, is in :mod:`.reference`
for tests and benchmarks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from .balance import BALANCE_COLUMNS, BALANCE_WINDOW, balance_plan
from .order import ExpandedOrder, ListOrder, epoch_order, order_class, resolve
from .planner import EpochSpan, RankPlanner, StepRun

__all__ = ["Schedule", "ResumeState", "balance_plan", "consumed_prefix", "resume_position",
           "epoch_permutation"]


@dataclass(frozen=True)
class ResumeState:
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
    order: str = ""  # the resolved order name ("" = unknown, taken to be the loader's)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ResumeState":
        try:
            extra = [int(d.get(k, 0)) for k in ("world_size", "batch_size", "offset")]
            st = cls(int(d["seed"]), int(d["epoch"]), int(d["step"]), *extra,
                     order=str(d.get("order", "") or ""))
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


def resume_position(state: ResumeState, num_samples: int, world_size: int, batch_size: int,
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


def epoch_permutation(num_samples: int, seed: int, epoch: int, shuffle: bool,
                      order: str = "torch") -> np.ndarray:
    """The whole permutation of one epoch (``torch``: DistributedSampler's). Materialises ``N``
    ids: for tests and small data sets; the schedule itself never calls it."""
    ordering = epoch_order(resolve(order, num_samples), num_samples, seed, epoch, shuffle)
    return ordering.ids_at(np.arange(num_samples, dtype=np.int64))


class Schedule:
    """Which ids every rank takes at every step of every epoch (DistributedSampler's dealing).

    Args:
        num_samples: size of the data set (global).
        world_size: number of ranks taking batches.
        batch_size: samples per rank per step.
        shuffle: shuffle each epoch (``seed + epoch``) or keep file order.
        seed: base seed, the same on every rank.
        drop_last: drop the tail that does not divide evenly among ranks (else pad by repeating
            the head of the order, as DistributedSampler does).
        order: ``"auto"``, ``"torch"`` or ``"feistel"`` (:mod:`.order`).
        weights: optional per-sample cost (e.g. atoms). Each step's ids are then re-dealt among
            the ranks of each balance window (`balance_window` consecutive ranks, in blocks of
            `balance_columns` columns, :mod:`.balance`) so their summed weights are about equal;
            the ids of a step, and so of an epoch, do not change, only which rank takes which.
        balance_window: ranks a balance window (default :data:`.balance.BALANCE_WINDOW`).
        balance_columns: columns a balance block (default :data:`.balance.BALANCE_COLUMNS`).
        mix: a :class:`~mdloader_plugin.sampling.mixes.Mix` over the store's data sets (None: every
            sample once an epoch).
    """

    def __init__(self, num_samples: int, world_size: int, batch_size: int, *,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                 weights: np.ndarray | None = None, mix=None, order: str = "auto",
                 balance_window: int | None = None, balance_columns: int | None = None):
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
        self.inner = None  # the mix's per-data-set permutations, evaluated (no list)
        if mix is None or mix.arithmetic:  # a mix's entries map to ids by arithmetic: no list
            self.order = resolve(order, num_samples)
        elif (inner := mix.within(resolve(order, num_samples))) is not None:
            self.order, self.inner = resolve(order, num_samples), inner
        elif order in ("auto", "torch"):
            self.order = "torch"  # this mix's expanded list is kept whatever its size
        else:
            raise ValueError(f"order={order!r} with sampling {mix.name!r}: its epoch list is "
                             "expanded and kept (DistributedSampler's order of its positions); "
                             "use order='torch' or 'auto'")
        self.num_samples = num_samples
        self.world_size = world_size
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.per_rank = self._per_rank(num_samples)
        self._cache: tuple[int, object] | None = None  # (epoch, its order)
        if weights is not None:
            weights = np.asarray(weights)
            if weights.shape != (self.num_ids,):
                raise ValueError(f"weights must have one entry per sample ({self.num_ids}), got "
                                 f"shape {weights.shape}")
        self.weights = weights
        self.balance_window = int(balance_window or BALANCE_WINDOW)
        self.balance_columns = int(balance_columns or BALANCE_COLUMNS)
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

    @property
    def _listed(self) -> bool:
        """Whether the epoch is the mix's expanded list, kept (not evaluated per position)."""
        return self.mix is not None and not self.mix.arithmetic and self.inner is None

    def epoch_order(self, epoch: int):
        """The permutation of `epoch` (:mod:`.order`), made once an epoch."""
        if self._cache is None or self._cache[0] != epoch:
            self._cache = None  # the previous epoch's list goes before the next is made
            base = None if self._listed else \
                epoch_order(self.order, self.num_samples, self.seed, epoch, self.shuffle)
            if self.mix is None:
                self._cache = (epoch, base)
            elif base is None:
                self._cache = (epoch, ListOrder(self.mix.order(self.seed, epoch, self.shuffle)))
            else:
                sets = self.mix.sets
                self._cache = (epoch, ExpandedOrder(base, sets.starts, sets.sizes,
                                                    self.mix.counts, self.inner))
        return self._cache[1]

    @property
    def order_bytes(self) -> int:
        """Bytes an epoch's order holds on this rank (a ``torch`` list, or ~0)."""
        if self._listed:  # the expanded list, int64
            return self.num_samples * 8
        return order_class(self.order, self.shuffle).bytes_for(self.num_samples)

    def memory(self) -> dict:
        """This rank's bytes of the schedule by structure: ``order`` (:attr:`order_bytes`) and
        ``balance_weights`` (the per-sample weights, if any)."""
        return {"order": self.order_bytes,
                "balance_weights": 0 if self.weights is None else int(self.weights.nbytes)}

    def ids_at(self, epoch: int, lo: int, hi: int, ranks=None) -> np.ndarray:
        """``[world_size, hi - lo]`` ids at per-rank positions ``lo..hi-1`` of `epoch` (only the
        rows of `ranks`, an int array, if given)."""
        rows = np.arange(self.world_size, dtype=np.int64) if ranks is None else \
            np.asarray(ranks, dtype=np.int64)
        q = np.arange(lo, hi, dtype=np.int64) * self.world_size
        return self.ids_at_positions(epoch, q[None, :] + rows[:, None])

    def ids_at_positions(self, epoch: int, q: np.ndarray) -> np.ndarray:
        """Ids at positions `q` of `epoch`'s padded list (rank ``r``'s ``i``-th id is at
        ``i P + r``): a resumed epoch's offset skipped, padding repeating the head."""
        offset = self.offset_of(epoch)
        return self.epoch_order(epoch).ids_at(offset + q % (self.num_samples - offset))

    def epoch_table(self, epoch: int) -> np.ndarray:
        """``[world_size, per_rank]`` sample ids: row ``r`` is rank ``r``'s order this epoch
        (materialised: for tests and small data sets; steps use :meth:`planner`)."""
        return self.ids_at(epoch, 0, self.per_rank_in(epoch))

    def raw_rows(self, epoch: int, step: int, ranks: np.ndarray) -> np.ndarray:
        """The rows of `ranks` at `step` before any weight balancing (``[len(ranks), b]``)."""
        lo = step * self.batch_size
        return self.ids_at(epoch, lo, lo + self.batch_len(step, epoch), ranks)

    def planner(self, rank: int, lo: int = 0, hi: int = 0, group_first: int = 0,
                group_size: int | None = None) -> RankPlanner:
        """Rank `rank`'s own step plans (:class:`.planner.RankPlanner`; `lo`, `hi`: its block of
        ids, needed only for the collective backend's sends)."""
        return RankPlanner(self, rank, lo, hi, group_first, group_size)

    def row(self, epoch: int, step: int, rank: int) -> np.ndarray:
        """Rank `rank`'s ids at `step` (``O(b)``; one-off: keep a :meth:`planner` for steps)."""
        return self.planner(rank).row(epoch, step)

    def step_run(self, run: StepRun | None, epoch: int, step: int, positions: int,
                 ranks: np.ndarray | None = None) -> StepRun:
        """The run of steps holding `step`: `run` itself if it holds it (same epoch and
        offset), else a new :class:`~.planner.StepRun` of about `positions` ids, the
        :meth:`ids_at` rows of `ranks` (all ranks if None) from step ``first``'s first position
        up to step ``end``'s (the epoch's last step may be short)."""
        offset = self.offset_of(epoch)
        if run is not None and run.holds(epoch, offset, step):
            return run
        rows = self.world_size if ranks is None else len(ranks)
        span = max(1, positions // (self.batch_size * rows))
        first = step - step % span
        last = min(first + span, self.steps_in(epoch))
        hi = min(last * self.batch_size, self.per_rank_in(epoch))
        return StepRun(epoch, offset, first, last,
                       self.ids_at(epoch, first * self.batch_size, hi, ranks))

    def epoch_span(self, epoch: int, lo: int, hi: int) -> EpochSpan:
        """Where the ids of ``[lo, hi)`` sit in `epoch`'s order, and the epoch's sizes (what
        :class:`~.planner.EpochInverse` needs)."""
        pos, ids = self.epoch_order(epoch).positions_in(lo, hi)
        offset = self.offset_of(epoch)
        return EpochSpan(pos, ids, offset, self.num_samples - offset,
                         self.per_rank_in(epoch) * self.world_size, self.steps_in(epoch))

    def rank_indices(self, epoch: int, rank: int) -> np.ndarray:
        """All ids rank `rank` takes in `epoch`, in order (DistributedSampler's ``__iter__``):
        ``N / P`` evaluations of the order (with weights every step's balance window)."""
        if self.weights is not None:
            me = self.planner(rank)
            return np.concatenate([me.row(epoch, s) for s in range(self.steps_in(epoch))])
        return self.ids_at(epoch, 0, self.per_rank_in(epoch), [rank])[0]


