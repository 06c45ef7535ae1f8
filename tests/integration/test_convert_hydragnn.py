"""Converted files that feed HydraGNN and fairchem alike: ``mdloader convert`` with labelled
inputs (OC20's separate ``train/`` and ``val/`` folders into one file's ``trainset``/``valset``)
and HydraGNN's ``x``/``y`` columns chosen by ``--x``/``--y``, with the ``variable_dim`` HydraGNN's
layout needs; the converted file then trains in the HydraGNN driver and in the fairchem recipe on
2 real MPI ranks. A field the input lacks is one line naming it, exit 2."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import yaml

from mpirun import ROOT, mdloader

X, Y = "atomic_numbers,forces", "energy"


def convert_cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mdloader_plugin", "convert", *map(str, args),
                           "--quiet"], capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.fixture(scope="module")
def oc20_folders(tmp_path_factory):
    """OC20-like ``train/`` and ``val/`` folders of ``.aselmdb`` files (EMT labels), converted
    into ``conv/oc20.bp`` (the name the fairchem recipe reads)."""
    from mdloader_plugin.integrations.fairchem.data import write_oc20_like

    d = tmp_path_factory.mktemp("oc20")
    write_oc20_like(str(d), num_train=16, num_val=8, seed=2)
    out = d / "conv" / "oc20.bp"
    # HydraGNN's driver also loads a testset: OC20's val folder serves as both, as it often does
    r = convert_cli(f"train={d / 'train'}", f"val={d / 'val'}", f"test={d / 'val'}",
                    "--x", X, "--y", Y, "--out", out)
    assert r.returncode == 0, r.stderr
    return d, out, r.stdout


def test_labelled_splits_and_hydragnn_columns(oc20_folders):
    import ase.db

    from mdloader_plugin.sources.adios import GraphFile

    d, out, stdout = oc20_folders
    assert "wrote" in stdout and "trainset 16, valset 8, testset 8" in stdout
    assert ("node_features: {column_index: [0, 1], dim: [1, 3], name: [atomic_numbers, forces]}"
            in stdout)
    with GraphFile(out) as f:
        assert f.labels() == ["trainset", "valset", "testset"]
        for label, folder in (("trainset", "train"), ("valset", "val"), ("testset", "val")):
            info = f.info(label)
            assert info.keys["edge_index"].vdim == 1 and info.keys["x"].vdim == 0
            block = f.read_block(label, 0, info.ndata)
            rows = list(ase.db.connect(str(d / folder / "data.aselmdb"),
                                       type="aselmdb").select())
            assert len(rows) == info.ndata
            for i, row in enumerate(rows):  # source order within a labelled input
                g = block.sample(i)
                atoms = row.toatoms()
                np.testing.assert_array_equal(g["x"][:, 0], atoms.numbers)
                np.testing.assert_allclose(g["x"][:, 1:], atoms.get_forces(), rtol=1e-6)
                np.testing.assert_allclose(g["y"], [atoms.get_potential_energy()], rtol=1e-6)
                np.testing.assert_allclose(g["pos"], atoms.positions, rtol=1e-6)


@pytest.mark.parametrize("args,expected", [
    (["--x", "atomic_numbers,charge"], "has no field 'charge' (asked by --x)"),
    (["--y", "forces"], "--y 'forces' is per atom"),
    (["--x", "energy"], "--x 'energy' has shape [1], not one row an atom"),
])
def test_a_column_the_input_lacks_is_one_line(oc20_folders, tmp_path, args, expected):
    d, _, _ = oc20_folders
    r = convert_cli(f"train={d / 'train'}", *args, "--out", tmp_path / "o.bp")
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert len(lines) == 1 and expected in lines[0] and str(d / "train") in lines[0], r.stderr
    assert not (tmp_path / "o.bp").exists()


def test_labelled_inputs_refuse_split_and_unknown_names(oc20_folders, tmp_path):
    d, _, _ = oc20_folders
    r = convert_cli(f"train={d / 'train'}", f"val={d / 'val'}", "--split", "0.5,0.5,0",
                    "--out", tmp_path / "o.bp")
    assert r.returncode == 2 and "drop --split" in r.stderr
    r = convert_cli(f"dev={d / 'val'}", "--out", tmp_path / "o.bp")
    assert r.returncode == 2 and "SPLIT one of train, val, test" in r.stderr


def _hydragnn_config(tmp_path, path) -> str:
    cfg = yaml.safe_load((ROOT / "recipes/hydragnn/demo.yaml").read_text())
    cfg["Dataset"].update(path=str(path), name="oc20-converted",
                          node_features={"name": ["atomic_numbers", "forces"], "dim": [1, 3],
                                         "column_index": [0, 1]},
                          graph_features={"name": ["energy"], "dim": [1], "column_index": [0]})
    voi = cfg["NeuralNetwork"]["Variables_of_interest"]
    voi.update(input_node_features=[0], output_names=["energy"], output_index=[0],
               output_dim=[1], type=["graph"])
    cfg["NeuralNetwork"]["Training"].update(num_epoch=2, batch_size=4)
    cfg["run_name"] = "converted"
    out = tmp_path / "converted.yaml"
    out.write_text(yaml.safe_dump(cfg))
    return str(out)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_converted_file_trains_in_hydragnn(oc20_folders, tmp_path):
    _, out, _ = oc20_folders
    r = mdloader(2, ["train", "hydragnn", "--config", _hydragnn_config(tmp_path, out)],
                 cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    log = (tmp_path / "logs" / "converted" / "run.log").read_text()
    assert sorted(rec["epoch"] for rec in parse_epoch_lines(log.splitlines())) == [0, 1]


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_converted_file_trains_in_the_fairchem_recipe(oc20_folders, tmp_path):
    _, out, _ = oc20_folders
    r = mdloader(2, ["train", "fairchem", "-c", str(ROOT / "recipes/fairchem/cpu.yaml"),
                     f"data_dir={out.parent}", f"job.run_dir={tmp_path / 'runs'}",
                     "job.run_name=converted", "max_epochs=1"], cwd=tmp_path, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    log = tmp_path / "runs" / "converted" / "logs" / "train.log"
    assert "MDLOADER-EPOCH" in log.read_text()
