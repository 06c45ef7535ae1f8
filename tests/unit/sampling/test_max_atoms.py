"""``max_atoms``: MDLoader's batches are fairchem's ``MaxAtomDistributedBatchSampler``'s, rank by
rank and epoch by epoch, on OC20-like sizes; no batch passes the cap (the old rule, ``max_atoms //
mean`` graphs a batch, did); a state saved on 4 ranks resumes on 3 serving each batch once."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.loader.args import resume_offset
from mdloader_plugin.sampling.max_atoms import MaxAtomsBatches
from mdloader_plugin.sampling.schedule import ResumeState


def oc20_like(n: int, seed: int = 0) -> np.ndarray:
    """Atoms a structure like OC20 S2EF's: mostly 20-120, mean ~75, a tail to ~225."""
    rng = np.random.default_rng(seed)
    return np.clip(rng.gamma(6.0, 12.5, n).round(), 7, 225).astype(np.int64)


def fairchem_batches(natoms, max_atoms, ranks, rank, seed, epoch, **kw):
    sampler_mod = pytest.importorskip(
        "fairchem.core.datasets.samplers.max_atom_distributed_sampler")

    class Dataset:
        def __len__(self):
            return len(natoms)

        def get_metadata(self, key, idx):
            return natoms[idx]

    s = sampler_mod.MaxAtomDistributedBatchSampler(Dataset(), max_atoms, ranks, rank, seed, **kw)
    s.set_epoch_and_start_iteration(epoch, 0)
    return [[int(i) for i in b] for b in s]


def served(plan, epoch, rank):
    plan.rank = rank
    return [[int(i) for i in plan.step_table(epoch, s)[rank] if i >= 0]
            for s in range(plan.steps_in(epoch))]


@pytest.mark.parametrize("ranks,max_atoms,kw", [
    (1, 300, {}), (3, 300, {"drop_last": True}), (4, 150, {}), (4, 300, {"shuffle": False})])
def test_batches_equal_fairchem_sampler(ranks, max_atoms, kw):
    natoms = oc20_like(2000, seed=ranks)
    plan = MaxAtomsBatches(natoms, max_atoms, ranks, seed=9, **kw)
    for epoch in (0, 1):
        for rank in range(ranks):
            mine = served(plan, epoch, rank)
            assert mine == fairchem_batches(natoms, max_atoms, ranks, rank, 9, epoch, **kw)
            assert [plan.batch_len(s, epoch) for s in range(len(mine))] == [len(b) for b in mine]
    if max_atoms == 150:  # graphs above the cap are left out, as fairchem does
        assert plan.skipped == int((natoms > 150).sum()) > 0


def test_no_batch_passes_max_atoms_and_the_histogram_is_fairchems():
    natoms, cap = oc20_like(5000, seed=1), 700
    plan = MaxAtomsBatches(natoms, cap, 1, seed=0)
    theirs = np.array([natoms[b].sum() for b in fairchem_batches(natoms, cap, 1, 0, 0, 0)])
    mine = np.array([natoms[b].sum() for b in served(plan, 0, 0)])
    edges = np.linspace(0, cap, 15)
    assert mine.max() <= cap
    assert (np.histogram(mine, edges)[0] == np.histogram(theirs, edges)[0]).all()
    # the rule this replaces: max_atoms // mean graphs a batch from a shuffled epoch
    b = cap // int(round(natoms.mean()))
    old = natoms[np.random.default_rng(0).permutation(natoms.size)][:natoms.size // b * b]
    assert old.reshape(-1, b).sum(1).max() > cap


@pytest.mark.parametrize("new_ranks", [2, 3, 8])
def test_state_of_4_ranks_resumes_on_another_size_serving_each_batch_once(new_ranks):
    natoms = oc20_like(900, seed=2)
    old = MaxAtomsBatches(natoms, 400, 4, seed=5)
    new = MaxAtomsBatches(natoms, 400, new_ranks, seed=5)
    k = 5
    before = [old.epoch_list(1)[s * 4:(s + 1) * 4] for s in range(k)]
    st = ResumeState(5, 1, k, 4, 17, 0, "max_atoms")  # any batch size: batches are counted
    offset, step = resume_offset(st, new, new_ranks, 23)
    assert (offset, step) == (4 * k, 0)
    new.resume_at(1, offset)
    after = new.epoch_list(1)
    pad = -(old.num_entries - offset) % new_ranks
    got = np.concatenate(before + [after])
    assert np.bincount(got, minlength=old.num_entries).tolist() == \
        [2 if i in set(after[:pad].tolist()) else 1 for i in range(old.num_entries)]
    assert new.steps_in(1) == after.size // new_ranks and new.steps_in(2) == \
        -(-new.num_entries // new_ranks)  # the next epoch is whole
    same = resume_offset(st, old, 4, 17)
    assert same == (0, k)  # same ranks: the state as it is


def test_bad_options_are_one_line():
    with pytest.raises(ConfigError, match="max_atoms must be a positive"):
        MaxAtomsBatches([10, 10], 0, 1)
    with pytest.raises(ConfigError, match="2 batches for 4 ranks"):
        MaxAtomsBatches([10, 10, 10, 10], 20, 4)
    plan = MaxAtomsBatches([10] * 8, 20, 2)
    with pytest.raises(ConfigError, match="outside this data set's 4 batches"):
        plan.resume_at(0, 9)


def test_pack_without_lists_equals_the_greedy_loop():
    """:func:`pack` (a Python step a batch, windows of positions) packs as the per-graph loop
    (:meth:`NodeBudgetBatches.batches` with ``skip``): batches spanning windows, graphs above the
    cap, a cap every graph fills alone."""
    from mdloader_plugin.sampling.max_atoms import pack
    from mdloader_plugin.sampling.node_budget import NodeBudgetBatches

    rng = np.random.default_rng(1)
    for _ in range(60):
        n, cap = int(rng.integers(1, 200)), int(rng.integers(1, 60))
        ref = NodeBudgetBatches(rng.integers(1, 70, n), cap, 3, oversized_sample="skip")
        order = rng.permutation(n)
        ref._order = lambda epoch, o=order: o.tolist()
        want = ref.batches(0)
        for window in (1, 7, 1 << 20):
            flat, starts, atoms = pack(order, ref.costs, cap, window)
            assert [flat[a:b].tolist() for a, b in zip(starts[:-1], starts[1:])] == want
            assert atoms.tolist() == [int(ref.costs[b].sum()) for b in want]
