"""Epoch orders: bijections, the torch order is DistributedSampler's, and the feistel order's
randomness is indistinguishable from ``torch.randperm`` by the tests below, which two weak
permutations (a shift-and-stride map, a one-round Feistel network) fail.

Statistics are z-scores of chi-square tests, ``z = (chi2 - dof) / sqrt(2 dof)`` (dof in the
hundreds to thousands, where the normal approximation holds), and of means against their exact
expectations; every key is fixed, so each test's outcome is deterministic. Threshold |z| < 4.5.
"""

import numpy as np
import pytest
import torch

from mdloader_plugin.sampling.order import FeistelOrder, TorchOrder, epoch_order, resolve

Z_MAX = 4.5


class Affine:
    """Weak control: ``q -> (a q + c) mod N`` with a key-dependent stride and shift."""

    def __init__(self, n, seed, epoch):
        rng = np.random.default_rng([seed, epoch])
        self.n, self.c = n, int(rng.integers(n))
        self.a = next(a for a in rng.integers(1, n, 64) if np.gcd(int(a), n) == 1)

    def ids_at(self, q):
        return (int(self.a) * np.asarray(q, dtype=np.int64) + self.c) % self.n


class OneRound(FeistelOrder):
    """Weak control: the same network with a single round."""

    def __init__(self, n, seed, epoch):
        super().__init__(n, seed, epoch, rounds=1)


class Torch:
    def __init__(self, n, seed, epoch):
        self.perm = TorchOrder(n, seed, epoch).perm

    def ids_at(self, q):
        return self.perm[q].astype(np.int64)


GOOD = {"feistel": FeistelOrder, "torch": Torch}
WEAK = {"affine": Affine, "one-round": OneRound}


def perms(make, n, keys):
    q = np.arange(n)
    return np.stack([make(n, 1234, e).ids_at(q) for e in range(keys)])


def chi2_z(counts, expected):
    counts = np.asarray(counts, dtype=np.float64).ravel()
    dof = counts.size - 1
    return ((counts - expected) ** 2 / expected).sum() / 1.0 - dof, dof


def z_of(counts, expected):
    chi, dof = chi2_z(counts, expected)
    return chi / np.sqrt(2 * dof)


def position_uniformity_z(make, n=48, keys=4000):
    """Every id at every position equally often over keys: an N x N table of counts."""
    p = perms(make, n, keys)
    table = np.zeros((n, n))
    np.add.at(table, (p, np.broadcast_to(np.arange(n), p.shape)), 1)
    return z_of(table[:, :-1], keys / n)  # each row sums to `keys`: drop one column's dof


def neighbour_ids_z(make, n=40, keys=4000):
    """Positions of ids i and i+1 (neighbours in the file): jointly uniform over distinct
    pairs; the table of (pos(i+1) - pos(i)) mod N pooled over i."""
    p = perms(make, n, keys)
    pos = np.argsort(p, axis=1)
    gaps = (pos[:, 1:] - pos[:, :-1]) % n  # 1..n-1, uniform for a random permutation
    counts = np.bincount(gaps.ravel(), minlength=n)[1:]
    return z_of(counts, gaps.size / (n - 1))


def neighbour_positions_z(make, n=40, keys=4000):
    """Ids at positions q and q+1 (neighbours in a batch): (id(q+1) - id(q)) mod N uniform."""
    p = perms(make, n, keys)
    gaps = (p[:, 1:] - p[:, :-1]) % n
    counts = np.bincount(gaps.ravel(), minlength=n)[1:]
    return z_of(counts, gaps.size / (n - 1))


def fixed_points_and_cycles_z(make, n=1000, keys=400):
    """Fixed points (mean 1, variance 1) and cycles (mean H_N) of random permutations."""
    p = perms(make, n, keys)
    fixed = (p == np.arange(n)).sum(axis=1)
    cycles = np.array([_cycles(row) for row in p])
    h = np.sum(1.0 / np.arange(1, n + 1))
    var_c = h - np.sum(1.0 / np.arange(1, n + 1) ** 2)
    return max(abs(fixed.mean() - 1) / np.sqrt(1 / keys),
               abs(cycles.mean() - h) / np.sqrt(var_c / keys))


def _cycles(perm):
    seen, count = np.zeros(perm.size, bool), 0
    for i in range(perm.size):
        if not seen[i]:
            count += 1
            while not seen[i]:
                seen[i], i = True, perm[i]
    return count


STATS = {"position": position_uniformity_z, "neighbour-ids": neighbour_ids_z,
         "neighbour-positions": neighbour_positions_z, "cycles": fixed_points_and_cycles_z}


@pytest.mark.parametrize("stat", sorted(STATS))
@pytest.mark.parametrize("name", sorted(GOOD))
def test_randomness_of_good_orders(name, stat):
    z = STATS[stat](GOOD[name])
    assert abs(z) < Z_MAX, f"{name} {stat}: z = {z:.1f}"


# N - 1 of an odd number of bits: the feistel halves differ by a bit (the sizes above are even)
ODD = {"position": dict(n=24, keys=3000), "neighbour-ids": dict(n=20, keys=3000),
       "neighbour-positions": dict(n=20, keys=3000), "cycles": dict(n=1500, keys=300)}


@pytest.mark.parametrize("stat", sorted(STATS))
def test_randomness_of_feistel_with_unequal_halves(stat):
    z = STATS[stat](FeistelOrder, **ODD[stat])
    assert abs(z) < Z_MAX, f"feistel {stat} at N={ODD[stat]['n']}: z = {z:.1f}"


@pytest.mark.parametrize("name,stat", [("affine", "neighbour-ids"),
                                       ("affine", "neighbour-positions"),
                                       ("one-round", "position"),
                                       ("one-round", "neighbour-ids")])
def test_weak_permutations_fail_the_same_tests(name, stat):
    z = STATS[stat](WEAK[name])
    assert abs(z) > Z_MAX, f"{name} {stat} passed (z = {z:.1f}): the test has no power"


def test_large_n_no_linear_correlation():
    n = 200_003
    p = FeistelOrder(n, 5, 0).ids_at(np.arange(n)).astype(np.float64)
    q = np.arange(n, dtype=np.float64)
    assert abs(np.corrcoef(p, q)[0, 1]) < Z_MAX / np.sqrt(n)
    assert abs(np.corrcoef(p[1:], p[:-1])[0, 1]) < Z_MAX / np.sqrt(n)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 16, 17, 100, 1000, 4097, 65537])
def test_feistel_is_a_bijection_and_pointwise(n):
    for seed, epoch in [(0, 0), (7, 3), (2**40 + 5, 1), (-3, 2)]:
        o = FeistelOrder(n, seed, epoch)
        full = o.ids_at(np.arange(n))
        assert np.array_equal(np.sort(full), np.arange(n))
        some = np.random.default_rng(n).integers(0, n, (3, 5))
        assert np.array_equal(o.ids_at(some), full[some])
        assert o.nbytes < 100


def test_keys_differ_by_seed_and_epoch_and_torch_is_randperm():
    a = FeistelOrder(1000, 1, 0).ids_at(np.arange(1000))
    assert not np.array_equal(a, FeistelOrder(1000, 1, 1).ids_at(np.arange(1000)))
    assert not np.array_equal(a, FeistelOrder(1000, 2, 0).ids_at(np.arange(1000)))
    g = torch.Generator()
    g.manual_seed(5 + 2)
    assert np.array_equal(TorchOrder(300, 5, 2).perm, torch.randperm(300, generator=g).numpy())
    assert TorchOrder(300, 5, 2).nbytes == 300 * 4
    ident = epoch_order("feistel", 10, 0, 0, shuffle=False)
    assert ident.ids_at(np.arange(10)).tolist() == list(range(10))
    assert resolve("auto", 100) == "torch" and resolve("auto", 2**23) == "feistel"


@pytest.mark.parametrize("n,rounds", [(2, 8), (3, 8), (1000, 8), (4097, 1), (10**8 + 7, 8),
                                      (2**40 + 3, 8)])
def test_compiled_feistel_gives_numpys_ids(n, rounds, monkeypatch):
    """records/_kernels.c's network and cycle walk, forward and inverse, against numpy's."""
    from mdloader_plugin.records import kernels

    if kernels.get() is None:
        pytest.skip(f"compiled kernels not built: {kernels.why_not()}")
    order = FeistelOrder(n, 11, 3, rounds=rounds)
    q = np.random.default_rng(n).integers(0, n, 20001, dtype=np.int64)
    q[:min(9, n)] = np.arange(min(9, n))
    ids = order.ids_at(q)
    back = order.positions_of(ids)
    monkeypatch.setenv("MDLOADER_KERNELS", "off")
    kernels.reset()
    try:
        assert kernels.get() is None
        assert np.array_equal(ids, order.ids_at(q))
        assert np.array_equal(back, order.positions_of(ids))
        assert np.array_equal(back, q)
    finally:
        monkeypatch.delenv("MDLOADER_KERNELS")
        kernels.reset()
