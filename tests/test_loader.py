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
