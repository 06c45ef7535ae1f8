"""``mdloader calibrate``: --help teaches, a bad argument is one line and exit 2, and 2 real ranks
write a profile that ``estimate`` and ``backend: auto`` can read."""

import pytest
from cli_checks import help_text, one_error_line

from mdloader_plugin import cli
from mdloader_plugin.estimator import get_profile
from mpirun import mdloader


def test_help_names_the_options_and_an_example(capsys):
    help_text(capsys, "calibrate", words=("--out", "--quick", "MDLOADER_PROFILE",
                                           "mpiexec -n 4 mdloader calibrate"))


def test_bad_argument_is_one_line(capsys, tmp_path, monkeypatch):
    one_error_line(capsys, ["calibrate"], "--out")
    monkeypatch.setattr(cli, "_check_launch", lambda: None)  # one process, no launcher here
    for out, words in ((tmp_path / "prof.txt", "must end in .json"),
                       (tmp_path / "no" / "prof.json", "does not exist")):
        assert cli.main(["calibrate", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("mdloader: error:") and words in err[0], err


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
