"""A HydraGNN run killed during its epoch 2 continues (``Training.continue``) with epoch 2's order.

Three launches of ``mdloader train hydragnn`` (HydraGNN as installed, 3.0 in the venv) on 2 ranks
over 64 training graphs, each rank recording the batches its train loader serves
(tests/mpi_scripts/hydragnn_served.py): 3 epochs uninterrupted; the same run with every rank
SIGKILLed as it is about to take step 1 of epoch 2 (HydraGNN's checkpoint from an earlier epoch
on disk, the run never ending well); then a 1-epoch run continuing from the killed one. The
continued run must serve exactly the uninterrupted run's epoch 2, batch for batch on each rank,
not its epoch 0 again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mpirun import ROOT, mpirun  # noqa: E402

pytestmark = [pytest.mark.mpi]

SCRIPT = ROOT / "tests" / "mpi_scripts" / "hydragnn_served.py"
DEMO = ROOT / "recipes" / "hydragnn" / "demo.yaml"


def _served(folder: Path) -> dict[int, list]:
    return {r: [tuple(json.loads(ln)) for ln in (folder / f"served-{r}.jsonl").read_text()
                .splitlines()] for r in (0, 1)}


def _epoch(served: dict, epoch: int) -> dict:
    return {r: [(s, d) for e, s, d in lines if e == epoch] for r, lines in served.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    pytest.importorskip("hydragnn")
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    work = tmp_path_factory.mktemp("continue")
    graphs = list(synth.generate("hydragnn", 7, 0, 96))
    write_graphs(work / "d.bp", {"trainset": graphs[:64], "valset": graphs[64:80],
                                 "testset": graphs[80:]})
    common = [f"Dataset.path={work / 'd.bp'}", "NeuralNetwork.Training.batch_size=8", "seed=5",
              "mdloader.backend=collective", "NeuralNetwork.Training.Checkpoint=true",
              "NeuralNetwork.Architecture.hidden_dim=8"]
    out = {}
    for name, kill, extra in (
            ("full", "-", ["NeuralNetwork.Training.num_epoch=3"]),
            ("first", "2:1", ["NeuralNetwork.Training.num_epoch=3"]),
            ("second", "-", ["NeuralNetwork.Training.num_epoch=1",
                             "NeuralNetwork.Training.continue=1",
                             "NeuralNetwork.Training.startfrom=first"])):
        folder = work / name
        folder.mkdir()
        res = mpirun(2, [SCRIPT, folder, kill, DEMO, *common, f"run_name={name}", *extra],
                     cwd=work, timeout=400)
        out[name] = {"rc": res.returncode, "log": res.stdout[-3000:] + res.stderr[-3000:],
                     "served": _served(folder) if res.returncode == 0 or kill != "-" else None}
    out["work"] = work
    return out


@pytest.mark.timeout(1300)
def test_killed_run_died_in_epoch_2_after_writing_its_state(runs):
    assert runs["full"]["rc"] == 0, runs["full"]["log"]
    assert runs["first"]["rc"] != 0, runs["first"]["log"]
    killed, full = runs["first"]["served"], runs["full"]["served"]
    for r in (0, 1):
        assert killed[r] == full[r][:len(killed[r])]  # the same run until the kill
        assert killed[r][-1][0] == 2 and killed[r][-1][1] == 0  # died taking epoch 2's step 1
    state = json.loads((runs["work"] / "logs" / "first" / "mdloader_state.json").read_text())
    assert state["epoch"] == 1  # written at the end of epoch 1, not only when a run ends well


@pytest.mark.timeout(1300)
def test_continued_run_serves_epoch_2_not_epoch_0_again(runs):
    assert runs["second"]["rc"] == 0, runs["second"]["log"]
    full, cont = runs["full"]["served"], runs["second"]["served"]
    assert {e for r in (0, 1) for e, _, _ in cont[r]} == {2}
    assert _epoch(cont, 2) == _epoch(full, 2)
    assert _epoch(full, 2) != _epoch(full, 0) and all(len(v) == 4 for v in _epoch(full, 2).values())
