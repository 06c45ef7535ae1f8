"""``chunks`` sampling (upstream scripts' per-rank subsets joined, :mod:`mdloader_plugin.sampling.
chunks`): the epoch is ``DistributedSampler`` over the joined list; ``oversampling: K`` gives
every rank K draws of it."""

import numpy as np
import pytest
import torch

from mdloader_plugin.sampling.reference import ReferenceSchedule
from mdloader_plugin.sampling.mixes import DataSets, get_mix

SETS = DataSets(("a", "b"), (30, 20))
CHUNKS = [(5, 12), (0, 5), (30, 41), (41, 50)]  # ranks' subsets, in rank order


def _listed():
    return np.concatenate([np.arange(lo, hi) for lo, hi in CHUNKS])


@pytest.mark.parametrize("shuffle", [True, False])
def test_epoch_is_distributed_sampler_over_the_joined_list(shuffle):
    mix = get_mix({"type": "chunks", "chunks": CHUNKS}, SETS, 4)
    listed = _listed()
    s = ReferenceSchedule(50, 4, 3, mix=mix, shuffle=shuffle, seed=0)
    for epoch in range(2):
        for rank in range(4):
            ds = torch.utils.data.DistributedSampler(range(listed.size), num_replicas=4,
                                                     rank=rank, shuffle=shuffle, seed=0)
            ds.set_epoch(epoch)
            assert s.rank_indices(epoch, rank).tolist() == listed[list(ds)].tolist()


def test_oversampling_gives_every_rank_k_draws_of_the_list():
    mix = get_mix({"type": "chunks", "chunks": CHUNKS, "oversampling": 40}, SETS, 4)
    s = ReferenceSchedule(50, 4, 8, mix=mix, seed=1)
    listed = set(_listed().tolist())
    rows = [s.rank_indices(0, r) for r in range(4)]
    assert all(len(r) == 40 and set(r.tolist()) <= listed for r in rows)
    assert all(len(set(r[:len(listed)].tolist())) == len(listed) for r in rows)  # a permutation
    assert len({tuple(r.tolist()) for r in rows}) == 4  # ranks draw differently
    again = ReferenceSchedule(50, 4, 8, mix=get_mix({"type": "chunks", "chunks": CHUNKS,
                                                 "oversampling": 40}, SETS, 4), seed=1)
    assert all((again.rank_indices(0, r) == rows[r]).all() for r in range(4))


def test_bad_chunks_are_refused():
    with pytest.raises(ValueError, match="outside the store"):
        get_mix({"type": "chunks", "chunks": [(0, 99)]}, SETS, 2)
    with pytest.raises(ValueError, match="unknown option"):
        get_mix({"type": "chunks", "chunks": [], "k": 1}, SETS, 2)
