"""`mdloader estimate` output shapes and errors (calibrate: test_calibrate.py)."""

import json
import subprocess
import sys

from mdloader_plugin.cli import main


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
