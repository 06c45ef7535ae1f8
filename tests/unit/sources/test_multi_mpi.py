"""Several data sets on real ranks: `mdloader check` (byte-identical backends, every entry of the
expanded epoch served exactly as often as the sampling rule says) and one-line errors."""

import numpy as np
import pytest

from mdloader_plugin.sources import synth
from mdloader_plugin.sources.adios import write_graphs
from mpirun import mdloader

SIZES = {"qm": 41, "oc": 17, "mp": 9}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("multi_mpi")
    out = {}
    for seed, (name, n) in enumerate(SIZES.items()):
        out[name] = d / f"{name}.bp"
        write_graphs(out[name], {"trainset": list(synth.generate("hydragnn", seed, 0, n))},
                     attributes={"dataset_name": name})
    graphs = list(synth.generate("hydragnn", 5, 0, 8))
    out["y64"] = d / "y64.bp"
    write_graphs(out["y64"], {"trainset": [{**g, "y": g["y"].astype(np.float64)}
                                           for g in graphs]})
    return out


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("sampling", ["temperature:temperature=2",
                                      "hydragnn:oversampling=true,num_samples=6"])
def test_check_three_data_sets_four_ranks(files, sampling):
    r = mdloader(4, ["check", *(files[n] for n in SIZES), "--sampling", sampling,
                     "--batch-size", 3, "--epochs", 2], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        "check ok: 4 ranks, 2 epochs, 67 samples, backends onesided,collective,auto; "
        f"data sets qm 41, oc 17, mp 9; sampling {sampling.split(':')[0]}")


@pytest.mark.mpi
@pytest.mark.slow
def test_group_size_auto_over_three_files_fits_the_budget_exactly(files):
    """Budget = what W=2 needs for all three files' records and the index: W=1 is refused, and
    the store each rank holds is exactly the size the choice was made with."""
    import re

    from mdloader_plugin.store import budget as mem
    from mdloader_plugin.sources.multi import DatasetSpec, MultiSource
    from mpirun import mpirun

    with MultiSource([DatasetSpec(str(files[n])) for n in SIZES]) as src:
        budget = mem.per_rank_bytes(mem.multi_record_sizes(src), 2)
    r = mpirun(4, ["tests/mpi_scripts/group_auto.py", ",".join(str(files[n]) for n in SIZES), 4,
                   budget], timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"W=(\d+) fullest=(\d+) predicted=(\d+) served=(\d+)", r.stdout)
    assert m and int(m[1]) in (2, 4) and m[2] == m[3] and int(m[2]) <= budget, r.stdout
    assert int(m[4]) == 68  # 67 samples + DistributedSampler's padding to 17 a rank
    assert re.search(r"group_size=1 \S+ memory_per_rank=\S+ \S+ fits=no", r.stderr)


@pytest.mark.mpi
@pytest.mark.parametrize("case,words", [
    ("missing", "nope.bp: no such file"),
    ("dtype", "key 'y' is float32 in"),
    (["--sampling", "uniform"], "sampling type 'uniform' is unknown; choose one of"),
    (["--sampling", "weights:weights=[0.5,0.2,0.2]"], "weights must sum to 1"),
])
def test_bad_input_fails_on_every_rank_with_one_line(files, tmp_path, case, words):
    paths = [files[n] for n in SIZES]
    if case == "missing":
        paths[1] = tmp_path / "nope.bp"
    elif case == "dtype":
        paths[1] = files["y64"]
    r = mdloader(4, ["check", *paths, "--batch-size", 2, *(case if isinstance(case, list)
                                                           else [])], timeout=120)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mdloader: error:")]
    assert len(lines) == 1 and words in lines[0], r.stderr[-2000:]
    assert "Traceback" not in r.stderr


@pytest.mark.mpi
def test_replica_groups_serve_the_same_bytes_over_three_files(files):
    r = mdloader(4, ["check", *(files[n] for n in SIZES), "--sampling", "balanced",
                     "--group-size", "1,2,4", "--batch-size", 4], timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        "check ok: 4 ranks, 1 epochs, 67 samples, backends onesided,collective,auto, group sizes "
        "1,2,4; data sets qm 41, oc 17, mp 9; sampling balanced")
