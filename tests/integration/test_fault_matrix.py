"""The fault matrix (issue 48): one rank of a 3-rank own loop hit by one fault at one phase;
every failure ends the job at once and names its cause, a healthy stall is never aborted.

The cells (``tests/common/fault_matrix.py``: which ones, how each runs, its target) run several
at once from one fixture; each test checks one cell's target generously (the job ended before
the cell's timeout, non-zero, with the cause's line; a stall ended well) and every measurement,
the seconds included, goes into the JSON that makes the table of docs/reliability.md:

    FAULT_MATRIX_JSON=bench/results/faults.json \
        python -m pytest tests/integration/test_fault_matrix.py
    python tools/docs_figures.py

(``python -m bench.faults.update`` runs both; ``--cluster`` adds the two-host cells, as root.)
Without ``FAULT_MATRIX_JSON`` the JSON goes to pytest's temporary folder. The <= 10 s and
T-plus-a-beat targets are reported in the table as met or missed from the measured seconds,
never asserted as timings here.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import fault_matrix as fm
from mpirun import ROOT, family_missing

pytestmark = [pytest.mark.mpi]

ONE_HOST = fm.one_host_cells()
CLUSTER = fm.cluster_cells()

#: cells whose target is missed today (docs/reliability.md's table says by how much and why):
#: strict, so a cell that starts meeting its target fails until its id is taken out of this set
MISSED: set[str] = {
    "openmpi-1h-onesided-kill-mid",  # the job ends at T, but a rank process outlives the launcher
    "openmpi-1h-onesided-stop-mid",  # under --enable-recovery (the collective's do not)
    "openmpi-2h-onesided-kill-mid",  # two hosts: the job ends in < 2 s, but with exit 0 and
    "openmpi-2h-collective-kill-mid",  # Open MPI's MPI_ERRORS_ARE_FATAL, no line naming the rank
    "openmpi-2h-onesided-stop-mid",  # two hosts: the job ends within T + a beat, but the line
    "openmpi-2h-collective-stop-mid",  # names rank 1 (the victim's watcher, stuck behind it)
    "mpich-2h-collective-kill-mid",  # instead of the victim; the same for MPICH's kill
}
MISSED_WHY = "issue 48: target missed today (docs/reliability.md's table gives the measurement)"


def _params(cells):
    return [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=MISSED_WHY)]
                         if c.id in MISSED else []) for c in cells]


@pytest.fixture(scope="module")
def fault_data(tmp_path_factory) -> Path:
    """300 small molecules (100 a rank: 25 steps of 4 an epoch)."""
    from mdloader_plugin.sources import synth
    from mdloader_plugin.sources.adios import write_graphs

    path = tmp_path_factory.mktemp("faults") / "mols.bp"
    write_graphs(path, {"trainset": list(synth.generate("hydragnn", 5, 0, 300))})
    return path


def _json_path(tmp_path_factory) -> Path:
    where = os.environ.get("FAULT_MATRIX_JSON")
    return Path(where) if where else tmp_path_factory.getbasetemp() / "faults.json"


def _selected(request, name: str, cells) -> list:
    """The cells of this module's selected `name` tests (all of them run in one go)."""
    ids = {item.callspec.params["cell"].id for item in request.session.items
           if getattr(item, "originalname", None) == name
           and item.module.__name__ == request.module.__name__}
    return [c for c in cells if c.id in ids and not family_missing(c.family)]


def _run(request, tmp_path_factory, name, cells, data, cluster=None) -> dict:
    cells = _selected(request, name, cells)
    got = fm.run_cells(cells, data, cluster)
    records = [fm.record(c, got[c.id]) for c in cells]
    fm.write_json(_json_path(tmp_path_factory), records)
    return got


@pytest.fixture(scope="module")
def one_host(request, tmp_path_factory, fault_data) -> dict:
    return _run(request, tmp_path_factory, "test_one_host_cell", ONE_HOST, fault_data)


def check(cell: fm.Cell, m: fm.Measured) -> None:
    """The cell's target, asserted generously (no timing): see the module doc."""
    tail = m.output[-3000:]
    assert m.injected, f"the fault was never injected:\n{tail}"
    if cell.kind == "stall":
        assert m.ended and m.rc == 0, f"a healthy stall ended with {m.rc}:\n{tail}"
        assert m.done_ranks == fm.RANKS and not m.aborted, tail
        return
    assert m.ended, f"still running {fm.CELL_TIMEOUT_S:g} s after the fault:\n{tail}"
    assert m.ranks_left == 0, f"{m.ranks_left} processes outlived the launcher:\n{tail}"
    # under --enable-recovery the launcher's own status after MPI_Abort is not ours to promise
    # (tests/integration/test_rank_failure.py): the abort itself counts
    assert m.rc != 0 or m.aborted, f"exit {m.rc}:\n{tail}"
    assert m.done_ranks == 0, f"ranks ran to their end:\n{tail}"
    assert m.cause_printed, f"the cause ({fm.cause_pattern(cell).pattern}) never printed:\n{tail}"
    if cell.kind in fm.EXCEPTIONS:
        assert m.cause_first, f"the first error line is not the cause: {m.first_error}\n{tail}"


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("cell", _params(ONE_HOST))
def test_one_host_cell(cell, one_host):
    if family_missing(cell.family):
        pytest.skip(family_missing(cell.family))
    check(cell, one_host[cell.id])


@pytest.fixture(scope="module")
def two_hosts(request, tmp_path_factory, fault_data) -> dict:
    from test_cluster import SKIP, _name

    from mdloader_plugin.devtools.cluster import Cluster

    if SKIP:
        pytest.skip(SKIP)
    with Cluster.up(hosts=2, ranks_per_host=2, rate="1gbit", name=_name("f")) as cl:
        return _run(request, tmp_path_factory, "test_two_hosts_cell", CLUSTER, fault_data, cl)


@pytest.mark.cluster
@pytest.mark.timeout(900)
@pytest.mark.parametrize("cell", _params(CLUSTER))
def test_two_hosts_cell(cell, two_hosts):
    if family_missing(cell.family):
        pytest.skip(family_missing(cell.family))
    check(cell, two_hosts[cell.id])


# -- the measurement itself, without MPI ---------------------------------------------------------
def _measured(cell, out, rc=1, ended=True):
    return fm.measure(cell, out, ended, rc, t0=100.0, t_gone=112.5, left=0)


def test_first_error_line_is_the_cause_or_not():
    cell = fm.Cell("exception")
    inject = "fault-matrix: rank 1 injects exception at mid t=110.000\n"
    own = f"Traceback (most recent call last):\nRuntimeError: {_token(cell)}\n"
    stuck = ("mdloader: error: [rank 0] step 9 of epoch 0: the collective fetch from rank(s) 1, 2 "
             "has not completed in 120 s although every rank is alive: ranks are stuck\n")
    m = _measured(cell, inject + own + stuck)
    assert m.injected and m.cause_printed and m.cause_first and m.after_fault_s == 2.5
    assert fm.verdict(cell, m) == (True, "")
    m = _measured(cell, inject + stuck + own)
    assert m.cause_printed and not m.cause_first and m.first_error == stuck.strip()
    assert fm.verdict(cell, m)[0] is False and "another error line" in fm.verdict(cell, m)[1]
    m = _measured(cell, inject + stuck)
    assert not m.cause_printed and "never printed" in fm.verdict(cell, m)[1]


def test_slow_or_unended_or_clean_cells_miss():
    cell = fm.Cell("exception")
    inject = "fault-matrix: rank 1 injects exception at mid t=100.000\n"
    m = _measured(cell, inject + f"RuntimeError: {_token(cell)}\n")  # 12.5 s after the fault
    assert fm.verdict(cell, m) == (False, "ended 12.5 s after the fault")
    m = _measured(cell, inject, rc=None, ended=False)
    assert "still running" in fm.verdict(cell, m)[1]
    done = "".join(f"fault-matrix: rank {r} done\n" for r in range(3))
    m = _measured(fm.Cell("watchdog"), inject.replace("exception", "watchdog") + done, rc=0)
    assert "ran to its end" in fm.verdict(fm.Cell("watchdog"), m)[1]


def test_kill_and_stall_targets():
    kill = fm.Cell("kill")
    out = ("fault-matrix: rank 1 injects kill at mid t=108.000\n"
           "mdloader: error: [rank 0] rank 1 gave no sign of life for 3 s (last seen between "
           "steps): its process died or stopped; ...\nMPI_ABORT was invoked on rank 0\n")
    m = _measured(kill, out, rc=3)
    assert m.cause_first and fm.verdict(kill, m) == (True, "")  # 4.5 s <= 3 + 2
    stall = fm.Cell("stall")
    out = "fault-matrix: rank 1 injects stall at mid t=101.000\n" + "".join(
        f"fault-matrix: rank {r} done\n" for r in range(3))
    assert fm.verdict(stall, _measured(stall, out, rc=0)) == (True, "")
    aborted = out + "mdloader: error: [rank 0] step 7 of epoch 0: the collective fetch ...\n"
    assert fm.verdict(stall, _measured(stall, aborted, rc=3))[0] is False


def _token(cell) -> str:
    return f"fault-matrix injected {cell.kind} on rank {cell.victim} at {cell.phase}"


def test_reliability_page_shows_the_committed_json():
    """docs/reliability.md's fault table is what bench/faults/figures.py makes of
    bench/results/faults.json (tools/docs_figures.py rewrites it)."""
    from bench import figures

    page = (ROOT / "docs" / "reliability.md").read_text()
    want = figures.value("faults.table")
    assert f"<!-- figure: faults.table -->{want}<!-- /figure -->" in page, (
        "docs/reliability.md's fault table is stale: run `python tools/docs_figures.py`")
    doc = json.loads((ROOT / "bench" / "results" / "faults.json").read_text())
    assert {c["id"] for c in doc["cells"]} <= {c.id for c in ONE_HOST + CLUSTER}
