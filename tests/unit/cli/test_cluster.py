"""``mdloader cluster``: --help teaches its four actions, a bad argument is one line and exit 2,
``status`` answers without root, and ``run`` without a command says what to give. Clusters
brought up and used: tests/integration/test_cluster.py (needs root network namespaces)."""

from cli_checks import help_text, one_error_line

from mdloader_plugin.cli import main


def test_help_names_the_actions_and_examples(capsys):
    help_text(capsys, "cluster", words=("up", "run", "down", "status",
                                         "mdloader cluster up --hosts 2"))
    help_text(capsys, "cluster", "up", words=("--hosts", "--ranks-per-host", "--rate"))
    help_text(capsys, "cluster", "run", words=("--mpi", "--timeout", "-n N"))


def test_bad_argument_is_one_line(capsys):
    one_error_line(capsys, ["cluster"], "ACTION")
    one_error_line(capsys, ["cluster", "up", "--hosts", "two", "--ranks-per-host", "2"],
                   "--hosts")
    one_error_line(capsys, ["cluster", "run", "--mpi", "intel", "--", "true"], "--mpi")


def test_status_and_run_without_a_command(capsys):
    assert main(["cluster", "status"]) == 0
    out = capsys.readouterr().out
    assert out.strip(), "status printed nothing"
    assert main(["cluster", "run", "--name", "zz9"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give the command after --" in err[0], err
