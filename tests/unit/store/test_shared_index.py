"""store/shared_index: one copy of the compact index a node, equal to the per-rank one."""

from __future__ import annotations

import pytest

from mpirun import mpirun

pytestmark = [pytest.mark.mpi]


def test_node_shared_index_equals_the_per_rank_one_one_copy_a_node():
    """4 ranks on one node and as 2 emulated nodes of 2: every id's owner, offset and size
    agree with the private index, a rank counts 1/ranks_per_node of the one copy, a write by
    a node's last rank is seen by its first, and close frees it (twice is harmless)."""
    r = mpirun(4, ["tests/mpi_scripts/store_checks.py", "shared"], timeout=150)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "shared ok" in r.stdout
