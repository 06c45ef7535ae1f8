"""What one training step asks of the network: the inputs every cost model shares.

A step is described by the per-rank batch size ``B``, the world size ``P``, ranks per node ``R``
and the distribution of record sizes (mean ``mu``, standard deviation ``sigma``). With random
sampling over a data set spread evenly over the ranks, each sample a rank needs lives on a given
rank with probability ``1/P``; from that follow the expected counts below.

Why expected values and one order statistic: the step ends when the slowest rank ends (the
collective waits for everyone; a trainer's gradient allreduce does the same for the one-sided
backend), so the bandwidth terms use E[max over ranks] of the bytes, estimated by a normal
approximation (Blom's formula for the expected maximum of ``n`` normals). Irregular graphs make
``sigma`` large and the maximum noticeably above the mean; that is the imbalance term.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from ...core.errors import ConfigError


@dataclass(frozen=True)
class Workload:
    """One step: ``batch_size`` samples per rank on ``world_size`` ranks."""

    world_size: int
    batch_size: int
    mean_bytes: float
    std_bytes: float = 0.0
    ranks_per_node: int = 1

    def __post_init__(self) -> None:
        _check_int("world_size", self.world_size, 1)
        _check_int("batch_size", self.batch_size, 1)
        _check_int("ranks_per_node", self.ranks_per_node, 1)
        if not (math.isfinite(self.mean_bytes) and self.mean_bytes > 0):
            raise ConfigError(f"sample size mean must be a positive number of bytes, "
                              f"got {self.mean_bytes!r}")
        if not (math.isfinite(self.std_bytes) and self.std_bytes >= 0):
            raise ConfigError(f"sample size std must be >= 0 bytes, got {self.std_bytes!r}")

    @classmethod
    def from_sizes(cls, world_size: int, batch_size: int, sizes: np.ndarray,
                   ranks_per_node: int = 1) -> "Workload":
        """Workload from the record sizes of the data set (the store's ``nbytes``)."""
        sizes = np.asarray(sizes, dtype=np.float64)
        if sizes.size == 0:
            raise ConfigError("sample sizes are empty: the data set has no samples")
        return cls(world_size, batch_size, float(sizes.mean()), float(sizes.std()),
                   ranks_per_node)

    # -- derived counts (expected values per rank and step) --------------------------------
    @property
    def rpn(self) -> int:
        """Ranks per node, capped at the world size."""
        return min(self.ranks_per_node, self.world_size)

    @property
    def remote_samples(self) -> float:
        """Samples fetched from other ranks: ``B (P-1)/P``."""
        return self.batch_size * (self.world_size - 1) / self.world_size

    @property
    def local_samples(self) -> float:
        return self.batch_size / self.world_size

    @property
    def intra_fraction(self) -> float:
        """Share of remote samples whose owner is on this rank's node: ``(R-1)/(P-1)``."""
        return 0.0 if self.world_size == 1 else (self.rpn - 1) / (self.world_size - 1)

    @property
    def hit_probability(self) -> float:
        """Probability that a given other rank owns at least one of my samples."""
        return 1.0 - (1.0 - 1.0 / self.world_size) ** self.batch_size

    @property
    def owners(self) -> float:
        """Expected distinct remote owners: ``(P-1)(1-(1-1/P)^B)``, at most ``min(P-1, B)``."""
        return (self.world_size - 1) * self.hit_probability

    @property
    def multi_fraction(self) -> float:
        """Share of hit owners holding >= 2 of my records (those need an hindexed datatype)."""
        q, B = 1.0 / self.world_size, self.batch_size
        hit = self.hit_probability
        if hit == 0:
            return 0.0
        return max(0.0, 1.0 - B * q * (1.0 - q) ** (B - 1) / hit)

    @property
    def owners_intra(self) -> float:
        return (self.rpn - 1) * self.hit_probability

    @property
    def owners_inter(self) -> float:
        return (self.world_size - self.rpn) * self.hit_probability

    @property
    def remote_bytes(self) -> float:
        return self.remote_samples * self.mean_bytes

    def max_remote_bytes(self) -> float:
        """E[max over ranks] of the bytes a rank receives or sends in one step.

        Received: a sum of ``k ~ Binomial(B, (P-1)/P)`` record sizes. Sent: a sum of a
        Poisson-like number of records with the same mean. Both have variance about
        ``k (sigma^2 + mu^2 / P)`` or ``k (sigma^2 + mu^2)``; the larger one, over ``2P``
        draws, gives the maximum.
        """
        k = self.remote_samples
        if k == 0:
            return 0.0
        var_send = k * (self.std_bytes ** 2 + self.mean_bytes ** 2)
        return k * self.mean_bytes + math.sqrt(var_send) * expected_max_normal(2 * self.world_size)

    def max_remote_samples(self) -> float:
        """E[max over ranks] of the number of records a rank sends (owners' imbalance)."""
        k = self.remote_samples
        return k + math.sqrt(k) * expected_max_normal(self.world_size) if k else 0.0


def expected_max_normal(n: int) -> float:
    """E[max of n standard normals], Blom's approximation (exact 0 for n=1, 0.56 for n=2)."""
    if n <= 1:
        return 0.0
    return NormalDist().inv_cdf((n - 0.375) / (n + 0.25))


def _check_int(name: str, value, lo: int) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ConfigError(f"{name} must be an integer >= {lo}, got {value!r}")
