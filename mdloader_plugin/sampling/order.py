"""The order of an epoch: which sample id sits at each position of the epoch's permutation.

An order is asked only for the positions a step needs (``ids_at(positions)``), so an epoch
needs no list of ``N`` ids unless the order itself is one. Registry of orders (``ORDERS``):

``torch`` — DistributedSampler's permutation, ``torch.randperm(N)`` seeded with ``seed + epoch``
(bit for bit the order HydraGNN's and fairchem's own loaders give). It is a list: ``N`` ids of
the narrowest integer type (4 bytes a sample below 2**31 samples) and one ``randperm`` a rank an
epoch (~1.3 s at N = 2e7 on this machine's loaded cores).

``feistel`` — a keyed pseudo-random permutation evaluated at each position: a balanced Feistel
network of ``ROUNDS`` rounds over the ``n`` bits of ``N - 1`` (halves of ``ceil(n/2)`` and
``floor(n/2)`` bits, swapped each round; round function: a 64-bit multiply-xorshift mix of the
half, the round key and the round number), cycle-walked into ``[0, N)`` (re-applied while the
value is ``>= N``; ``2**n < 2N``, so < 2 passes on average).
A bijection by construction, O(1) memory (``ROUNDS`` keys), no epoch-start cost; evaluated in
numpy, or several times faster in the compiled kernels (``records/_kernels.c``, GIL released;
the same ids: tests/unit/sampling/test_order.py compares them). Keys come from ``(seed,
epoch)`` through splitmix64. Its statistics are tested against ``torch.randperm``
(tests/unit/sampling/test_order.py: position uniformity of single ids over keys, independence
of neighbouring ids, cycle counts, fixed points) and two deliberately weak permutations must
fail the same tests. It is not DistributedSampler's order: same guarantees
(every id once an epoch, deterministic, resumable), different sequence.

``auto`` — ``torch`` up to ``AUTO_TORCH_UP_TO`` samples (4M: the list costs <= 16 MB a rank,
framework-equal order where tests and comparisons happen), ``feistel`` above.

``shuffle=False`` gives the identity order whatever the name (no list either).
"""

from __future__ import annotations

import numpy as np

from ..core.blocks import inclusive_bounds, owner_of
from ..core.options import ORDER_CHOICES
from ..records import kernels

ROUNDS = 8
AUTO_TORCH_UP_TO = 1 << 22
_M64 = (1 << 64) - 1


class IdentityOrder:
    """File order: position ``q`` holds id ``q``."""

    name = "identity"
    nbytes = 0

    @staticmethod
    def bytes_for(num_samples: int) -> int:
        return 0

    def __init__(self, num_samples: int):
        self.num_samples = num_samples

    def ids_at(self, positions: np.ndarray) -> np.ndarray:
        return np.asarray(positions, dtype=np.int64)

    def positions_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """``(positions, ids)`` of every id in ``[lo, hi)`` (the order's inverse over a block)."""
        ids = np.arange(lo, hi, dtype=np.int64)
        return ids, ids

    @staticmethod
    def positions_of(ids: np.ndarray) -> np.ndarray:
        return np.asarray(ids, dtype=np.int64)


class ListOrder:
    """An order given as a list of ids (several data sets' expanded epoch, :mod:`.mixes`)."""

    name = "list"

    def __init__(self, ids: np.ndarray):
        self.perm = np.asarray(ids)
        self.num_samples = int(self.perm.size)

    @property
    def nbytes(self) -> int:
        return int(self.perm.nbytes)

    def ids_at(self, positions: np.ndarray) -> np.ndarray:
        return self.perm[positions].astype(np.int64)

    def positions_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        return list_positions_in(self.perm, lo, hi)


class TorchOrder:
    """DistributedSampler's permutation, kept as a list (narrowest integer type)."""

    name = "torch"

    def __init__(self, num_samples: int, seed: int, epoch: int):
        import torch  # the generator must be torch's to match DistributedSampler bit for bit

        g = torch.Generator()
        g.manual_seed(seed + epoch)
        small = num_samples <= np.iinfo(np.int32).max
        perm = torch.randperm(num_samples, generator=g, dtype=torch.int32 if small else torch.int64)
        self.num_samples, self.perm = num_samples, perm.numpy()

    @property
    def nbytes(self) -> int:
        return int(self.perm.nbytes)

    @staticmethod
    def bytes_for(num_samples: int) -> int:
        return num_samples * (4 if num_samples <= np.iinfo(np.int32).max else 8)

    def ids_at(self, positions: np.ndarray) -> np.ndarray:
        return self.perm[positions].astype(np.int64)

    def positions_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        return list_positions_in(self.perm, lo, hi)


class FeistelOrder:
    """A keyed bijection of ``[0, N)`` evaluated on demand (module doc)."""

    name = "feistel"
    nbytes = ROUNDS * 8

    @staticmethod
    def bytes_for(num_samples: int) -> int:
        return ROUNDS * 8

    def __init__(self, num_samples: int, seed: int, epoch: int, rounds: int = ROUNDS):
        self.num_samples = num_samples
        bits = max(int(num_samples - 1).bit_length(), 2)  # 2**bits < 2N: < 2 passes on average
        self.sizes = ((bits + 1) // 2, bits // 2)  # (left, right) bits; swapped every round
        state = (_splitmix(int(seed) & _M64) ^ (int(epoch) & _M64)) & _M64
        keys = []
        for _ in range(rounds):
            state = (state + 0x9E3779B97F4A7C15) & _M64
            keys.append(_splitmix(state))
        self.keys = np.array(keys, dtype=np.uint64)

    def _permute(self, x: np.ndarray) -> np.ndarray:
        a, b = self.sizes
        left, right = x >> np.uint64(b), x & np.uint64((1 << b) - 1)
        for i, key in enumerate(self.keys):  # (L: a bits, R: b bits) -> (R, L ^ F(R)): a bijection
            left, right = right, left ^ (_mix(right ^ key, i) & np.uint64((1 << a) - 1))
            a, b = b, a
        return (left << np.uint64(b)) | right

    def _compiled(self, x: np.ndarray, inverse: bool) -> np.ndarray | None:
        """The compiled network over `x` (uint64, flat), or None (no kernels, or a size it
        refuses: numpy then gives the same ids)."""
        mod = kernels.get()
        if mod is None or not x.size:
            return None
        out = np.empty_like(x)
        bad = mod.feistel(x, out, self.keys, self.sizes[0], self.sizes[1], self.num_samples,
                          inverse)
        return None if bad else out.astype(np.int64)

    def ids_at(self, positions: np.ndarray) -> np.ndarray:
        positions = np.ascontiguousarray(positions, dtype=np.uint64)
        done = self._compiled(positions.reshape(-1), False)
        if done is not None:
            return done.reshape(positions.shape)
        x = self._permute(positions.reshape(-1))
        out_of_range = np.flatnonzero(x >= self.num_samples)
        while out_of_range.size:  # cycle walking: stays a bijection of [0, N)
            x[out_of_range] = self._permute(x[out_of_range])
            out_of_range = out_of_range[x[out_of_range] >= self.num_samples]
        return x.astype(np.int64).reshape(positions.shape)

    def _unpermute(self, x: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`_permute`: the rounds undone last to first."""
        a, b = self.sizes
        if len(self.keys) % 2:
            a, b = b, a  # the sizes after the last round
        left, right = x >> np.uint64(b), x & np.uint64((1 << b) - 1)
        for i in range(len(self.keys) - 1, -1, -1):  # (R, L ^ F(R)) -> (L, R)
            a, b = b, a  # a: bits of the left half before round i
            left, right = right ^ (_mix(left ^ self.keys[i], i) & np.uint64((1 << a) - 1)), left
        return (left << np.uint64(b)) | right

    def positions_of(self, ids: np.ndarray) -> np.ndarray:
        """Positions of `ids` (the inverse permutation; cycle walking backwards)."""
        ids = np.ascontiguousarray(ids, dtype=np.uint64)
        done = self._compiled(ids.reshape(-1), True)
        if done is not None:
            return done.reshape(ids.shape)
        x = self._unpermute(ids.reshape(-1))
        out_of_range = np.flatnonzero(x >= self.num_samples)
        while out_of_range.size:
            x[out_of_range] = self._unpermute(x[out_of_range])
            out_of_range = out_of_range[x[out_of_range] >= self.num_samples]
        return x.astype(np.int64).reshape(ids.shape)

    def positions_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        ids = np.arange(lo, hi, dtype=np.int64)
        return self.positions_of(ids), ids


class ExpandedOrder:
    """A data-set mix's epoch without its expanded list (:mod:`.mixes`): position -> entry by a
    `base` order over the mix's ``M`` entries, entry -> sample id by arithmetic (entry ``e`` of
    data set ``d`` is ``start_d + inner_d((e - first_entry_d) mod n_d)``, ``inner_d`` the
    identity or, given `inner` (one order a data set, e.g. a keyed :class:`FeistelOrder` of
    ``n_d``), that data set's fixed permutation). Holds what `base` holds (a ``torch`` list of
    ``M`` int32, or nothing) and ``O(data sets)`` numbers."""

    name = "expanded"

    def __init__(self, base, starts, sizes, counts, inner=None):
        self.base = base
        self.starts = np.asarray(starts, dtype=np.int64)[:len(counts)]
        self.sizes = np.maximum(np.asarray(sizes, dtype=np.int64), 1)
        self.counts = np.asarray(counts, dtype=np.int64)
        self.entry_starts = inclusive_bounds(self.counts)
        self.num_samples = int(self.entry_starts[-1])
        self.inner = inner

    def _within(self, d: np.ndarray, x: np.ndarray, inverse: bool) -> np.ndarray:
        """Data set ``d``'s permutation (or its inverse) applied to local positions `x`."""
        if self.inner is None:
            return x
        out = np.empty_like(x)
        for k in np.unique(d).tolist():
            m = d == k
            inner = self.inner[k]
            out[m] = inner.positions_of(x[m]) if inverse else inner.ids_at(x[m])
        return out

    @property
    def nbytes(self) -> int:
        return int(getattr(self.base, "nbytes", 0))

    def ids_of_entries(self, entries: np.ndarray) -> np.ndarray:
        entries = np.asarray(entries, dtype=np.int64)
        d = owner_of(self.entry_starts, entries)
        return self.starts[d] + self._within(d, (entries - self.entry_starts[d]) % self.sizes[d],
                                             False)

    def ids_at(self, positions: np.ndarray) -> np.ndarray:
        return self.ids_of_entries(self.base.ids_at(positions))

    def entries_of_block(self, lo: int, hi: int) -> np.ndarray:
        """Every entry whose id is in ``[lo, hi)`` (a loop over data sets, not samples)."""
        out = []
        for d, (start, n, c) in enumerate(zip(self.starts.tolist(), self.sizes.tolist(),
                                              self.counts.tolist())):
            a, b = max(lo, start), min(hi, start + n)
            if a >= b or c == 0:
                continue
            local = self._within(np.full(b - a, d), np.arange(a - start, b - start,
                                                             dtype=np.int64), True)
            e = (np.arange(-(-c // n), dtype=np.int64)[:, None] * n + local[None, :]).ravel()
            out.append(self.entry_starts[d] + e[e < c])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def positions_in(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        if hasattr(self.base, "positions_of"):  # feistel, identity: the inverse itself
            entries = self.entries_of_block(lo, hi)
            return self.base.positions_of(entries), self.ids_of_entries(entries)
        ids = self.ids_of_entries(self.base.perm)  # a list order: one pass, as for one data set
        pos = np.flatnonzero((ids >= lo) & (ids < hi))
        return pos.astype(np.int64), ids[pos]


def list_positions_in(perm: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, ids)`` of the entries of a list order holding ids in ``[lo, hi)``: one pass
    over the list (an epoch's list is made in O(N) anyway)."""
    pos = np.flatnonzero((perm >= lo) & (perm < hi))
    return pos.astype(np.int64), perm[pos].astype(np.int64)


def _splitmix(z: int) -> int:
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 & _M64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB & _M64
    return z ^ (z >> 31)


_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _mix(v: np.ndarray, i: int) -> np.ndarray:
    """A 64-bit mix (splitmix64's finaliser) of `v` and the round number."""
    v = v + np.uint64((i + 1) * 0x9E3779B97F4A7C15 & _M64)
    v = (v ^ (v >> np.uint64(30))) * _C1
    v = (v ^ (v >> np.uint64(27))) * _C2
    return v ^ (v >> np.uint64(31))


ORDERS = {"torch": TorchOrder, "feistel": FeistelOrder}
CHOICES = ORDER_CHOICES  # the settings table's choices: "auto" and every registered order
if set(CHOICES) != {"auto", *ORDERS}:
    raise ImportError(f"Internal error: order choices {CHOICES} differ from the registered orders "
                      f"{sorted(ORDERS)}; please report")


def resolve(name: str, num_samples: int) -> str:
    """The order `name` stands for with `num_samples` samples (``auto`` -> torch or feistel)."""
    if name not in CHOICES:
        raise ValueError(f"order must be one of {', '.join(CHOICES)}; got {name!r}")
    if name == "auto":
        return "torch" if num_samples <= AUTO_TORCH_UP_TO else "feistel"
    return name


def order_class(name: str, shuffle: bool):
    """The class of the order `name` (resolved), or the identity without `shuffle`."""
    return ORDERS[name] if shuffle else IdentityOrder


def epoch_order(name: str, num_samples: int, seed: int, epoch: int, shuffle: bool):
    """The order of one epoch (``name`` already resolved)."""
    if not shuffle:
        return IdentityOrder(num_samples)
    return ORDERS[name](num_samples, seed, epoch)
