"""store/replicate: how replica groups get their copies (mode choice, cross-group broadcast)."""

from __future__ import annotations

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.store import replicate


@pytest.mark.parametrize("mode, nodes, want", [
    (None, 1, "copy"), ("", 1, "copy"), ("auto", 1, "copy"), (" AUTO ", 1, "copy"),
    (None, 2, "read"), ("auto", 8, "read"), ("read", 1, "read"), ("copy", 4, "copy"),
    ("Copy", 1, "copy"), (" read ", 3, "read"),
])
def test_resolve(mode, nodes, want):
    assert replicate.resolve(mode, nodes) == want


@pytest.mark.parametrize("mode", ["broadcast", "both", 3])
def test_unknown_mode_names_the_choices(mode):
    with pytest.raises(ConfigError) as e:
        replicate.resolve(mode)
    assert str(e.value) == f"replicate: expected read, copy or auto, got {mode!r}"


def test_chunk_fits_mpi_counts():
    assert replicate.CHUNK == 2**28 < 2**31


@pytest.mark.mpi
def test_cross_group_communicator_and_chunked_broadcast(four_rank_store_checks):
    """4 ranks in 2 groups of 2: the cross communicator links rank i of every group, its root
    is group i mod 2, and buffers of 0, 5, 7 and 50 bytes arrive intact in 7-byte chunks."""
    r = four_rank_store_checks
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "replicate ok" in r.stdout, r.stdout[-2000:]
