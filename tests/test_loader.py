"""MDLoader == PyG DataLoader + DistributedSampler, batch for batch, on real MPI ranks."""

import pytest

from mpirun import mpirun

pytestmark = [pytest.mark.mpi]


@pytest.mark.parametrize("ranks,n,batch", [(1, 37, 7), (2, 101, 64), (3, 100, 7), (4, 53, 1)])
def test_batches_equal_pyg_dataloader_abandon_and_resume(ranks, n, batch):
    r = mpirun(ranks, ["tests/mpi_scripts/loader_semantics.py", n, batch], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert f"loader semantics ok: {ranks} ranks" in r.stdout


def test_online_check_probes_decides_collectively_and_drops_the_loser():
    r = mpirun(3, ["tests/mpi_scripts/online_switch.py"], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "online switch ok: kept" in r.stdout


@pytest.mark.parametrize("nodes,kind,prof_nodes,blind", [
    (2, "calibrated", 1, True),     # multi-node job, single-node calibration: always probe
    (2, "calibrated", 2, False),    # calibrated across nodes: trust the model's ratio
    (1, "calibrated", 1, False),    # one node: the profile matches the job
    (2, "published figures", 1, False),  # shipped figures carry their own inter-node numbers
])
def test_probe_is_never_skipped_when_the_profile_is_blind_to_the_network(nodes, kind,
                                                                        prof_nodes, blind):
    from types import SimpleNamespace

    from mdloader_plugin.loader import _profile_blind_to_network

    loader = SimpleNamespace(world=SimpleNamespace(num_nodes=nodes))
    prof = SimpleNamespace(provenance={"kind": kind, "nodes": prof_nodes})
    assert _profile_blind_to_network(loader, prof) is blind
