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
    (2, None, True),    # across nodes: on by default (bench/fetch/coll_progress.py)
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


def _pollers() -> int:
    import threading

    return sum(t.name == "mdloader-progress" for t in threading.enumerate())


def test_one_thread_runs_while_any_lease_is_held():
    from mdloader_plugin.mpi.progress import Lease, Poller

    poller = Poller(interval=0.001)
    a, b = Lease(poller), Lease(poller)
    assert not poller.running and _pollers() == 0  # leases alone poll nothing
    a.fetching()
    b.fetching()
    b.fetching()  # a held lease counts once
    assert poller.running and poller.leases == 2 and poller.started == 1 and _pollers() == 1
    assert poller._thread.daemon
    a.pause()  # the backend stops serving (auto's probe of the other one)
    assert poller.running and poller.leases == 1 and not a.active and b.active
    a.fetching()  # paused: a fetch does not take it again
    assert poller.leases == 1
    b.close()
    assert not poller.running and poller.leases == 0 and _pollers() == 0
    a.resume()
    a.fetching()  # serving again: its next fetch restarts the thread
    assert poller.running and poller.started == 2 and _pollers() == 1
    a.close()
    a.close()  # twice is harmless
    assert not poller.running and poller.leases == 0 and _pollers() == 0


@pytest.mark.mpi
def test_two_loaders_share_one_poller_and_an_idle_loader_starts_none():
    from mpirun import mpirun

    r = mpirun(2, ["tests/mpi_scripts/one_poller.py"], timeout=150,
               env={"MDLOADER_PROGRESS_THREAD": "1", "MDLOADER_COLL_PROGRESS_THREAD": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.count("one poller ok") == 2, r.stdout[-3000:]


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
        assert isinstance(th, progress.Lease) and not th.active  # held from its first fetch
        assert seen == ["onesided: ranks span 1 nodes, progress thread on (an Iprobe every "
                        "0.5 ms, one thread a process while a loader fetches) (so Gets "
                        "complete)"]
    finally:
        th.close()
        world.close()
