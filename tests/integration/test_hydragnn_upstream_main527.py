"""Upstream HydraGNN main527's own scripts (main with the named data schema), unmodified, under the
launcher on 4 CPU ranks, and ``mdloader compare-logs`` over an upstream script's two runs.

* ``examples/multibranch/train.py --multi --ddstore --ddstore_width 2`` (a graph-level output:
  main527's script reads no ``y_loc``, which upstream's training loop needs for node-level
  heads, whoever serves the data) over two files written by
  ``mdloader synth --kind gfm --variables`` (x/y/y_loc compiled from the config's ``Variables``,
  as main527's datasets serve them as written; before the fix: ``KeyError:
  'input_node_features'`` in MDLoader's reader): trains, and its losses equal upstream's own
  DDStore path (``MDLOADER_REPLACE=none`` on the ``tests/common/fake_ddstore`` stand-in for
  pyddstore).
  Both runs write ``MDLOADER-EPOCH`` lines (``loader=mdloader`` and ``loader=hydragnn``), which
  ``mdloader compare-logs`` reads side by side.
* ``examples/nabla2_dft/train.py --ddstore`` (one data set; copied unchanged beside its
  ``dataset/Nabla2DFT.bp``): MDLoader's losses equal upstream's own non-DDStore loader.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from hydragnn_versions import env_for, source_of
from mpirun import ROOT, mpi_env

from test_hydragnn_upstream_scripts import CONFIGS, FAKE_DDSTORE, _ok, launch, losses

NAMED = CONFIGS / "multibranch_small_named.json"
pytestmark = [pytest.mark.mpi, pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def multibranch(tmp_path_factory):
    env = env_for("main527")
    script = source_of("main527") / "examples" / "multibranch" / "train.py"
    work = tmp_path_factory.mktemp("upstream527")
    res = subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", "gfm",
                          "--num-graphs", "80,80", "--split", "0.8,0.1,0.1", "--variables",
                          NAMED, "--out", work / "gfm"], capture_output=True, text=True,
                         env=mpi_env(env), timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    files = f"{work / 'gfm' / 'ani1x.bp'},{work / 'gfm' / 'qm7x.bp'}"
    common = ["--inputfile", NAMED, "--multi", "--multi_model_list", files, "--batch_size",
              "16", "--num_epoch", "2", "--ddstore"]
    runs = {
        "mdloader": launch(4, script, common + ["--ddstore_width", "2", "--log", "mdloader"],
                           work, env),
        "upstream": launch(4, script, common + ["--log", "upstream"], work,
                           {**env, "MDLOADER_REPLACE": "none", "PYTHONPATH":
                            f"{FAKE_DDSTORE}:{env['PYTHONPATH']}"}),
    }
    return {"work": work, "runs": runs, "env": env}


def test_multibranch_trains_on_main527_with_upstreams_losses(multibranch):
    for res in multibranch["runs"].values():
        assert res.returncode == 0, _ok(res)
    ours = losses(multibranch["work"], "mdloader")
    assert len(ours) == 2 and ours == losses(multibranch["work"], "upstream")
    assert "replica groups of 2" in multibranch["runs"]["mdloader"].stderr


def test_compare_logs_reads_an_upstream_scripts_two_runs(multibranch):
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    work = multibranch["work"]
    for log, loader in (("mdloader", "mdloader"), ("upstream", "hydragnn")):
        recs = parse_epoch_lines((work / "logs" / log / "run.log").read_text().splitlines())
        assert [r["epoch"] for r in recs] == [0, 1], log
        assert {(r["run"], r["loader"]) for r in recs} == {("train", loader)}, log
        assert all(r["steps"] > 0 and r["wall_s"] > 0 for r in recs), log
    res = subprocess.run([sys.executable, "-m", "mdloader_plugin", "compare-logs",
                          work / "logs" / "upstream", work / "logs" / "mdloader"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT,
                         env=mpi_env(multibranch["env"]))
    assert res.returncode == 0, res.stderr
    rows = [ln for ln in res.stdout.splitlines() if ln.split()[:1] == ["train"]]
    assert len(rows) == 2 and "hydragnn" in rows[0] and "mdloader" in rows[1], res.stdout


def _nabla2dft_file(path, variables) -> None:
    from mdloader_plugin.sources import synth_atoms
    from mdloader_plugin.sources.writer import write_graphs

    graphs, start = {}, 0
    for label, n in (("trainset", 64), ("valset", 8), ("testset", 8)):
        graphs[label] = [synth_atoms.compile_named(synth_atoms.gfm_record(a), variables)
                         for a in synth_atoms.structures("molecules", 11, start, start + n)]
        start += n
    write_graphs(path, graphs, attributes={"dataset_name": "nabla2dft"},
                 vdims={"edge_index": 1, "edge_attr": 0, "y": 0})


def test_single_data_set_script_on_main527_equals_upstreams_own_loader(tmp_path):
    env = env_for("main527")
    shutil.copy(source_of("main527") / "examples" / "nabla2_dft" / "train.py",
                tmp_path / "train.py")
    cfg = json.loads((CONFIGS / "single_small.json").read_text())
    del cfg["NeuralNetwork"]["Variables_of_interest"]
    cfg["Variables"] = {"inputs": [{"name": "atomic_numbers", "level": "node", "dim": 1},
                                   {"name": "pos", "level": "node", "dim": 3,
                                    "role": "position"}],
                        "outputs": [{"name": "energy", "level": "graph", "dim": 1}]}
    (tmp_path / "single.json").write_text(json.dumps(cfg))
    (tmp_path / "dataset").mkdir()
    _nabla2dft_file(tmp_path / "dataset" / "Nabla2DFT.bp", cfg["Variables"])
    common = ["--inputfile", tmp_path / "single.json", "--batch_size", "8"]
    runs = {"mdloader": launch(4, tmp_path / "train.py", common + ["--ddstore", "--log",
                                                                   "mdloader"], tmp_path, env),
            "upstream": launch(4, tmp_path / "train.py", common + ["--log", "upstream"],
                               tmp_path, {**env, "HYDRAGNN_AGGR_BACKEND": "mpi"})}
    for res in runs.values():
        assert res.returncode == 0, _ok(res)
    ours = losses(tmp_path, "mdloader")
    assert len(ours) >= 1 and ours == losses(tmp_path, "upstream")


@pytest.mark.timeout(700)
def test_positional_inputfile_on_main527_is_one_line(tmp_path):
    script = source_of("main527") / "examples" / "multibranch" / "train.py"
    res = launch(2, script, ["--inputfile", CONFIGS / "multibranch_small.json", "--multi",
                             "--ddstore"], tmp_path, env_for("main527"), timeout=660)
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert res.returncode == 2 and len(lines) == 1, _ok(res)
    assert "multibranch_small.json" in lines[0] and "HydraGNN main527" in lines[0]
    assert "Variables_of_interest" in lines[0]
