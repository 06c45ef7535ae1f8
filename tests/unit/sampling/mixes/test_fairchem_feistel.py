"""fairchem's data-set mix under the ``feistel`` order: no list of entries (each data set's fixed
permutation is a keyed bijection evaluated per position), and the same served epoch as the
``torch`` order's in everything fairchem's arithmetic fixes: each data set's share, each sample
``floor`` or ``ceil`` of its ratio times, ``no_shuffle`` sets repeating their head."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from mdloader_plugin.sampling.mixes import DataSets, get_mix
from mdloader_plugin.sampling.reference import ReferenceSchedule

NAMES, SIZES = ("a", "b", "c", "d"), (50, 6, 17, 3)
SPEC = {"type": "temperature", "temperature": 2.0, "dataset_seed": 0, "no_shuffle": ["c"]}


def served(core, epoch):
    """Ids an epoch serves, padding left out (the first ``M`` of the dealt list)."""
    table = core.epoch_table(epoch)
    return table.T.reshape(-1)[:core.num_samples]


def shape_of(ids, sets):
    """Per data set: how many samples are served how many times; and the ids served the most in
    the ``no_shuffle`` set."""
    count = Counter(ids.tolist())
    out = []
    for start, n in zip(sets.starts.tolist(), sets.sizes):
        out.append(sorted(Counter(count[i] for i in range(start, start + n)).items()))
    return out


@pytest.mark.parametrize("ranks", [1, 3, 4])
def test_feistel_epoch_has_the_torch_epochs_properties(ranks):
    sets = DataSets(NAMES, SIZES)
    mix = get_mix(SPEC, sets, ranks)
    assert not mix.arithmetic and mix.counts.tolist() != list(SIZES)  # oversampled, seeded
    listed = ReferenceSchedule(sum(SIZES), ranks, 3, seed=4, mix=mix, order="torch")
    keyed = ReferenceSchedule(sum(SIZES), ranks, 3, seed=4, mix=mix, order="feistel")
    assert keyed.order == "feistel" and keyed.inner is not None
    for epoch in (0, 3):
        a, b = served(listed, epoch), served(keyed, epoch)
        assert Counter(a.tolist()) == Counter(mix.expanded().tolist())  # the reference
        assert shape_of(a, sets) == shape_of(b, sets)  # exactly-once of entries, same shares
        c0, nc = int(sets.starts[2]), SIZES[2]
        extra = mix.counts[2] % nc
        head = Counter(b.tolist())
        assert [i - c0 for i in range(c0, c0 + nc) if head[i] > mix.counts[2] // nc] == \
            list(range(extra))  # no_shuffle: the head repeats, in file order
    assert not np.array_equal(served(keyed, 0), served(keyed, 1))  # reshuffled each epoch


def test_feistel_rows_and_sends_equal_the_whole_world_plan():
    from rank_plan_check import _check_all

    for p in (1, 3, 4):
        mix = get_mix(SPEC, DataSets(NAMES, SIZES), p)
        _check_all(ReferenceSchedule(sum(SIZES), p, 3, seed=2, mix=mix, order="feistel"),
                   num_ids=sum(SIZES))


def test_state_is_not_proportional_to_the_entries():
    """At 10^9 samples in 4 data sets the ``auto`` order is the keyed one and the epoch's order
    holds a few hundred bytes (the list it replaces: 8 bytes an entry)."""
    sizes = (600_000_000, 250_000_000, 100_000_000, 50_000_000)
    mix = get_mix(SPEC | {"no_shuffle": []}, DataSets(NAMES, sizes), 8192)
    core = ReferenceSchedule(sum(sizes), 8192, 32, seed=0, mix=mix, order="auto")
    assert core.order == "feistel" and core.inner is not None
    assert core.order_bytes / sum(sizes) < 1e-6
    ids = core.ids_at(0, 0, 2)  # two steps' ids, evaluated from positions
    assert ids.shape == (8192, 2) and ids.min() >= 0 and ids.max() < sum(sizes)
    small = ReferenceSchedule(sum(SIZES), 2, 3, seed=0,
                              mix=get_mix(SPEC, DataSets(NAMES, SIZES), 2), order="auto")
    assert small.order == "torch" and small.inner is None  # fairchem's exact list below 4M
