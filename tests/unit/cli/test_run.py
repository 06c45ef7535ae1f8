"""``mdloader run hydragnn SCRIPT``: --help teaches, a bad argument is one line and exit 2, and a
script that is not there is one line naming it. Upstream scripts run to the end:
tests/integration/test_hydragnn_upstream_scripts.py."""

from cli_checks import help_text, one_error_line

from mdloader_plugin.cli import main


def test_help_names_the_framework_and_an_example(capsys):
    help_text(capsys, "run", words=("hydragnn", "--ddstore", "MDLOADER_REPLACE",
                                     "mpiexec -n 4 mdloader run hydragnn"))


def test_bad_argument_is_one_line(capsys):
    one_error_line(capsys, ["run"], "framework")
    one_error_line(capsys, ["run", "pytorch", "train.py"], "invalid choice", "pytorch")


def test_missing_script_is_one_line(tmp_path, capsys):
    assert main(["run", "hydragnn", str(tmp_path / "train.py"), "--inputfile", "x.json"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.py: no such script" in err[0], err
