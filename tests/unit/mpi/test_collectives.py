"""mpi/collectives: the schedules that keep every MPI count below 2**31 cover their data exactly,
and the cut calls give, on real ranks under both MPIs, the bytes of one uncut call."""

from __future__ import annotations

import numpy as np
import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.mpi import collectives as coll

from mpirun import ROOT, family_missing, mpirun

L = 300


def _covers(spans, n, limit):
    spans = list(spans)
    assert all(0 < hi - lo <= limit for lo, hi in spans)
    assert [lo for lo, _ in spans] == [0, *(hi for _, hi in spans)][:len(spans)]  # end to end
    assert (spans[-1][1] if spans else 0) == n
    return len(spans)


@pytest.mark.parametrize("n", [0, 1, L - 1, L, L + 1, 2 * L, 7 * L + 3])
def test_chunk_spans_cover_exactly_0_to_n(n):
    assert _covers(coll.chunk_spans(n, L), n, L) == coll.num_chunks(n, L) == -(-n // L)


@pytest.mark.parametrize("n", [2**31 - 2, 2**31 - 1, 2**31, 2**31 + 1, 2**32 - 1, 2**32,
                               2**32 + 1, 5 * 2**31 + 17])
def test_chunk_spans_near_2_to_the_31_and_32_without_allocating(n):
    limit = coll.INT_MAX
    assert _covers(coll.chunk_spans(n, limit), n, limit) == coll.num_chunks(n, limit)
    assert coll.num_chunks(n, limit) == (1 if n < 2**31 else -(-n // limit))


@pytest.mark.parametrize("counts", [[0, 0, 0], [5, 0, 7], [L, 1, L - 1], [3 * L + 1, 0, 2, L],
                                    [2**31, 2**31 + 5, 3]])
def test_allgatherv_windows_give_each_rank_its_share_once(counts):
    """The windows of :func:`allgatherv_big`: per window, each rank's count and displacement
    (relative to the window) below the limit, and together every element exactly once."""
    counts = np.array(counts, dtype=np.int64)
    n, starts = int(counts.sum()), np.concatenate([[0], np.cumsum(counts)])
    limit = L if n < 2**31 else coll.INT_MAX
    got = np.zeros(len(counts), dtype=np.int64)
    for lo, hi in coll.chunk_spans(n, limit):
        c, d = coll.window_parts(counts, lo, hi)
        assert c.sum() == hi - lo and c.max() <= limit and d.max() < limit
        nz = c > 0
        assert np.array_equal(lo + d[nz], np.maximum(starts[:-1], lo)[nz])  # where it lands
        got += c
    assert np.array_equal(got, counts)


@pytest.mark.parametrize("sizes", [[], [10], [L], [L + 1], [100, 150, 60, 4 * L + 9, 1, 1, L],
                                   [L - 1, 1, 1, L, 0, 2 * L]])
def test_split_runs_cover_every_byte_once_within_the_limit(sizes):
    srcs = [1000 * i + 3 for i in range(len(sizes))]
    # source byte of each landing byte
    want = [(s + k) for n, s in zip(sizes, srcs) for k in range(n)]
    got, at = [], 0
    for start, sz, sr in coll.split_runs(sizes, srcs, L):
        assert start == at and 0 < sum(sz) <= L or sum(sz) == 0
        got += [s + k for n, s in zip(sz, sr) for k in range(n)]
        at += sum(sz)
    assert got == want


def test_max_count_setting_and_hook(monkeypatch):
    monkeypatch.setattr(coll, "MAX_COUNT", None)
    monkeypatch.delenv("MDLOADER_MPI_MAX_COUNT", raising=False)
    assert coll.max_count() == 2**31 - 1
    for bad in ("0", "15", "2147483648", "lots"):
        monkeypatch.setattr(coll, "MAX_COUNT", None)
        monkeypatch.setenv("MDLOADER_MPI_MAX_COUNT", bad)
        with pytest.raises(ConfigError, match="MDLOADER_MPI_MAX_COUNT"):
            coll.max_count()
    monkeypatch.setattr(coll, "MAX_COUNT", None)
    monkeypatch.setenv("MDLOADER_MPI_MAX_COUNT", "300")
    assert coll.max_count() == 300
    assert coll._per_call(8) == 37 and coll._per_call(1) == 300


@pytest.mark.mpi
@pytest.mark.parametrize("family", [
    "openmpi", pytest.param("mpich", marks=pytest.mark.skipif(
        bool(family_missing("mpich")), reason=family_missing("mpich") or ""))])
def test_cut_calls_equal_one_call_on_real_ranks(family):
    """Index exchange, node-shared index, replica copy, atom counts, Gets of a record over the
    limit and the collective exchange, with the limit at 512 B: no call above it, every result
    equal to the uncut one (tests/mpi_scripts/big_counts.py)."""
    r = mpirun(4, [ROOT / "tests" / "mpi_scripts" / "big_counts.py", "600"], timeout=300,
               env={"MDLOADER_MPI_MAX_COUNT": "512"}, family=family)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "big_counts ok" in r.stdout
