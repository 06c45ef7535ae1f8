"""store/shared_index: one copy of the compact index a node, equal to the per-rank one."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.mpi]


def test_node_shared_index_equals_the_per_rank_one_one_copy_a_node(four_rank_store_checks):
    """4 ranks on one node and as 2 emulated nodes of 2: every id's owner, offset and size
    agree with the private index, a rank counts 1/ranks_per_node of the one copy, a write by
    a node's last rank is seen by its first, and close frees it (twice is harmless)."""
    r = four_rank_store_checks
    assert "shared ok" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
