"""recipes/fairchem/multi on 4 MPI ranks: two data sets (bulk, slabs), temperature sampling,
``loader: mdloader`` with both backends (identical per-rank step losses) and ``loader: fairchem``
(fairchem's own create_concat_dataset) over the same structures. One mpiexec job (this file as a
script) runs all three, importing fairchem once."""

from __future__ import annotations

import math
import sys

import pytest

from mpirun import ROOT, mpirun  # noqa: E402

RECIPE = ROOT / "recipes" / "fairchem" / "multi" / "cpu.yaml"
RUNS = {"onesided": ["loader=mdloader", "loader.backend=onesided"],
        "collective": ["loader=mdloader", "loader.backend=collective"],
        "baseline": ["loader=fairchem"]}
pytestmark = [pytest.mark.mpi, pytest.mark.slow]


@pytest.mark.timeout(900)
def test_four_ranks_two_data_sets_temperature_both_loaders(tmp_path):
    from mdloader_plugin.sources import synth_atoms
    from test_fairchem_mpi import _epochs, _steps

    data = tmp_path / "gfm"
    for kind, counts in (("bulk", (40, 8, 0)), ("slabs", (12, 8, 0))):
        synth_atoms.write_set(str(data), kind, counts, seed=4, aselmdb=True)
    runs = tmp_path / "runs"
    res = mpirun(4, [__file__, str(data), str(runs), *RUNS], timeout=840)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    one, coll = _steps(runs, "onesided"), _steps(runs, "collective")
    assert one and one == coll  # same seed, same batches: identical per-rank step losses
    assert {r for r, *_ in one} == {"0", "1", "2", "3"}
    for name in RUNS:
        recs = _epochs(runs, name)
        assert [r["epoch"] for r in recs] == [0] and recs[0]["steps"] > 0
        assert all(math.isfinite(float(s[3])) for s in _steps(runs, name))


if __name__ == "__main__":
    from test_fairchem_mpi import _job

    _job(sys.argv[1], sys.argv[2], sys.argv[3:], recipe=RECIPE, runs=RUNS, epochs=1)
