"""mpi/world: topology, the private communicator, agree() and abort_on_error on real ranks."""

from __future__ import annotations

import time

import pytest

from mdloader_plugin.core.errors import DataError, MDLoaderError
from mdloader_plugin.mpi.world import World, agree, report_error

from mpirun import mpirun

SCRIPT = "tests/mpi_scripts/world_checks.py"


def test_detect_on_one_rank():
    from mpi4py import MPI

    w = World.detect()
    assert (w.rank, w.size, w.local_rank, w.local_size, w.num_nodes) == (0, 1, 0, 1, 1)
    assert w.node_of.tolist() == [0]
    assert w.comm != MPI.COMM_WORLD and MPI.Comm.Compare(w.comm, MPI.COMM_WORLD) == MPI.CONGRUENT
    w.close()
    assert w.comm is None
    w.close()


def test_agree_on_one_rank_raises_the_error_itself():
    assert agree(None, lambda a, b=0: a + b, 2, b=3) == 5
    err = DataError("f.bp: bad")
    with pytest.raises(DataError) as e:
        agree(None, lambda: (_ for _ in ()).throw(err))
    assert e.value is err


def test_report_error_one_line_for_user_errors(capsys, monkeypatch):
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    assert report_error(DataError("f.bp: key 'x' missing")) == 2
    assert capsys.readouterr().err == "mdloader: error: f.bp: key 'x' missing\n"
    wrapped = RuntimeError("framework wrapper")
    wrapped.__cause__ = MDLoaderError("loader.order: 'random' is unknown")
    assert report_error(wrapped) == 2
    assert capsys.readouterr().err == "mdloader: error: loader.order: 'random' is unknown\n"
    try:
        raise ValueError("boom")
    except ValueError as exc:
        assert report_error(exc) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.endswith("mdloader: error: unexpected ValueError: boom\n")


@pytest.fixture(scope="module")
def detect_and_agree():
    """One 3-rank launch runs the ``detect`` and ``agree`` checks (each prints its ok line)."""
    return mpirun(3, [SCRIPT, "detect,agree"], timeout=90)


@pytest.mark.mpi
def test_detect_on_three_ranks(detect_and_agree):
    r = detect_and_agree
    assert "detect ok optimize=0" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]


@pytest.mark.mpi
def test_checks_survive_python_O():
    """MPI scripts check with tests/common/checks.py: a wrong expectation still fails under -O."""
    r = mpirun(2, [SCRIPT, "detect"], timeout=90, env={"PYTHONOPTIMIZE": "1"})
    assert r.returncode == 0 and "detect ok optimize=1" in r.stdout, r.stderr[-3000:]
    r = mpirun(2, [SCRIPT, "detect"], timeout=90,
               env={"PYTHONOPTIMIZE": "1", "MDLOADER_TEST_WRONG": "1"})
    assert r.returncode != 0
    assert "AssertionError: [rank 0] 1 nodes, expected 2" in r.stderr \
        or "AssertionError: [rank 1] 1 nodes, expected 2" in r.stderr, r.stderr[-3000:]
    assert "detect ok" not in r.stdout


@pytest.mark.mpi
def test_agree_turns_a_rank_local_error_into_the_same_error_everywhere(detect_and_agree):
    r = detect_and_agree
    assert r.returncode == 0, r.stderr[-3000:]
    assert "agree ok" in r.stdout, r.stdout[-2000:]


def _error_lines(r):
    """The ``mdloader: error:`` lines (the launcher's banner may follow on the same line)."""
    return [ln[ln.index("mdloader: error:"):].split("-----")[0]
            for ln in (r.stdout + r.stderr).splitlines() if "mdloader: error:" in ln]


@pytest.mark.mpi
@pytest.mark.parametrize("mode, line", [
    ("abort-user", "mdloader: error: [rank 1] bad.bp: key 'trainset/y' missing"),
    ("abort-bug", "mdloader: error: [rank 1] unexpected KeyError: 'oops'"),
])
def test_abort_on_error_ends_every_rank(mode, line):
    t0 = time.monotonic()
    r = mpirun(3, [SCRIPT, mode], timeout=90)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "outlived" not in out, out[-3000:]
    assert _error_lines(r) == [line], out[-3000:]
    assert (mode == "abort-bug") == ("Traceback" in r.stderr)
    assert time.monotonic() - t0 < 60  # the waiting ranks were ended, not left in the barrier


@pytest.mark.mpi
def test_agreed_error_is_said_once_and_every_rank_exits_2():
    r = mpirun(3, [SCRIPT, "abort-agreed"], timeout=90)
    out = r.stdout + r.stderr
    assert r.returncode == 2 and "outlived" not in out, out[-3000:]
    assert _error_lines(r) == ["mdloader: error: bad.bp: no such file"], out[-3000:]
    assert "Traceback" not in out


def test_every_name_of_the_old_world_module_still_imports_from_it():
    """mpi/world.py was split by idea (collectives, launch checks, aborts, rendezvous); every name
    it had stays importable from it, as the same object."""
    from mdloader_plugin.mpi import abort, collectives, launch_checks, rendezvous, world

    old = {abort: ["abort_on_error", "report_error", "_abort", "_user_error"],
           collectives: ["agree", "allreduce_number"],
           launch_checks: ["LaunchError", "check_launch", "launched_size", "rank_prefix",
                           "_env_rank", "_world_size_env", "_env_int"],
           rendezvous: ["rendezvous_env", "host_address", "free_port"]}
    for module, names in old.items():
        for name in names:
            assert getattr(world, name) is getattr(module, name), name
