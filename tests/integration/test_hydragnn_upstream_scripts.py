"""Upstream HydraGNN main's own training scripts, unmodified, under the launcher
(``mpiexec -n N python -m mdloader_plugin.hydragnn SCRIPT ARGS``) on 4 CPU ranks.

* ``examples/multibranch/train.py --multi --ddstore --ddstore_width 2`` over two files written
  by ``mdloader synth --kind gfm`` (molecules, bulk crystals): trains to the end with MDLoader
  serving; its losses equal those of upstream's own DDStore path (upstream's ``DistDataset`` and
  ``create_dataloaders``, on a test stand-in for the ``pyddstore`` C++ library,
  ``tests/common/fake_ddstore``) over the same data, whose batches are the same; every graph
  reaches the branch of its own file (a probe on the model's branch layers tells a graph's file
  from its atoms, never from ``dataset_name``); ``MDLOADER_REPLACE=all`` without ``--ddstore``
  serves the same batches (upstream's own non-DDStore path gives each rank one file's graphs,
  which stops upstream's multibranch model under DDP: unused branch parameters).
* ``examples/nabla2_dft/train.py --ddstore`` (one data set; the script copied unchanged beside
  its ``dataset/Nabla2DFT.bp``, where it looks for it): MDLoader's losses equal upstream's own
  non-DDStore path (``DistributedSampler`` over the same data set: the same batches).
* Bad input: a missing script, ``--ddstore_width`` not dividing the ranks, ``--multi`` files
  whose keys disagree: one line, non-zero exit on every rank, no hang.

The train sets are sized so every train batch holds graphs of both files: upstream's multibranch
model under DDP (``find_unused_parameters=False``) hangs when a rank's batch leaves a branch
unused, whoever serves the data.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hydragnn_versions import env_for, source_of
from mpirun import MPIEXEC, ROOT, mpi_env

CONFIGS = ROOT / "recipes" / "hydragnn" / "upstream_scripts"
PROBE = ROOT / "tests" / "mpi_scripts" / "launch_with_probe.py"
FAKE_DDSTORE = ROOT / "tests" / "common" / "fake_ddstore"
EPOCH = re.compile(r"Epoch: (\d+), Train Loss: (\S+), Val Loss: (\S+), Test Loss: (\S+)")

pytestmark = [pytest.mark.mpi, pytest.mark.slow, pytest.mark.timeout(2400)]


def launch(n, script, args, cwd, env, timeout=900, probe=False):
    """``mpiexec -n N python -m mdloader_plugin.hydragnn SCRIPT ARGS`` (no ``-m mpi4py``: the
    launcher aborts the job itself)."""
    entry = [str(PROBE)] if probe else ["-m", "mdloader_plugin.hydragnn"]
    cmd = [MPIEXEC, "-n", str(n), sys.executable, *entry, str(script), *map(str, args)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=mpi_env(env), cwd=cwd)


def losses(work: Path, log: str) -> list[tuple[str, ...]]:
    text = (work / "logs" / log / "run.log").read_text()
    return [m.groups()[1:] for m in EPOCH.finditer(text)]


def _ok(res) -> str:
    return res.stdout[-3000:] + res.stderr[-4000:]


# -- examples/multibranch/train.py --------------------------------------------------------------
@pytest.fixture(scope="module")
def multibranch(tmp_path_factory):
    env = env_for("main")
    script = source_of("main") / "examples" / "multibranch" / "train.py"
    work = tmp_path_factory.mktemp("upstream_multibranch")
    res = subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", "gfm",
                          "--num-graphs", "80,80", "--split", "0.8,0.1,0.1", "--out",
                          work / "gfm"], capture_output=True, text=True, env=mpi_env(env),
                         timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    files = f"{work / 'gfm' / 'ani1x.bp'},{work / 'gfm' / 'qm7x.bp'}"
    common = ["--inputfile", CONFIGS / "multibranch_small.json", "--multi",
              "--multi_model_list", files, "--batch_size", "16", "--num_epoch", "2"]
    (work / "probe").mkdir()
    runs = {
        "mdloader": launch(4, script, common + ["--ddstore", "--ddstore_width", "2", "--log",
                                                "mdloader"], work,
                           {**env, "PROBE_OUT": str(work / "probe")}, probe=True),
        "upstream-ddstore": launch(4, script, common + ["--ddstore", "--log", "upstream-ddstore"],
                                   work, {**env, "MDLOADER_REPLACE": "none", "PYTHONPATH":
                                          f"{FAKE_DDSTORE}:{env['PYTHONPATH']}"}),
        "replace-all": launch(4, script, common + ["--log", "replace-all"], work,
                              # as --ddstore sets it: losses reduced over MPI, in the same order
                              {**env, "MDLOADER_REPLACE": "all", "HYDRAGNN_AGGR_BACKEND": "mpi"}),
    }
    return {"work": work, "runs": runs, "files": files, "script": script, "env": env}


def test_multibranch_runs_to_the_end_with_mdloader_serving(multibranch):
    res = multibranch["runs"]["mdloader"]
    assert res.returncode == 0, _ok(res)
    assert len(losses(multibranch["work"], "mdloader")) == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mdloader: launcher:")]
    assert len(lines) == 1, res.stderr[-3000:]  # one line, from rank 0
    assert "DistDataset -> MDLoader store (2 files, 4 ranks, replica groups of 2)" in lines[0]
    assert "--ddstore_width -> mapped" in lines[0] and "--multi_model_list -> mapped" in lines[0]


def test_multibranch_losses_equal_upstreams_ddstore_path(multibranch):
    base = multibranch["runs"]["upstream-ddstore"]
    assert base.returncode == 0, _ok(base)
    ours = losses(multibranch["work"], "mdloader")
    assert len(ours) == 2 and ours == losses(multibranch["work"], "upstream-ddstore")


def test_every_graph_reaches_its_own_branch(multibranch):
    per_rank = [json.loads((multibranch["work"] / "probe" / f"rank{r}.json").read_text())
                for r in range(4)]
    both = set()
    for rank, batches in enumerate(per_rank):
        assert batches, f"rank {rank} ran no batch"
        for i, b in enumerate(batches):
            want = {f"branch-{k}": b["kinds"].count(k) for k in (0, 1) if b["kinds"].count(k)}
            assert b["rows"] == want and b["ids"] == b["kinds"], (rank, i, b)
            both |= set(b["kinds"])
    assert both == {0, 1}


def test_replace_all_serves_the_non_ddstore_path_with_the_same_batches(multibranch):
    """Without --ddstore upstream hands each rank its own file's subset, so a rank's batches use
    one branch and DDP stops (parameters without gradients); MDLOADER_REPLACE=all deals the
    subsets joined, as --ddstore does."""
    res = multibranch["runs"]["replace-all"]
    assert res.returncode == 0, _ok(res)
    assert losses(multibranch["work"], "replace-all") == losses(multibranch["work"], "mdloader")
    assert "create_dataloaders -> MDLoader" in res.stderr


# -- a single-data-set script: examples/nabla2_dft/train.py ---------------------------------------
def _nabla2dft_file(path: Path) -> None:
    """A Nabla2DFT-layout file (x = atomic number, forces: node feature dims 1, 3; y the graph
    target) from small EMT-labelled molecules."""
    import numpy as np

    from mdloader_plugin.sources import synth_atoms
    from mdloader_plugin.sources.writer import write_graphs

    graphs = {}
    start = 0
    for label, n in (("trainset", 64), ("valset", 8), ("testset", 8)):
        recs = []
        for atoms in synth_atoms.structures("molecules", 11, start, start + n):
            g = synth_atoms.gfm_record(atoms)
            g["x"] = np.ascontiguousarray(g["x"][:, [0, 4, 5, 6]])
            recs.append(g)
        graphs[label] = recs
        start += n
    write_graphs(path, graphs, attributes={"dataset_name": "nabla2dft"},
                 vdims={"edge_index": 1, "edge_attr": 0})


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    env = env_for("main")
    work = tmp_path_factory.mktemp("upstream_single")
    shutil.copy(source_of("main") / "examples" / "nabla2_dft" / "train.py", work / "train.py")
    (work / "dataset").mkdir()
    _nabla2dft_file(work / "dataset" / "Nabla2DFT.bp")
    common = ["--inputfile", CONFIGS / "single_small.json", "--batch_size", "8"]
    return {"work": work, "runs": {
        # MDLOADER_BACKEND (documented for the launcher) picks the backend: the batches, and so
        # the losses, are the same whichever serves
        "mdloader": launch(4, work / "train.py", common + ["--ddstore", "--log", "mdloader"],
                           work, {**env, "MDLOADER_BACKEND": "collective"}),
        # --ddstore sets HYDRAGNN_AGGR_BACKEND=mpi (losses reduced over MPI): the same here
        "upstream": launch(4, work / "train.py", common + ["--log", "upstream"], work,
                           {**env, "HYDRAGNN_AGGR_BACKEND": "mpi"})}}


def test_single_data_set_script_with_ddstore_equals_upstreams_own_loader(single):
    for res in single["runs"].values():
        assert res.returncode == 0, _ok(res)
    ours = losses(single["work"], "mdloader")
    assert len(ours) == 2 and ours == losses(single["work"], "upstream")
    assert ("create_dataloaders -> MDLoader (backend collective,"
            in single["runs"]["mdloader"].stderr)


# -- bad input ------------------------------------------------------------------------------------
def _one_error_line(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert res.returncode != 0 and lines, _ok(res)
    return lines[0]


@pytest.mark.timeout(120)
def test_missing_script_is_one_line(tmp_path):
    res = launch(2, tmp_path / "nope.py", [], tmp_path, env_for("main"), timeout=100)
    line = _one_error_line(res)
    assert res.returncode == 2 and "nope.py: no such script" in line
    assert len([ln for ln in res.stderr.splitlines() if "mdloader: error:" in ln]) == 1


@pytest.mark.timeout(120)
def test_missing_script_through_the_cli_is_the_same_line(tmp_path):
    from mpirun import mdloader

    res = mdloader(2, ["run", "hydragnn", tmp_path / "nope.py", "--ddstore"], cwd=tmp_path,
                   timeout=100, env=env_for("main"))
    assert res.returncode == 2 and "nope.py: no such script" in _one_error_line(res)


@pytest.mark.timeout(900)
def test_width_not_dividing_the_ranks_is_one_line_naming_the_flag(multibranch):
    args = ["--inputfile", CONFIGS / "multibranch_small.json", "--multi", "--multi_model_list",
            multibranch["files"], "--ddstore", "--ddstore_width", "3", "--num_epoch", "1"]
    res = launch(4, multibranch["script"], args, multibranch["work"], multibranch["env"],
                 timeout=860)
    line = _one_error_line(res)
    assert "--ddstore_width 3" in line and "divide" in line
    assert res.returncode == 2  # every rank alike, no abort


@pytest.mark.timeout(900)
def test_multi_files_whose_keys_disagree_are_refused(multibranch, tmp_path):
    from mdloader_plugin.sources.adios import GraphFile
    from mdloader_plugin.sources.writer import write_graphs

    src = multibranch["files"].split(",")[1]
    with GraphFile(src) as f:
        graphs = {lab: [{k: v for k, v in g.items() if k != "forces"}
                        for g in f.read_block(lab, 0, f.info(lab).ndata)]
                  for lab in ("trainset", "valset", "testset")}
        pna_deg = f.global_attributes()["pna_deg"]
    write_graphs(tmp_path / "qm7x.bp", graphs, attributes={"dataset_name": "qm7x",
                                                            "pna_deg": pna_deg},
                 vdims={"edge_index": 1, "edge_attr": 0})
    files = f"{multibranch['files'].split(',')[0]},{tmp_path / 'qm7x.bp'}"
    args = ["--inputfile", CONFIGS / "multibranch_small.json", "--multi", "--multi_model_list",
            files, "--ddstore", "--num_epoch", "1"]
    res = launch(4, multibranch["script"], args, tmp_path, multibranch["env"], timeout=860)
    line = _one_error_line(res)
    assert "'forces' is not in trainset" in line and "qm7x.bp" in line
