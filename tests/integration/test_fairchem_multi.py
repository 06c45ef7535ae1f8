"""Two data sets with temperature sampling (recipes/fairchem/multi): MDLoader against fairchem's
own ``create_concat_dataset`` over the same structures.

* Identical by construction: entry ``i`` of fairchem's expanded ``ConcatDataset`` and entry ``i``
  of MDLoader's expanded epoch list (with fairchem's per-data-set permutation) are the same
  structure, converted tensor for tensor alike
  (``dataset`` and ``dataset_name`` included).
* Orders differ (fairchem's atom-budget batch sampler shuffles batches, MDLoader shuffles
  samples), so an epoch is compared as a multiset: the same (data set, structure) pairs, each as
  many times.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("fairchem.core")

from mdloader_plugin.records import codec  # noqa: E402
from mdloader_plugin.integrations.fairchem.data import ToAtomicDataByDataset  # noqa: E402
from mdloader_plugin.loader.loader import MDLoader  # noqa: E402
from mdloader_plugin.sampling.mixes import DataSets, get_mix  # noqa: E402
from mdloader_plugin.sources import synth_atoms  # noqa: E402
from mdloader_plugin.store.shard import ShardStore  # noqa: E402

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "fairchem" / "multi"
KEY_MAPPING = {"energy": "energy", "forces": "forces"}


@pytest.fixture(scope="module")
def gfm(tmp_path_factory):
    out = tmp_path_factory.mktemp("gfm")
    for kind, counts in (("bulk", (14, 3, 0)), ("slabs", (5, 2, 0))):
        synth_atoms.write_set(str(out), kind, counts, seed=2, aselmdb=True)
    return out


def _recipe_train_dataset(data_dir: Path):
    """fairchem's train dataset exactly as the recipe's ``loader: fairchem`` builds it."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    top = OmegaConf.load(RECIPE / "cpu.yaml")
    cfg = OmegaConf.create({"data_dir": str(data_dir), "sampling": top.sampling,
                            "loader": OmegaConf.load(RECIPE / "loader" / "fairchem.yaml")})
    return instantiate(cfg.loader.train_dataloader.dataset), top


def _key(data) -> tuple:
    return data.dataset, data.sid[0] if isinstance(data.sid, list) else str(data.sid)


def test_temperature_epoch_equals_fairchem_concat_dataset(gfm):
    from fairchem.core.datasets.samplers.max_atom_distributed_sampler import (
        MaxAtomDistributedBatchSampler,
    )

    from test_fairchem import _assert_same

    theirs, top = _recipe_train_dataset(gfm)
    assert theirs.dataset_names == ["bulk.train", "slabs.train"]
    store = ShardStore.from_files(None, [f"bulk={gfm / 'bulk.bp'}", f"slabs={gfm / 'slabs.bp'}"])
    from mdloader_plugin.integrations.fairchem.loader import _sampling

    sampling = _sampling(dict(top.sampling), "train")  # what the front end passes
    mix = get_mix(sampling, DataSets.of_store(store), 1)
    assert mix.counts.tolist() == [n - p for n, p in zip(theirs.cumulative_sizes,
                                                         [0] + theirs.cumulative_sizes[:-1])]
    assert mix.counts[1] > 5  # the small set is oversampled
    conv = ToAtomicDataByDataset([("bulk", KEY_MAPPING, None), ("slabs", KEY_MAPPING, None)])
    for i, gid in enumerate(mix.expanded().tolist()):
        _assert_same(conv(codec.decode(store.local_record(gid))), theirs[i])

    bs = MaxAtomDistributedBatchSampler(theirs, max_atoms=64, num_replicas=1, rank=0, seed=0)
    bs.set_epoch_and_start_iteration(1, 0)
    want = Counter(_key(theirs[i]) for batch in bs for i in batch)
    loader = MDLoader(store, batch_size=4, prefetch=0, backend="collective", seed=0,
                      to_sample=conv, collate=list, sampling=sampling)
    loader.set_epoch(1)
    got = Counter(_key(d) for batch in loader for d in batch)
    assert got == want and sum(got.values()) == len(theirs)
    assert {k[0] for k in got} == {"bulk", "slabs"}


def test_group_size_auto_with_several_data_sets(gfm):
    """``group_size: auto`` is chosen over both files (one process: W = 1) and serves the same
    epoch as the default placement; it was refused with several data sets before."""
    from mdloader_plugin.integrations.fairchem.loader import build_loader

    def epoch(group_size):
        loader = build_loader(datasets={"bulk": str(gfm / "bulk.bp"),
                                        "slabs": str(gfm / "slabs.bp")},
                              collate_fn=list, batch_size=4, group_size=group_size,
                              key_mapping=KEY_MAPPING, prefetch=0, backend="collective",
                              sampling={"type": "temperature", "temperature": 2.0})
        return [_key(d) for batch in loader for d in batch]

    auto = epoch("auto")
    assert auto == epoch(None) and {k[0] for k in auto} == {"bulk", "slabs"}
    assert len(auto) > 19  # temperature 2 oversamples the small set


def test_per_dataset_no_shuffle_equals_fairchem(gfm):
    """fairchem's per-data-set ``no_shuffle`` (a split option of ``create_dataset``): that data set
    keeps its file order, the others their seeded permutation; entry ``i`` of fairchem's
    expanded ConcatDataset and of MDLoader's expanded epoch are the same structure."""
    from omegaconf import OmegaConf

    from mdloader_plugin.integrations.fairchem.loader import _multi_store, _sampling
    from test_fairchem import _assert_same

    from hydra.utils import instantiate

    top = OmegaConf.load(RECIPE / "cpu.yaml")
    cfg = OmegaConf.create({"data_dir": str(gfm), "sampling": top.sampling,
                            "loader": OmegaConf.load(RECIPE / "loader" / "fairchem.yaml")})
    cfg.loader.train_dataloader.dataset.dataset_configs.bulk.splits.train.no_shuffle = True
    theirs = instantiate(cfg.loader.train_dataloader.dataset)
    store, conv, names, no_shuffle = _multi_store(
        None, {"bulk": {"path": str(gfm / "bulk.bp"), "no_shuffle": True},
               "slabs": str(gfm / "slabs.bp")}, "trainset", "train", KEY_MAPPING, None, None, {})
    assert no_shuffle == ["bulk"]
    mix = get_mix(_sampling(dict(top.sampling), "train", no_shuffle), DataSets.of_store(store), 1)
    expanded = mix.expanded().tolist()
    assert expanded[:14] == list(range(14)) and len(expanded) == len(theirs)
    for i, gid in enumerate(expanded):
        _assert_same(conv(codec.decode(store.local_record(gid))), theirs[i])
