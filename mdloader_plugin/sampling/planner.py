"""What ONE rank needs of a step, at a cost that does not grow with the number of ranks.

A step of the whole world is ``[P, b]`` ids (:func:`.reference.world_step`, the reference the
tests compare with); computing it and scanning it for one's own records costs ``O(P b)`` a rank
a step (20-39 ms at P = 8,192). A rank needs only two things of it:

* its own row (``b`` ids): ``b`` evaluations of the epoch's order at the positions of its row,
  computed in runs of steps (:data:`ROW_POSITIONS` ids) — ``O(b)`` a step;
* for the collective backend, which of its OWN samples every other rank takes this step, grouped
  by destination rank (ascending) and in the destination's plan order: the owner-side inverse.
  Once an epoch the rank inverts the epoch's order over its own block (``feistel``: the inverse
  network, ``O(N/P)``; a list order (``torch``, a mix's): one pass over the list it already
  made), maps each position to the padded list's entries that hold it (``q``: the offset of a
  resumed epoch skipped, padding repeats the head, ``drop_last`` cuts the tail), and sorts them
  by ``(step, destination, slot)`` once; a step is then a slice (:class:`EpochInverse`).
  ``O(N/P log N/P)`` an epoch, ``O(b)`` a step, 6-8 bytes an own sample.

With replica groups of ``W`` ranks a rank serves only its group's ``W`` rows, and its block is
``N/W``: the inverse costs ``O(N/W)`` an epoch (``P b / W`` a step amortised) against ``O(W b)``
a step for computing the group's rows forward. :class:`RankPlanner` takes whichever is smaller
(forward when ``W*W < P``), both exact.

Weighted (atom-balanced) plans re-deal ids within blocks of a balance window (:mod:`.balance`);
the rank computes its window's rows and, for the collective, the block of each own id this step
(``w g`` ids each: ``O(b w g)`` a step, at any number of ranks).

Everything here is exact: the ids, their order and the send lists are those the whole-world
step gives (tests/unit/sampling/test_plan.py compares them on small P and N).

The seam with the schedule is :class:`ScheduleView`: the few things a planner reads of the
:class:`~.schedule.Schedule` it is handed (sizes, the weights, and ids at positions, in runs of
steps: :class:`StepRun`); the inverse reads one :class:`EpochSpan` of it, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

import numpy as np

from .balance import block_place, deal_blocks, window_of

ROW_POSITIONS = 1 << 13  # a rank's row is computed in runs of about this many ids


class StepRun(NamedTuple):
    """A run of steps computed together: the ids of `rows` ranks from step `first`'s first
    position up to step `end`'s (``ids``: ``[rows, positions]``; the epoch's last step may be
    short), for `epoch` resumed at `offset`."""

    epoch: int
    offset: int
    first: int
    end: int
    ids: np.ndarray

    def holds(self, epoch: int, offset: int, step: int) -> bool:
        return (self.epoch, self.offset) == (epoch, offset) and self.first <= step < self.end

    def columns(self, step: int, batch_size: int, length: int) -> np.ndarray:
        """The ``[rows, length]`` ids of `step` (in a run of `batch_size` columns a step)."""
        lo = (step - self.first) * batch_size
        return self.ids[:, lo:lo + length]


class EpochSpan(NamedTuple):
    """What the inverse needs of one epoch: where the ids of a block sit in its order
    (``positions``, ``ids``), the resumed epoch's `offset`, the list's `length` (``N - offset``),
    its padded `total` (``per_rank * P``) and its `steps`."""

    positions: np.ndarray
    ids: np.ndarray
    offset: int
    length: int
    total: int
    steps: int


class ScheduleView(Protocol):
    """What a planner reads of the schedule it is handed (:class:`~.schedule.Schedule`)."""

    world_size: int
    batch_size: int
    weights: np.ndarray | None
    balance_window: int
    balance_columns: int

    def steps_in(self, epoch: int) -> int: ...

    def batch_len(self, step: int, epoch: int | None = None) -> int: ...

    def offset_of(self, epoch: int) -> int: ...

    def ids_at(self, epoch: int, lo: int, hi: int, ranks=None) -> np.ndarray: ...

    def ids_at_positions(self, epoch: int, q: np.ndarray) -> np.ndarray: ...

    def step_run(self, run: StepRun | None, epoch: int, step: int, positions: int,
                 ranks: np.ndarray | None = None) -> StepRun: ...

    def epoch_span(self, epoch: int, lo: int, hi: int) -> EpochSpan: ...


def rank_plan_bytes(per_rank: int, batch_size: int, collective: bool) -> int:
    """Bytes a :class:`RankPlanner` keeps at most (unweighted, no groups): its run of own-row
    ids (8 B an id, up to :data:`ROW_POSITIONS`) and, for the collective backend, the epoch's
    inverse over its own block (8 B an own position at most below 32,768 ranks: 4 B its id, 2 B
    its destination, 2 B its column with weights; 8 B a step boundary)."""
    b = max(1, int(batch_size))
    rows = 8 * min(max(1, ROW_POSITIONS // b) * b, per_rank)
    return rows + ((8 * per_rank + 8 * (-(-per_rank // b) + 1)) if collective else 0)


@dataclass
class StepPlan:
    """One rank's step plan: `ids` (its row, in plan order) of `step` of `epoch`. `sends`:
    ``(ids, dest)`` of the samples of its own block other ranks (group ranks) take this step,
    grouped by destination ascending, in the destination's plan order, when they came with the
    plan (scanned from a whole table: :meth:`from_table`); None: the collective backend asks the
    planner it was handed (:meth:`RankPlanner.sends`, the epoch's inverse)."""

    ids: np.ndarray
    epoch: int = 0
    step: int = 0
    sends: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def from_table(cls, table: np.ndarray, rank: int, lo: int, hi: int) -> "StepPlan":
        """Row `rank` of a whole ``[W, b]`` table, and the sends found by scanning all of it
        (``O(W b)``). A table of batches of different sizes (cost-aware batches,
        :mod:`.node_budget`) pads short rows with -1: the padding is no sample and is dropped."""
        row = table[rank]
        if row.size and row[-1] < 0:
            row = row[row >= 0]
        return cls(row, sends=scan_sends(table, lo, hi))


def scan_sends(table: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, dest)`` of the entries of `table` (``[W, b]``) in ``[lo, hi)``, row-major."""
    flat = table.reshape(-1)
    mask = (flat >= lo) & (flat < hi)
    dest = np.repeat(np.arange(table.shape[0], dtype=np.int64), table.shape[1])[mask]
    return flat[mask], dest


class EpochInverse:
    """Where the ids of ``[lo, hi)`` sit in one epoch's padded list (`span`, of a world of `p`
    ranks and batches of `b`), bucketed by step and by destination rank (only destinations in
    ``[r0, r1)``; `dest` is relative to ``r0``); `weighted`: keep each entry's column too."""

    def __init__(self, span: EpochSpan, p: int, b: int, lo: int, hi: int, r0: int, r1: int,
                 weighted: bool = False):
        keep = span.positions >= span.offset
        u, ids = span.positions[keep] - span.offset, span.ids[keep]
        length, total = span.length, span.total
        qs, idl = [], []
        lap = 0
        while length and lap * length < total:  # padding repeats the list from its head
            q = u + lap * length
            m = q < total
            qs.append(q[m])
            idl.append(ids[m])
            lap += 1
        q = np.concatenate(qs) if qs else np.zeros(0, np.int64)
        ids = np.concatenate(idl) if idl else np.zeros(0, np.int64)
        dest, slot = q % p, q // p
        if (r0, r1) != (0, p):
            m = (dest >= r0) & (dest < r1)
            dest, slot, ids = dest[m] - r0, slot[m], ids[m]
        width = r1 - r0
        key = ((slot // b) * width + dest) * b + slot % b
        order = np.argsort(key, kind="stable")
        key = key[order]
        self.lo = lo
        self.ids = (ids[order] - lo).astype(np.int32 if hi - lo < 2**31 else np.int64)
        self.dest = dest[order].astype(np.int16 if width < 2**15 else np.int32)
        # columns, for weighted plans only (an id's balance block: :mod:`.balance`)
        self.col = (slot[order] % b).astype(np.int16 if b < 2**15 else np.int32) \
            if weighted else None
        self.step_starts = np.searchsorted(key, np.arange(span.steps + 1, dtype=np.int64)
                                           * (width * b))

    @property
    def nbytes(self) -> int:
        col = 0 if self.col is None else self.col.nbytes
        return int(self.ids.nbytes + self.dest.nbytes + col + self.step_starts.nbytes)

    def step(self, step: int) -> tuple[np.ndarray, np.ndarray]:
        s0, s1 = int(self.step_starts[step]), int(self.step_starts[step + 1])
        return self.ids[s0:s1] + np.int64(self.lo), self.dest[s0:s1].astype(np.int64)

    def step_columns(self, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`step` and each entry's column in its (unbalanced) row."""
        s0, s1 = int(self.step_starts[step]), int(self.step_starts[step + 1])
        return (*self.step(step), self.col[s0:s1].astype(np.int64))


class RankPlanner:
    """One rank's step plans: its row and (for the collective backend) its sends, per step.

    Args:
        schedule: the :class:`~.schedule.Schedule` (every rank's identical copy), read only
            through :class:`ScheduleView`.
        rank: this rank in the world (its row is world row `rank`).
        lo: the first id of this rank's block (in its group).
        hi: the end of this rank's block of ids (exclusive).
        group_first: the first world rank this rank's group serves (default 0).
        group_size: the ranks ``[group_first, group_first + group_size)`` this rank's group
            serves (default: all ranks).
    """

    def __init__(self, schedule: ScheduleView, rank: int, lo: int, hi: int,
                 group_first: int = 0, group_size: int | None = None):
        self.schedule, self.rank, self.lo, self.hi = schedule, int(rank), int(lo), int(hi)
        self.r0 = int(group_first)
        p = schedule.world_size
        self.r1 = self.r0 + (p if group_size is None else int(group_size))
        w = self.r1 - self.r0
        self.forward = w * w < p  # small groups: their rows beat the inverse
        self._rows: StepRun | None = None
        self._inverse: tuple | None = None  # ((epoch, offset), EpochInverse)
        self._dealt: tuple | None = None  # ((epoch, offset, step), the one window's dealt rows)

    @property
    def nbytes(self) -> int:
        """Bytes this planner keeps: the run of own-row ids and the epoch's inverse."""
        return sum(self.memory().values())

    def memory(self) -> dict:
        """``plan_rows`` (the run of own-row ids kept) and ``inverse`` (the epoch's inverse
        over this rank's block: 6-8 bytes an own sample and a step boundary a step)."""
        return {"plan_rows": 0 if self._rows is None else int(self._rows.ids.nbytes),
                "inverse": 0 if self._inverse is None else self._inverse[1].nbytes}

    def step(self, epoch: int, step: int) -> StepPlan:
        """This rank's step plan (its row; the sends: :meth:`sends`)."""
        return StepPlan(self.row(epoch, step), epoch, step)

    def row(self, epoch: int, step: int) -> np.ndarray:
        sch = self.schedule
        if not 0 <= step < sch.steps_in(epoch):
            raise IndexError(f"step {step} outside 0..{sch.steps_in(epoch) - 1}")
        if sch.weights is None:
            return self._raw_run(epoch, step, np.array([self.rank]))[0]
        if sch.world_size <= sch.balance_window:  # one window: the world's step, dealt once
            return self._one_window(epoch, step)[self.rank]
        w0, w1 = window_of(self.rank, sch.world_size, sch.balance_window)
        raw = self._raw_run(epoch, step, np.arange(w0, w1))
        return deal_blocks(raw, sch.weights, w1 - w0, sch.balance_columns)[self.rank - w0]

    def _raw_run(self, epoch: int, step: int, ranks: np.ndarray) -> np.ndarray:
        """Unbalanced rows of `ranks` (this rank, or its balance window) at `step`, computed in
        runs of steps of about :data:`ROW_POSITIONS` ids and kept until a step outside."""
        sch = self.schedule
        run = self._rows = sch.step_run(self._rows, epoch, step, ROW_POSITIONS, ranks)
        return run.columns(step, sch.batch_size, sch.batch_len(step, epoch))

    def _one_window(self, epoch: int, step: int) -> np.ndarray:
        """All ``P <= w`` rows of a weighted `step`, dealt once (the row and the sends share)."""
        sch = self.schedule
        key = (epoch, sch.offset_of(epoch), step)
        if self._dealt is None or self._dealt[0] != key:
            raw = self._raw_run(epoch, step, np.arange(sch.world_size))
            dealt = deal_blocks(raw, sch.weights, sch.world_size, sch.balance_columns)
            self._dealt = (key, dealt)
        return self._dealt[1]

    def sends(self, epoch: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        """``(ids, dest)``: this rank's own ids the group's ranks take at `step`, grouped by
        destination (group rank, ascending) in their plan order."""
        sch = self.schedule
        if sch.weights is not None:
            return self._weighted_sends(epoch, step)
        if self.forward:
            lo = step * sch.batch_size
            rows = sch.ids_at(epoch, lo, lo + sch.batch_len(step, epoch),
                              np.arange(self.r0, self.r1))
            return scan_sends(rows, self.lo, self.hi)
        return self.inverse(epoch).step(step)

    def inverse(self, epoch: int) -> EpochInverse:
        sch = self.schedule
        key = (epoch, sch.offset_of(epoch))
        if self._inverse is None or self._inverse[0] != key:
            self._inverse = None  # the old epoch's arrays go first
            inv = EpochInverse(sch.epoch_span(epoch, self.lo, self.hi), sch.world_size,
                               sch.batch_size, self.lo, self.hi, self.r0, self.r1,
                               sch.weights is not None)
            self._inverse = (key, inv)
        return self._inverse[1]

    # -- weighted (balance blocks, :mod:`.balance`) ----------------------------------------
    def _weighted_sends(self, epoch: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        """The balanced destinations of this rank's ids: an id stays in its block (window of
        ranks, run of columns), so its place follows from the weights of its block alone.
        Windows wider than the group, or groups smaller than ``sqrt(P)``: the rows of the windows
        covering the group, dealt. One window (``P <= w``): the world's step, dealt once."""
        sch = self.schedule
        win, cols = sch.balance_window, sch.balance_columns
        if sch.world_size <= win and not self.forward:  # one window: the world's step
            return scan_sends(self._one_window(epoch, step)[self.r0:self.r1], self.lo, self.hi)
        if self.forward or (self.r1 - self.r0) % win:
            starts = np.arange(self.r0 - self.r0 % win, self.r1, win)
            ranks = (starts[:, None] + np.arange(win)[None, :]).reshape(-1)
            ranks = ranks[ranks < sch.world_size]
            lo = step * sch.batch_size
            raw = sch.ids_at(epoch, lo, lo + sch.batch_len(step, epoch), ranks)
            rows = deal_blocks(raw, sch.weights, win, cols)
            ids, d = scan_sends(rows, self.lo, self.hi)
            d = ranks[d] - self.r0
            m = (d >= 0) & (d < self.r1 - self.r0)
            return ids[m], d[m]
        ids, d, c = self.inverse(epoch).step_columns(step)
        return self._block_sends(epoch, step, ids, d + self.r0, c)

    def _block_sends(self, epoch, step, ids, d, c):
        """Place each own id (`ids`, unbalanced rank `d` and column `c`) by counting the ids of
        its block dealt before it: heavier, or as heavy and earlier (column, then rank)."""
        sch = self.schedule
        p, win, cols, wt = sch.world_size, sch.balance_window, sch.balance_columns, sch.weights
        w0 = d - d % win
        width = np.minimum(win, p - w0)
        t = c // cols
        c0 = t * cols
        ncol = np.minimum(cols, sch.batch_len(step, epoch) - c0)
        cc = np.arange(cols)[None, :, None]
        rr = np.arange(win)[None, None, :]
        valid = (cc < ncol[:, None, None]) & (rr < width[:, None, None])
        q = (step * sch.batch_size + c0[:, None, None] + cc) * p + w0[:, None, None] + rr
        q = np.where(valid, q, ((step * sch.batch_size + c) * p + d)[:, None, None])  # own
        bw = wt[sch.ids_at_positions(epoch, q)]
        mine = wt[ids][:, None, None]
        before = (bw > mine) | ((bw == mine) & (cc * win + rr < ((c - c0) * win + d - w0)
                                                 [:, None, None]))
        k = (before & valid).sum(axis=(1, 2))
        j, slot = block_place(k, width, t, cols)
        dest = w0 + j - self.r0
        order = np.argsort(dest * sch.batch_size + slot, kind="stable")
        return ids[order], dest[order]


class TablePlanner:
    """The planner of a batch table that deals whole steps (``step_table(epoch, step)``:
    ``[P, b]`` ids, short rows padded with -1), such as upstream HydraGNN's cost-aware batches
    (:mod:`.node_budget`): this rank's row and its sends found by scanning the group's rows
    (``O(W b)`` a step, what those tables compute anyway)."""

    nbytes = 0

    def __init__(self, table, rank: int, lo: int, hi: int, group_first: int = 0,
                 group_size: int | None = None):
        self.table, self.rank, self.lo, self.hi = table, int(rank), int(lo), int(hi)
        self.r0 = int(group_first)
        self.r1 = self.r0 + (table.world_size if group_size is None else int(group_size))

    def memory(self) -> dict:
        return {}

    def step(self, epoch: int, step: int) -> StepPlan:
        rows = self.table.step_table(epoch, step)[self.r0:self.r1]
        plan = StepPlan.from_table(rows, self.rank - self.r0, self.lo, self.hi)
        plan.epoch, plan.step = epoch, step
        return plan

    def row(self, epoch: int, step: int) -> np.ndarray:
        return self.step(epoch, step).ids

    def sends(self, epoch: int, step: int) -> tuple[np.ndarray, np.ndarray]:
        return self.step(epoch, step).sends
