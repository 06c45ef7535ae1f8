"""fairchem integration without MPI: samples and batches equal fairchem's own, balancing, driver
arguments, epoch lines. (Training on real MPI ranks is in test_fairchem_mpi.py.)"""

from __future__ import annotations

import argparse
import logging
import types

import numpy as np
import pytest

pytest.importorskip("fairchem.core")

from mdloader_plugin.core.epochlog import parse_epoch_lines  # noqa: E402
from mdloader_plugin.integrations.fairchem import data as fdata  # noqa: E402
from mdloader_plugin.sampling.balance import balance_plan  # noqa: E402

KEY_MAPPING = {"energy": "oc20_energy", "forces": "forces"}


@pytest.fixture(scope="module")
def oc20(tmp_path_factory):
    out = tmp_path_factory.mktemp("oc20")
    return fdata.write_oc20_like(str(out), num_train=24, num_val=4, seed=3)


def _fairchem_dataset(path: str, split: str = "train"):
    from fairchem.core.datasets.mt_concat_dataset import create_concat_dataset
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"oc20": {
        "format": "ase_db", "a2g_args": {"r_energy": True, "r_forces": True, "r_edges": False},
        "key_mapping": KEY_MAPPING, "transforms": {"common_transform": {"dataset_name": "oc20"}},
        "splits": {split: {"src": [path]}}}})
    return create_concat_dataset(cfg, {"sampling": {"type": "temperature", "temperature": 1.0}})


def _assert_same(a, b) -> None:
    import torch

    assert sorted(a.keys()) == sorted(b.keys())
    for key in a.keys():
        va, vb = a[key], b[key]
        if torch.is_tensor(va):
            assert va.dtype == vb.dtype and va.shape == vb.shape, key
            assert torch.equal(va, vb), key
        else:
            assert va == vb, key


def test_samples_and_batches_equal_fairchem_dataset(oc20):
    from fairchem.core.units.mlip_unit.mlip_unit import Task, mt_collater_adapter

    from mdloader_plugin.sources.adios import GraphFile

    ds = _fairchem_dataset(oc20["train"])
    with GraphFile(oc20["bp"]) as f:
        block = f.read_block("trainset", 0, 24)
    conv = fdata.ToAtomicData("oc20", KEY_MAPPING, split="train")
    order = [int(i) for i in ds.datasets[0].indices]  # fairchem shuffles its subset
    ours = [conv(block.sample(j)) for j in order]
    for i, b in enumerate(ours):
        _assert_same(ds[i], b)
    tasks = [Task(name="oc20_energy", level="system", property="energy", out_spec=None,
                  normalizer=None, datasets=["oc20"]),
             Task(name="forces", level="atom", property="forces", out_spec=None,
                  normalizer=None, datasets=["oc20"])]
    for t in tasks:
        t.out_spec = types.SimpleNamespace(dim=[1] if t.level == "system" else [3],
                                           dtype="float32")
    collate = mt_collater_adapter(tasks)
    _assert_same(collate([ds[i] for i in range(5)]), collate(ours[:5]))


def test_decoder_wraps_and_reads_converter_fields():
    from ase.build import fcc111

    atoms = fcc111("Cu", size=(2, 2, 2), vacuum=5.0)
    atoms.set_tags(0)
    atoms.positions[0] += atoms.cell[0] * 1.5  # outside the cell: fairchem wraps it back
    sample = fdata.atoms_to_sample(atoms, 7)
    d = fdata.ToAtomicData("oc20", split=None)(sample)
    frac = np.linalg.solve(atoms.cell.array.T, d.pos.double().numpy().T).T
    assert (frac[:, :2] >= -1e-6).all() and (frac[:, :2] < 1 + 1e-6).all()
    assert d.tags.tolist() == [1] * len(atoms)  # all-zero tags become 1, as apply_one_tags does
    assert d.sid == ["7"] and d.dataset == "oc20" and "dataset_name" not in d.keys()
    with pytest.raises(fdata.DataError, match="tags"):
        fdata.ToAtomicData.build({k: v for k, v in sample.items() if k != "tags"})


def test_balance_plan_keeps_ids_and_evens_atoms():
    rng = np.random.default_rng(0)
    natoms = rng.integers(5, 200, size=400)
    plan = rng.permutation(400)[:64].reshape(4, 16)
    out = balance_plan(plan, natoms)
    assert out.shape == plan.shape and sorted(out.ravel()) == sorted(plan.ravel())
    before, after = natoms[plan].sum(axis=1), natoms[out].sum(axis=1)
    assert np.ptp(after) <= natoms.max() and np.ptp(after) <= np.ptp(before)
    assert (balance_plan(plan[:1], natoms) == plan[:1]).all()


def test_driver_takes_argv_or_a_namespace():
    from mdloader_plugin.integrations.fairchem.driver import _split, add_arguments

    assert _split(["-c", "x.yaml", "loader=fairchem", "max_epochs=1"]) == (
        "x.yaml", ["loader=fairchem", "max_epochs=1"])
    ns = add_arguments(argparse.ArgumentParser()).parse_args(["-c", "y.yaml", "loader=mdloader"])
    assert _split(ns) == ("y.yaml", ["loader=mdloader"])


def test_epoch_callback_writes_one_parsable_line_per_epoch(caplog):
    import torch

    from mdloader_plugin.integrations.fairchem.callbacks import EpochLogCallback

    progress = types.SimpleNamespace(num_epochs_completed=0, num_steps_completed=0)
    unit = types.SimpleNamespace(train_progress=progress, last_loss=torch.tensor(0.5),
                                 get_next_train_batch=lambda state, it: next(it))
    dl = types.SimpleNamespace(epoch_stats={"backend": "onesided", "fetch_s": 0.1})
    state = types.SimpleNamespace(train_state=types.SimpleNamespace(dataloader=dl))
    cb = EpochLogCallback(run="r", loader="mdloader", step_losses=True)
    cb.on_train_start(state, unit)
    batches = iter([types.SimpleNamespace(natoms=torch.tensor([3, 4]))] * 2)
    with caplog.at_level(logging.INFO, logger="fairchem.mdloader"):
        cb.on_train_epoch_start(state, unit)
        for _ in range(2):
            unit.get_next_train_batch(state, batches)
            progress.num_steps_completed += 1
            cb.on_train_step_end(state, unit)
        progress.num_epochs_completed = 1
        cb.on_train_epoch_end(state, unit)
    (rec,) = parse_epoch_lines(caplog.text.splitlines())
    assert rec["loader"] == "mdloader" and rec["backend"] == "onesided" and rec["epoch"] == 0
    assert rec["steps"] == 2 and rec["samples"] == 4 and rec["atoms"] == "14"
    assert caplog.text.count("MDLOADER-STEP rank=0 epoch=0") == 2
