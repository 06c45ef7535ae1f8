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
