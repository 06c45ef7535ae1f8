"""``mdloader check``: --help teaches, a bad argument is one line and exit 2, and on one process
(no mpiexec) a tiny file checks ok with its last line as the help says. Multi-rank runs:
tests/unit/loader/test_verify.py, tests/unit/sources/test_multi_mpi.py."""

from cli_checks import help_text, one_error_line, run_cli


def test_help_names_the_options_and_the_success_line(capsys):
    help_text(capsys, "check", words=("--batch-size", "--epochs", "--backends", "--group-size",
                                       "--sampling", "mpiexec -n 3 mdloader check",
                                       "check ok: P ranks"))


def test_bad_argument_is_one_line(capsys):
    one_error_line(capsys, ["check"], "data")
    one_error_line(capsys, ["check", "d.bp", "--batch-size", "seven"], "--batch-size")


def test_one_process_checks_a_tiny_file(split_file):
    r = run_cli("check", split_file, "--batch-size", 4, "--epochs", 2)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.rstrip().splitlines()[-1].startswith(
        "check ok: 1 ranks, 2 epochs, 30 samples, backends onesided,collective,auto"), r.stdout
