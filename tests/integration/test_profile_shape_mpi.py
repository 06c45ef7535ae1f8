"""A job beyond the shape its calibrated profile was measured on says so once, on rank 0, with
how to recalibrate (estimator.profile.shape_note, loader/switch.py)."""

from __future__ import annotations

import dataclasses

import pytest

from mpirun import mdloader

from mdloader_plugin.estimator.profile import get_profile

pytestmark = pytest.mark.mpi


def test_a_profile_from_one_rank_a_node_is_named_once_with_the_recalibration(synth_file,
                                                                             tmp_path):
    prof = get_profile("local")
    prov = {"kind": "calibrated", "nodes": 1, "ranks_per_node": 1, "mpi_library": "Other MPI 1.0"}
    path = tmp_path / "one-rank.json"
    dataclasses.replace(prof, name="calibrated-elsewhere", provenance=prov).write(path)
    # check builds a loader a backend and one with auto: the note is said once all the same
    r = mdloader(2, ["check", str(synth_file), "--batch-size", "8", "--epochs", "1"],
                 env={"MDLOADER_PROFILE": str(path)}, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    out = r.stdout + r.stderr
    notes = [ln for ln in out.splitlines() if "was calibrated on" in ln]
    assert len(notes) == 1, out[-4000:]
    assert (f"profile {path} was calibrated on 1 node x 1 ranks a node; this job runs 1 node x "
            "2 ranks a node: more ranks a node (2) than calibrated (1); another MPI (calibrated "
            "with Other MPI 1.0)") in notes[0]
    assert (f"srun -N 2 --ntasks-per-node 2 python -m mpi4py -m mdloader_plugin calibrate "
            f"--out {path}") in notes[0]
