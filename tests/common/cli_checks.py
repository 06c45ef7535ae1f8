"""What each ``mdloader`` command's test module (``tests/unit/cli/test_<command>.py``) checks
first, in this process (argument parsing starts neither MPI nor torch): ``--help`` teaches (the
usage line, the command's description, its options and an example) and a bad argument is one
``error:`` line, the last one printed, with exit code 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mdloader_plugin.cli import main
from mpirun import ROOT


def help_text(capsys, *command: str, words: tuple = ()) -> str:
    """``mdloader COMMAND --help``: exit 0, stdout starts with the usage of COMMAND and names
    every one of `words` (options, an example); returns the text."""
    with pytest.raises(SystemExit) as exc:
        main([*command, "--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0, out
    assert out.startswith(f"usage: mdloader {' '.join(command)}"), out[:200]
    missing = [w for w in words if w not in out]
    assert not missing, f"--help of {' '.join(command)} lacks {missing}:\n{out}"
    return out


def one_error_line(capsys, argv: list[str], *words: str) -> str:
    """``mdloader ARGV`` (an argument the parser refuses): exit 2 and exactly one ``error:``
    line, the last one of stderr, naming each of `words`; returns that line."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in argv])
    err = capsys.readouterr().err
    return _one_line(exc.value.code, err, words)


def run_cli(*args, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m mdloader_plugin ARGS`` as one process (one rank, no mpiexec), from the
    repository root."""
    return subprocess.run([sys.executable, "-m", "mdloader_plugin", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def one_error_line_of(r: subprocess.CompletedProcess, *words: str) -> str:
    """`r` (from :func:`run_cli`) exited 2 with one ``error:`` line naming each of `words`."""
    return _one_line(r.returncode, r.stderr, words, r.stdout)


def _one_line(code, err: str, words: tuple, out: str = "") -> str:
    lines = [line for line in err.splitlines() if "error:" in line]
    assert code == 2, f"exit {code}:\n{out[-1000:]}\n{err[-2000:]}"
    assert len(lines) == 1 and err.rstrip().splitlines()[-1] == lines[0], err[-2000:]
    missing = [w for w in words if w not in lines[0]]
    assert not missing, f"{lines[0]!r} lacks {missing}"
    return lines[0]
