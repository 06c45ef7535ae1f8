"""fairchem training on real MPI ranks: both loaders, identical losses across MDLoader backends.

One mpiexec job (:func:`_job`; on 4 ranks in the launch the fairchem modules share:
tests/common/shared_jobs.py; on 3 ranks this file run as a script) trains the tiny eSCN-MD of
recipes/fairchem/cpu.yaml for 2 epochs on synthetic OC20-like slabs several times, through the MPI
launcher the CLI uses:
``loader: mdloader`` with the one-sided and with the collective backend and (on 4 ranks)
``loader: fairchem``, fairchem's own ASE-LMDB loader over the same structures. Importing
fairchem once per job keeps this affordable on 2 cores. The 3-rank job is the case where a
one-sided Get targets a rank sitting in gloo's gradient allreduce (a deadlock seen before
with a one-sided loader inside fairchem training on 3 MPICH ranks); it must finish and match the
collective backend step for step.
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

import pytest

from checks import check  # noqa: E402
from mpirun import ROOT, mdloader, mpirun  # noqa: E402

CPU = ROOT / "recipes" / "fairchem" / "cpu.yaml"
RUNS = {
    "onesided": ["loader=mdloader", "loader.backend=onesided"],
    "collective": ["loader=mdloader", "loader.backend=collective"],
    "baseline": ["loader=fairchem"],
}
STEP = re.compile(r"MDLOADER-STEP rank=(\d+) epoch=(\d+) step=(\d+) loss=(\S+)")
pytestmark = [pytest.mark.mpi, pytest.mark.slow]


def _job(data: str, runs_dir: str, names: list[str], recipe: Path = CPU, runs: dict = RUNS,
         epochs: int = 2) -> None:
    from mdloader_plugin.integrations.fairchem.launch import run

    for name in names:
        code = run(str(recipe), [f"data_dir={data}", f"job.run_dir={runs_dir}",
                                 f"job.run_name={name}", f"max_epochs={epochs}", *runs[name]])
        check(code == 0, f"run {name} exited {code}")


SHARED_JOBS = ("fairchem",)  # the 4-rank job runs in the launch the fairchem modules share


def shared_job(key: str, work: Path) -> list:
    """The 4-rank job's data in `work`; the arguments of :func:`_job` (tests/common/
    shared_jobs.py)."""
    from mdloader_plugin.integrations.fairchem.data import write_oc20_like

    write_oc20_like(str(work / "oc20"), num_train=48, num_val=16, seed=1)
    return [work / "oc20", work / "runs", ["onesided", "collective", "baseline"]]


@pytest.fixture(scope="module")
def oc20(shared_jobs, request):
    return shared_jobs.work("fairchem", request.module) / "oc20"


@pytest.fixture(scope="module")
def job(shared_jobs, request):
    return shared_jobs.result("fairchem", request.module)["work"] / "runs"


def _train(n: int, oc20, tmp_path, names: list[str]) -> Path:
    runs = tmp_path / "runs"
    res = mpirun(n, [__file__, str(oc20), str(runs), *names], timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return runs


def _epochs(runs: Path, name: str) -> list[dict]:
    from mdloader_plugin.core.epochlog import parse_epoch_lines

    return parse_epoch_lines((runs / name / "logs" / "train.log").read_text().splitlines())


def _steps(runs: Path, name: str) -> list[tuple]:
    lines = []
    for f in sorted((runs / name / "logs").glob("train*.log")):
        lines += [m.groups() for m in STEP.finditer(f.read_text())]
    return sorted(lines)


def _check_backends_agree(runs: Path, n: int) -> None:
    one, coll = _steps(runs, "onesided"), _steps(runs, "collective")
    assert {r for r, *_ in one} == {str(r) for r in range(n)}  # every rank logged its steps
    assert one == coll  # same seed, same batches: bit-identical per-rank, per-step losses
    for name in ("onesided", "collective"):
        recs = _epochs(runs, name)
        assert [r["epoch"] for r in recs] == [0, 1]
        assert {r["backend"] for r in recs} == {name} and recs[0]["loader"] == "mdloader"
        assert all(r["steps"] > 0 and r["samples"] > 0 and r["wall_s"] > 0 for r in recs)


@pytest.mark.timeout(900)
def test_four_ranks_both_loaders_train_and_backends_agree(job):
    runs = job
    _check_backends_agree(runs, 4)
    base = _epochs(runs, "baseline")
    assert [r["epoch"] for r in base] == [0, 1] and base[0]["loader"] == "fairchem"
    assert base[0]["backend"] == "-"
    losses = [float(s[3]) for s in _steps(runs, "baseline")]
    assert losses and all(math.isfinite(x) for x in losses)


@pytest.mark.timeout(900)
def test_three_ranks_onesided_does_not_deadlock_in_gloo_allreduce(oc20, tmp_path):
    runs = _train(3, oc20, tmp_path, ["onesided", "collective"])
    _check_backends_agree(runs, 3)


@pytest.mark.timeout(300)
def test_bad_override_is_one_line_and_no_hang(oc20, tmp_path):
    res = mdloader(2, ["train", "fairchem", "-c", str(CPU), f"data_dir={oc20}",
                       f"job.run_dir={tmp_path}", "loader=nope"], timeout=240)
    assert res.returncode != 0
    # two ranks write stderr at once: a line may hold another rank's text before ours
    errors = [ln[ln.index("mdloader: error:"):] for ln in res.stderr.splitlines()
              if "mdloader: error:" in ln]
    assert errors and "loader" in errors[0] and "Traceback" not in res.stderr, res.stderr[-3000:]



@pytest.mark.timeout(600)
def test_scale_options_reach_the_loader_and_a_bad_one_is_one_line(oc20, tmp_path):
    """loader.order / loader.index_share on fairchem's command line reach the store and the
    sampler through the group's interpolations (the loader's log lines say so)."""
    common = ["train", "fairchem", "-c", str(CPU), f"data_dir={oc20}", f"job.run_dir={tmp_path}",
              "max_epochs=1", "loader.backend=collective", "max_atoms=null"]
    res = mdloader(2, [*common, "job.run_name=scale", "loader.order=feistel",
                       "loader.index_share=node"], timeout=420)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "(feistel)" in res.stderr and "one copy per node (2 ranks)" in res.stderr, \
        res.stderr[-3000:]
    res = mdloader(2, [*common, "job.run_name=bad", "loader.order=random"], timeout=240)
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert res.returncode != 0 and errors, res.stderr[-3000:]
    assert "loader.order: 'random' is unknown" in errors[0] and "Traceback" not in res.stderr


if __name__ == "__main__":
    _job(sys.argv[1], sys.argv[2], sys.argv[3:])
