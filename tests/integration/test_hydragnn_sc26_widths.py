"""Upstream's SC26 scale script, unmodified, with replica widths: HydraGNN main's
``examples/multidataset_hpo_sc26/gfm_mlip_all_mpnn.py --multi --ddstore --ddstore_width W``
under the launcher on 4 CPU ranks, W = 1, 2 and 4 (= P), EGNN on a small ``synth --kind gfm``
file (read as ``<datadir>/alexandria-v2.bp``, keys incl. ``atomic_numbers``).

Before the fix it stopped on every rank with ``AttributeError: 'DistDataset' object has no
attribute 'ddstore_comm'`` (the script passes ``group=trainset.ddstore_comm`` to
``create_dataloaders``), and its data step with ``KeyError``/``DataError`` on ``atomic_numbers``,
which ``synth --kind gfm`` did not write.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from hydragnn_versions import env_for, source_of
from mpirun import ROOT, mpi_env

from test_hydragnn_upstream_scripts import _ok, launch

pytestmark = [pytest.mark.mpi, pytest.mark.slow]
SMALL = ["--mpnn_type", "EGNN", "--hidden_dim", "8", "--num_conv_layers", "2",
         "--num_headlayers", "1", "--dim_headlayers", "8", "--num_epoch", "1", "--batch_size",
         "4", "--precision", "fp32"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    work = tmp_path_factory.mktemp("sc26")
    res = subprocess.run([sys.executable, "-m", "mdloader_plugin", "synth", "--kind", "gfm",
                          "--num-graphs", "80", "--names", "alexandria", "--split",
                          "0.8,0.1,0.1", "--out",
                          work / "gfm"], capture_output=True, text=True,
                         env=mpi_env(env_for("main")), timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    (work / "data").mkdir()
    # the script reads <datadir>/<name>-v2.bp; its dataset_name_dict routes alexandria to
    # branch-0, the one branch a one-file run has
    shutil.move(work / "gfm" / "alexandria.bp", work / "data" / "alexandria-v2.bp")
    return work


@pytest.mark.timeout(600)
@pytest.mark.parametrize("width", [1, 2, 4])
def test_sc26_script_trains_with_ddstore_width(data, width):
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    env = env_for("main")
    script = source_of("main") / "examples" / "multidataset_hpo_sc26" / "gfm_mlip_all_mpnn.py"
    log = f"w{width}"
    res = launch(4, script, ["--multi", "--multi_model_list", "alexandria", "--datadir",
                             data / "data", "--ddstore", "--ddstore_width", str(width),
                             "--log", log, *SMALL], data, env, timeout=560)
    assert res.returncode == 0, _ok(res)
    launcher = [ln for ln in res.stderr.splitlines() if ln.startswith("mdloader: launcher:")]
    assert len(launcher) == 1 and f"replica groups of {width}" in launcher[0], launcher
    if width < 4:
        assert f"group=ddstore_comm ({width} ranks) -> sampler over the 4 ranks" in launcher[0]
    recs = parse_epoch_lines((data / "logs" / log / "run.log").read_text().splitlines())
    assert [r["loader"] for r in recs] == ["mdloader"] and recs[0]["steps"] == 4
    assert recs[0]["samples"] == 64  # each train graph once in the epoch, whatever the width
