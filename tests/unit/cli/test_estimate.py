"""`mdloader estimate` output shapes and `mdloader calibrate` on real ranks."""

import json
import subprocess
import sys

import pytest

from mdloader_plugin.cli import main
from mdloader_plugin.estimator import get_profile
from mpirun import mdloader


def test_estimate_json_exact_shape(capsys):
    rc = main(["estimate", "--profile", "perlmutter", "--ranks", "2048", "--batch-size", "32",
               "--sample-bytes", "12000", "--json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"choice", "predicted_s"}
    assert set(doc["predicted_s"]) == {"onesided", "collective"}
    assert doc["choice"] == min(doc["predicted_s"], key=doc["predicted_s"].get)
    assert all(isinstance(v, float) and v > 0 for v in doc["predicted_s"].values())


def test_estimate_text_and_errors(capsys):
    assert main(["estimate", "--profile", "frontier", "--ranks", "8", "--batch-size", "512",
                 "--sample-bytes", "50000", "--sample-std", "40000"]) == 0
    out = capsys.readouterr().out
    assert "ms/step" in out and "choice:" in out
    assert main(["estimate", "--profile", "summit", "--ranks", "8", "--batch-size", "1",
                 "--sample-bytes", "1"]) == 2
    assert "shipped: frontier, local, perlmutter" in capsys.readouterr().err


def test_estimate_console_script_exit_code():
    r = subprocess.run([sys.executable, "-m", "mdloader_plugin", "estimate", "--ranks", "-1",
                        "--batch-size", "1", "--sample-bytes", "1"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.startswith("mdloader: error:")


@pytest.mark.mpi
def test_calibrate_two_ranks_writes_valid_profile(tmp_path):
    out = tmp_path / "prof.json"
    r = mdloader(2, ["calibrate", "--quick", "--out", str(out)], timeout=240)
    assert r.returncode == 0, r.stderr
    assert "calibrate: [6/6]" in r.stdout and r.stdout.count("wrote ") == 1
    prof = get_profile(str(out))
    assert prof.provenance["ranks"] == 2 and prof.provenance["kind"] == "calibrated"
    assert "Open MPI" in prof.provenance["mpi_library"] or "MPICH" in prof.provenance["mpi_library"]
    assert all(prof.sources[k] for k in prof.params)
    assert prof.sources["coll.t_count"].startswith("calibrate: count arrays at P = 4096 and 65536")
