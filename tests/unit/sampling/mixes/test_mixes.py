"""Several data sets in one store: ids, keys, merged pna_deg, and the sampling rules (fairchem's
four types checked against the installed fairchem-core's own ``ConcatDataset``)."""

from collections import Counter

import numpy as np
import pytest
import torch

from mdloader_plugin.core.errors import ConfigError, DataError
from mdloader_plugin.loader.loader import MDLoader
from mdloader_plugin.sampling.reference import ReferenceSchedule
from mdloader_plugin.sampling.mixes import DataSets, get_mix
from mdloader_plugin.sampling.mixes.hydragnn import chunk_bounds, process_counts
from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import GraphFile, write_graphs
from mdloader_plugin.sources.multi import MultiSource, merge_pna_deg
from mdloader_plugin.store.shard import ShardStore

SIZES = {"qm": 37, "oc": 21, "mp": 9}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Three small molecule files with their own dataset_name, and two bad ones."""
    d = tmp_path_factory.mktemp("multi")
    out, seed = {}, 0
    for name, n in SIZES.items():
        graphs = list(synth.generate("hydragnn", seed, 0, n))
        out[name] = d / f"{name}.bp"
        write_graphs(out[name], {"trainset": graphs},
                     attributes={"dataset_name": name, "pna_deg": np.arange(5 + seed) + 1})
        seed += 1
    graphs = list(synth.generate("hydragnn", 9, 0, 6))
    out["no_y_loc"] = d / "no_y_loc.bp"
    write_graphs(out["no_y_loc"], {"trainset": [{k: v for k, v in g.items() if k != "y_loc"}
                                                for g in graphs]})
    out["y64"] = d / "y64.bp"
    write_graphs(out["y64"], {"trainset": [{**g, "y": g["y"].astype(np.float64)}
                                           for g in graphs]})
    return out


def own_samples(path):
    with GraphFile(path) as f:
        return list(f.read_block("trainset", 0, f.info("trainset").ndata))


def test_one_store_over_three_files_carries_ids(files):
    store = ShardStore.from_files(None, [f"{n}={files[n]}" for n in SIZES])
    assert store.meta["dataset_names"] == list(SIZES)
    assert store.meta["dataset_starts"] == [0, 37, 58, 67]
    from mdloader_plugin.records import codec

    gid = 0
    for d, name in enumerate(SIZES):
        for ref in own_samples(files[name]):
            got = codec.decode(store.local_record(gid))
            assert got.pop("dataset_name").tolist() == [[d]]
            assert got.keys() == ref.keys()
            assert all(np.array_equal(got[k], ref[k]) and got[k].dtype == ref[k].dtype
                       for k in ref)
            gid += 1
    assert gid == store.num_samples


def test_batches_carry_hydragnn_dataset_name_tensor(files):
    store = ShardStore.from_files(None, [files[n] for n in SIZES])
    assert store.meta["dataset_names"] == list(SIZES)  # from the files' dataset_name attribute
    batch = next(iter(MDLoader(store, batch_size=16, prefetch=0, backend="collective")))
    ids = batch.dataset_name
    assert ids.dtype == torch.int64 and ids.shape == (16, 1)  # HydraGNN: tensor([[i]]) a graph
    starts = np.array(store.meta["dataset_starts"])
    # which graphs the batch holds, by their (unique) y, mapped back to their data set
    ys = {float(s["y"][0]): d for d, n in enumerate(SIZES) for s in own_samples(files[n])}
    assert [ys[float(v)] for v in batch.y.view(-1)] == ids.view(-1).tolist()
    assert len(starts) == 4


def test_key_missing_from_one_file_is_dropped_or_required(files, caplog):
    with MultiSource([_spec(files["qm"]), _spec(files["no_y_loc"])]) as src:
        assert "y_loc" not in src.keys and src.dropped == {"y_loc": [str(files["no_y_loc"])]}
    with pytest.raises(DataError, match=r"key 'y_loc' is missing from .*no_y_loc.bp .*needs it"):
        MultiSource([_spec(files["qm"]), _spec(files["no_y_loc"])], required=["y_loc"])


def test_bad_inputs_are_one_line_errors(files, tmp_path):
    with pytest.raises(DataError, match=r"key 'y' is float32 in .*qm.bp but float64 in .*y64"):
        MultiSource([_spec(files["qm"]), _spec(files["y64"])])
    with pytest.raises(DataError, match="no such file"):
        MultiSource([_spec(files["qm"]), _spec(tmp_path / "gone.bp")])
    with pytest.raises(DataError, match="name 'a' is given to two files"):
        MultiSource([_spec(files["qm"], "a"), _spec(files["oc"], "a")])


def _spec(path, name=None):
    from mdloader_plugin.sources.multi import DatasetSpec

    return DatasetSpec(str(path), name)


def test_pna_deg_merge_resamples_to_the_shortest_and_sums(files):
    a, b = np.array([1, 4, 9, 16, 25, 36]), np.array([3, 3, 3, 3])
    merged = merge_pna_deg([a, b])
    assert len(merged) == 4 and merged.dtype == np.int64
    assert merged[0] == 1 + 3 and merged[-1] == 36 + 3  # the spline goes through the ends
    # truncated to int64 as upstream does, so a float 5.999... becomes 5
    assert set(merge_pna_deg([b, b]).tolist()) <= {5, 6}
    with MultiSource([_spec(files[n]) for n in SIZES]) as src:
        assert len(src.attributes()["pna_deg"]) == 5  # the shortest of lengths 5, 6, 7


# -- sampling ------------------------------------------------------------------------------
FAIRCHEM_CASES = [
    ({"type": "explicit", "ratios": {"a": 0.5, "b": 2.0, "c": 1.0}}, [100, 30, 7]),
    ({"type": "balanced"}, [100, 30, 7]),
    ({"type": "temperature", "temperature": 1.0}, [100, 30, 7]),
    ({"type": "temperature", "temperature": 2.0}, [100, 30, 7]),
    ({"type": "temperature", "temperature": 5.0}, [13, 400, 2]),
    ({"type": "weighted", "ratios": [1.0, 0.25, 3.0]}, [100, 30, 7]),
]


class _Sized(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


@pytest.mark.parametrize("spec,sizes", FAIRCHEM_CASES)
def test_fairchem_sampling_matches_installed_fairchem(spec, sizes):
    from fairchem.core.datasets.mt_concat_dataset import ConcatDataset

    names = ["a", "b", "c"]
    theirs = ConcatDataset({n: _Sized(s) for n, s in zip(names, sizes)}, sampling=spec)
    mix = get_mix(spec, DataSets(tuple(names), tuple(sizes)), 1)
    assert mix.ratios == pytest.approx(theirs.sample_ratios, rel=0, abs=0)
    assert mix.size == len(theirs)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    ref = [starts[d] + i for d, i in map(theirs._get_dataset_and_sample_index, range(len(theirs)))]
    assert mix.expanded().tolist() == ref
    # and the order: DistributedSampler over fairchem's ConcatDataset, mapped to sample ids
    core = ReferenceSchedule(sum(sizes), 3, 4, seed=7, mix=mix)
    for rank in range(3):
        ds = torch.utils.data.DistributedSampler(theirs, num_replicas=3, rank=rank, seed=7)
        ds.set_epoch(2)
        assert core.rank_indices(2, rank).tolist() == [ref[i] for i in ds]


def test_expanded_epoch_is_served_exactly_once():
    mix = get_mix("temperature:temperature=3", DataSets(("a", "b"), (50, 6)), 2)
    core = ReferenceSchedule(56, 2, 3, seed=1, mix=mix)
    assert mix.size == 74 and mix.counts.tolist() == [50, 24]  # b: 6 samples, 4 times each
    for epoch in (0, 5):
        served = Counter(core.epoch_table(epoch).reshape(-1).tolist())
        assert served == Counter(mix.expanded().tolist())
        assert all(served[i] == 4 for i in range(50, 56))


def test_expanded_epoch_without_its_list():
    """Several data sets, no expanded list: positions map to the mix's entries through the
    epoch's order and entries to ids by arithmetic. With the torch order the epoch is exactly
    the expanded list in DistributedSampler's order (the reference, ``Mix.order``); the keyed
    order serves the same multiset; neither keeps 8 bytes an entry."""
    mix = get_mix("temperature:temperature=3", DataSets(("a", "b"), (50, 6)), 2)
    core = ReferenceSchedule(56, 2, 3, seed=1, mix=mix, order="auto")
    steps = np.concatenate([core.plan(4, s) for s in range(core.steps_in(4))], axis=1)
    assert np.array_equal(steps, core.epoch_table(4))
    ref = np.asarray(mix.order(1, 4, True))
    want = np.concatenate([ref, ref[:core.total_size - ref.size]])
    assert np.array_equal(steps.T.reshape(-1), want)  # dealt round robin from the list
    assert Counter(steps.reshape(-1).tolist()) >= Counter(mix.expanded().tolist())
    assert ReferenceSchedule(56, 2, 3, seed=1, mix=mix).order_bytes <= mix.size * 4  # int32 list
    keyed = ReferenceSchedule(56, 2, 3, seed=1, mix=mix, order="feistel")
    assert keyed.order_bytes <= 64
    got = Counter(keyed.epoch_table(4)[:, :].reshape(-1).tolist())
    assert set(got) == set(mix.expanded().tolist())
    big = get_mix("temperature:temperature=2", DataSets(("a", "b"), (4_000_000, 1_000_000)), 2)
    assert ReferenceSchedule(5_000_000, 2, 3, seed=1, mix=big, order="auto").order == "feistel"
    over = get_mix({"type": "hydragnn", "oversampling": True}, DataSets(("a", "b"), (90, 10)), 4)
    with pytest.raises(ValueError, match="order='feistel' with sampling 'hydragnn'"):
        ReferenceSchedule(100, 4, 3, seed=1, mix=over, order="feistel")


@pytest.mark.parametrize("order", ["torch", "feistel"])
@pytest.mark.parametrize("spec,sizes", [("temperature:temperature=3", (50, 6, 17, 3)),
                                        ("proportional", (5, 40, 11)),
                                        ({"type": "weights", "weights": [0.7, 0.1, 0.2]},
                                         (9, 30, 4))])
def test_mix_rows_and_sends_equal_the_whole_world_plan(order, spec, sizes):
    from rank_plan_check import _check_all

    names = tuple("abcd"[:len(sizes)])
    for p in (1, 3, 4):
        mix = get_mix(spec, DataSets(names, sizes), p)
        core = ReferenceSchedule(sum(sizes), p, 3, seed=2, mix=mix, order=order)
        _check_all(core, num_ids=sum(sizes))


def test_hydragnn_oversampling_semantics():
    sets = DataSets(("big", "small"), (90, 10))
    assert process_counts(sets.sizes, 4) == [3, 1]  # ceil(0.9*4)=4, ceil(0.1*4)=1 -> 3 + 1
    assert chunk_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]  # nsplit: first chunks longer
    mix = get_mix({"type": "hydragnn", "oversampling": True}, sets, 4)
    core = ReferenceSchedule(100, 4, 8, seed=3, mix=mix)
    table = core.epoch_table(0)
    assert table.shape == (4, 30)  # K = longest chunk (30) on every rank
    for rank, (lo, hi) in enumerate([(0, 30), (30, 60), (60, 90), (90, 100)]):
        assert set(table[rank]) == set(range(lo, hi))
    assert Counter(table[3].tolist()) == {i: 3 for i in range(90, 100)}
    assert not np.array_equal(table, core.epoch_table(1)[:, :])  # reshuffled each epoch
    capped = get_mix({"type": "hydragnn", "num_samples": 5}, sets, 4)
    assert sorted(capped.expanded().tolist()) == (list(range(0, 5)) + list(range(30, 35))
                                                  + list(range(60, 65)) + list(range(90, 95)))


@pytest.mark.parametrize("spec,msg", [
    ({"type": "uniform"}, "sampling type 'uniform' is unknown; choose one of"),
    ({"type": "temperature", "temperature": 0.5}, "temperature must be >= 1"),
    ({"type": "weights", "weights": [0.7, 0.7]}, "weights must sum to 1"),
    ({"type": "weights", "weights": [1.5, -0.5]}, "weight of data set 'b' must be a number >= 0"),
    ({"type": "explicit", "ratios": {"a": 1}}, "no ratio for data set 'b'"),
    ({"type": "weighted", "ratios": [1, -2]}, "ratio of data set 'b' must be a number >= 0"),
    ({"type": "balanced", "no_shuffle": ["c"]}, "no_shuffle must list data set names .of a, b."),
])
def test_bad_sampling_is_a_config_error(files, spec, msg):
    store = ShardStore.from_files(None, [f"a={files['qm']}", f"b={files['oc']}"])
    with pytest.raises(ConfigError, match=msg):
        MDLoader(store, batch_size=4, prefetch=0, backend="collective", sampling=spec)


def test_loader_with_mix_resumes_mid_epoch(files):
    store = ShardStore.from_files(None, [files[n] for n in SIZES])
    kw = dict(batch_size=5, prefetch=0, backend="collective", seed=4,
              sampling={"type": "balanced"})
    full = [b.y.clone() for b in MDLoader(store, **kw)]
    assert len(full) == -(-37 * 3 // 5)
    ld = MDLoader(store, **kw)
    ld.load_state_dict({**ld.state_dict(), "epoch": 0, "step": 3})
    rest = [b.y.clone() for b in ld]
    assert len(rest) == len(full) - 3
    assert all(torch.equal(a, b) for a, b in zip(rest, full[3:]))


def test_group_size_auto_sizes_several_files_as_the_sum_of_their_records(files):
    """``group_size: auto`` over several files: the sizing is every file's records (each with
    its ``dataset_name`` tag) in global id order plus the one index, exactly the store's."""
    from types import SimpleNamespace

    from mdloader_plugin.store import budget as mem
    from mdloader_plugin.loader.open import _decide, open_store

    paths = [f"{n}={files[n]}" for n in SIZES]
    store = ShardStore.from_files(None, paths)
    with MultiSource([_spec(files[n], n) for n in SIZES]) as src:
        sizes = mem.multi_record_sizes(src)
        assert mem.multi_record_sizes(src, 30, 60).tolist() == store.nbytes[30:60].tolist()
    everything = store.nbytes[0:store.num_samples].tolist()
    assert sizes.tolist() == everything  # exact, tag included
    world = SimpleNamespace(node_of=np.zeros(4, dtype=np.int64))  # 4 ranks on one node
    budget = mem.per_rank_bytes(sizes, 2)
    d = _decide(world, paths, "trainset", None, 4, "auto", "local", budget, "test", False)
    assert d.group_size in (2, 4)
    assert {c.group_size for c in d.candidates if not c.fits} == {1}
    assert all(c.memory_bytes == mem.per_rank_bytes(sizes, c.group_size) for c in d.candidates)
    one = open_store(None, paths, group_size="auto", batch_size=4)  # one process: W = 1
    assert one.nbytes[0:one.num_samples].tolist() == everything
    assert one.meta["dataset_names"] == list(SIZES)
