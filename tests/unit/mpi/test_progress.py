"""The one-sided backend never depends on what the trainer is doing on the target rank."""

import pytest

from mpirun import mpirun

pytestmark = [pytest.mark.mpi]


@pytest.mark.parametrize("ranks", [3, 4])
def test_get_from_rank_blocked_in_gloo_allreduce(ranks):
    r = mpirun(ranks, ["tests/mpi_scripts/blocked_target.py", "onesided"], timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "blocked-target ok" in r.stdout


@pytest.mark.parametrize("nodes, tcp_thread, env, wanted", [
    (1, "1", None, False),   # one node: Gets are shared-memory loads
    (1, "0", None, False),
    (2, "1", None, True),    # Open MPI's TCP progress thread alone hung 1 run in 6-8
    (2, "0", None, True),
    (4, None, None, True),
    (2, "1", "0", False),    # the user's override wins both ways
    (1, "1", "1", True),
])
def test_progress_thread_whenever_ranks_span_nodes(monkeypatch, nodes, tcp_thread, env, wanted):
    from types import SimpleNamespace

    from mdloader_plugin.backends.onesided import wants_progress_thread

    for key, val in (("OMPI_MCA_btl_tcp_progress_thread", tcp_thread),
                     ("MDLOADER_PROGRESS_THREAD", env)):
        if val is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, val)
    assert wants_progress_thread(SimpleNamespace(num_nodes=nodes), "auto") is wanted
    assert wants_progress_thread(SimpleNamespace(num_nodes=nodes), False) is False
    assert wants_progress_thread(SimpleNamespace(num_nodes=nodes), True) is True


@pytest.mark.parametrize("nodes, env, wanted", [
    (1, None, False),   # one node: shared memory, nothing waits in a socket
    (2, None, True),    # across nodes: on by default (bench/probes/coll_progress.py)
    (2, "0", False),
    (1, "1", True),
])
def test_collective_progress_thread_across_nodes(monkeypatch, nodes, env, wanted):
    from types import SimpleNamespace

    from mdloader_plugin.backends.collective import wants_progress_thread

    if env is None:
        monkeypatch.delenv("MDLOADER_COLL_PROGRESS_THREAD", raising=False)
    else:
        monkeypatch.setenv("MDLOADER_COLL_PROGRESS_THREAD", env)
    assert wants_progress_thread(SimpleNamespace(num_nodes=nodes), "auto") is wanted
    assert wants_progress_thread(SimpleNamespace(num_nodes=nodes), False) is False


# -- mpi/progress itself: the thread, its pause switch and the environment switch -------------

@pytest.mark.parametrize("value, default, want", [
    (None, True, True), (None, False, False), ("1", False, True), ("yes", False, True),
    ("0", True, False), ("off", True, False), ("False", True, False), ("NO", True, False),
    ("", True, False), (" on ", False, True),
])
def test_env_switch(monkeypatch, value, default, want):
    from mdloader_plugin.mpi.progress import env_switch

    if value is None:
        monkeypatch.delenv("MDLOADER_PROGRESS_THREAD", raising=False)
    else:
        monkeypatch.setenv("MDLOADER_PROGRESS_THREAD", value)
    assert env_switch("MDLOADER_PROGRESS_THREAD", default) is want


def test_env_switch_refuses_an_undocumented_variable():
    from mdloader_plugin.mpi.progress import env_switch

    with pytest.raises(KeyError):
        env_switch("MDLOADER_NO_SUCH_SWITCH", True)


def test_thread_pauses_resumes_and_closes():
    import threading
    import time

    from mpi4py import MPI

    from mdloader_plugin.mpi.progress import ProgressThread

    th = ProgressThread(MPI.COMM_WORLD, interval=0.001)
    assert th.active and th._thread.is_alive() and th._thread.daemon
    assert MPI.Comm.Compare(th.comm, MPI.COMM_WORLD) == MPI.CONGRUENT  # its own duplicate
    th.pause()
    assert not th.active and th._thread.is_alive()
    th.resume()
    assert th.active
    t0 = time.monotonic()
    th.close()
    assert not th.active and not th._thread.is_alive() and time.monotonic() - t0 < 5
    assert th.comm == MPI.COMM_NULL  # freed
    assert "mdloader-progress" not in [t.name for t in threading.enumerate()]


def test_start_logs_one_line_or_returns_none():
    import logging

    from mdloader_plugin.core.log import get_logger
    from mdloader_plugin.mpi import progress
    from mdloader_plugin.mpi.world import World

    world = World.detect()
    assert progress.start(world, False, "onesided", "why", "without") is None
    seen: list[str] = []
    grab = logging.Handler(logging.INFO)
    grab.emit = lambda record: seen.append(record.getMessage())
    log = get_logger(0)
    level = log.level
    log.addHandler(grab)
    log.setLevel(logging.INFO)
    try:
        th = progress.start(world, True, "onesided", "(so Gets complete)", "without")
    finally:
        log.removeHandler(grab)
        log.setLevel(level)
    try:
        assert isinstance(th, progress.ProgressThread) and th.active
        assert seen == ["onesided: ranks span 1 nodes, progress thread on (an Iprobe every "
                        "0.5 ms) (so Gets complete)"]
    finally:
        th.close()
        world.close()
