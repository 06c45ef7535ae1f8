"""``mdloader train FRAMEWORK``: --help teaches (each framework's options), a bad argument is one
line and exit 2, and a config that cannot be read is one line. Trainings on real ranks:
tests/integration/test_hydragnn_mpi.py, test_fairchem_mpi.py and the other integration tests."""

from cli_checks import help_text, one_error_line, one_error_line_of, run_cli

from mdloader_plugin.integrations import FRAMEWORKS


def test_help_names_the_frameworks_and_their_options(capsys):
    help_text(capsys, "train", words=(*FRAMEWORKS, "mpiexec -n 4 mdloader train hydragnn"))
    help_text(capsys, "train", "hydragnn", words=("--config", "--set"))


def test_bad_argument_is_one_line(capsys):
    one_error_line(capsys, ["train"], "FRAMEWORK")
    one_error_line(capsys, ["train", "tensorflow"], "invalid choice", "tensorflow")


def test_unreadable_config_is_one_line(tmp_path):
    r = run_cli("train", "hydragnn", "--config", tmp_path / "none.yaml")
    one_error_line_of(r, "none.yaml", "cannot read the config")
