"""docs/own-data.md runs as printed: an OC20-style folder of ``.aselmdb`` shards (written with
ASE's aselmdb backend, as fairchem writes them, and read back by fairchem's own AseDBDataset)
converted on 2 ranks into the file the fairchem recipe reads, then trained with that recipe; an
extxyz trajectory converted with HydraGNN's columns into the config the page shows, then trained
with HydraGNN. Each command is the page's line, run in a folder holding the page's paths."""

from __future__ import annotations

import os
import shlex

import numpy as np
import pytest
import yaml

from docs_blocks import block
from mpirun import ROOT, mdloader

pytestmark = pytest.mark.mpi


def run_lines(text: str, cwd) -> list:
    """Run every ``mpiexec -n N mdloader ARGS`` line of a docs block in `cwd`."""
    out = []
    for line in text.strip().splitlines():
        argv = shlex.split(line)
        assert argv[:2] == ["mpiexec", "-n"] and argv[3] == "mdloader", line
        r = mdloader(int(argv[2]), argv[4:], cwd=cwd, timeout=900)
        assert r.returncode == 0, line + "\n" + r.stdout[-2000:] + r.stderr[-4000:]
        out.append(r)
    return out


def write_shard(path, structures) -> None:
    import ase.db

    with ase.db.connect(str(path)) as db:  # the aselmdb backend, by the name's extension
        for a in structures:
            db.write(a, data={"sid": a.info["sid"]})


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A launch folder with the page's paths: recipes/ (linked) and data/ made here."""
    from ase.io import write

    from mdloader_plugin.integrations.fairchem import synth

    d = tmp_path_factory.mktemp("own")
    os.symlink(ROOT / "recipes", d / "recipes")
    for folder, ranges in (("train", [(0, 6), (6, 11)]), ("val", [(11, 15)])):
        (d / "data" / "oc20" / folder).mkdir(parents=True)
        for s, (a, b) in enumerate(ranges):
            write_shard(d / "data" / "oc20" / folder / f"data.{s:04d}.aselmdb",
                        list(synth.slabs(4, a, b)))
    (d / "data" / "md").mkdir(parents=True)
    frames = list(synth.slabs(5, 0, 20))
    for a in frames:  # the same fields in every frame (an MD trajectory's)
        a.arrays.pop("initial_magmoms", None)
    write(str(d / "data" / "md" / "traj.extxyz"), frames, format="extxyz")
    return d


@pytest.fixture(scope="module")
def oc20_converted(workdir):
    convert, train = block("own-data.md", "own-data-fairchem").strip().splitlines()
    r = run_lines(convert, workdir)[0]
    return r, train


def test_shards_convert_on_2_ranks_into_the_recipes_path(workdir, oc20_converted):
    from fairchem.core.datasets import AseDBDataset

    from mdloader_plugin.sources.adios import GraphFile

    r, _ = oc20_converted
    assert "trainset 11, valset 4" in r.stdout and "on 2 ranks" in r.stdout, r.stdout
    recipe = yaml.safe_load((ROOT / "recipes/fairchem/cpu.yaml").read_text())
    loader = yaml.safe_load((ROOT / "mdloader_plugin" / "integrations" / "fairchem" / "conf"
                             / "loader" / "mdloader.yaml").read_text())
    path = loader["train_dataloader"]["path"].replace("${data_dir}", recipe["data_dir"])
    assert path == "data/oc20/oc20.bp"
    with GraphFile(str(workdir / path)) as f:
        for label, folder in (("trainset", "train"), ("valset", "val")):
            ref = AseDBDataset({"src": str(workdir / "data" / "oc20" / folder)})
            block_ = f.read_block(label, 0, f.info(label).ndata)
            assert len(ref) == f.info(label).ndata
            for i in range(len(ref)):  # fairchem's order over the shards is the file's
                atoms = ref.get_atoms(i)
                np.testing.assert_array_equal(block_.sample(i)["atomic_numbers"], atoms.numbers)
                np.testing.assert_allclose(block_.sample(i)["forces"], atoms.get_forces(),
                                           rtol=1e-6)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_the_fairchem_recipe_trains_on_it(workdir, oc20_converted):
    _, train = oc20_converted
    run_lines(train, workdir)
    log = workdir / "runs" / "fairchem" / "fairchem-cpu" / "logs" / "train.log"
    assert "MDLOADER-EPOCH" in log.read_text()


def merge(base: dict, top: dict) -> dict:
    for k, v in top.items():
        base[k] = merge(base.get(k, {}), v) if isinstance(v, dict) else v
    return base


@pytest.fixture(scope="module")
def md_converted(workdir):
    r = run_lines(block("own-data.md", "own-data-extxyz"), workdir)[0]
    keys = yaml.safe_load(block("own-data.md", "own-data-hydragnn-config"))
    cfg = merge(yaml.safe_load((ROOT / "recipes/hydragnn/demo.yaml").read_text()), keys)
    (workdir / "md.yaml").write_text(yaml.safe_dump(cfg))
    return r, keys


def test_extxyz_prints_the_pages_dataset_keys(md_converted):
    r, keys = md_converted
    assert "trainset 16, valset 2, testset 2" in r.stdout, r.stdout
    for kind in ("node_features", "graph_features"):
        line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith(kind + ":"))
        assert yaml.safe_load(line.strip())[kind] == keys["Dataset"][kind]


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_hydragnn_trains_on_it(workdir, md_converted):
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    run_lines(block("own-data.md", "own-data-hydragnn"), workdir)
    logs = list((workdir / "logs").glob("*/run.log"))
    assert len(logs) == 1
    epochs = parse_epoch_lines(logs[0].read_text().splitlines())
    assert sorted(rec["epoch"] for rec in epochs) == [0, 1]
