"""core/log: INFO lines from rank 0 only, warnings from every rank, MDLOADER_LOG_LEVEL wins.

Each case runs in a fresh interpreter (the logger is configured once a process)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from mpirun import ROOT, mpirun

CODE = """
import logging, sys
from mdloader_plugin.core.log import get_logger
log = get_logger({rank})
log.debug("debug line"); log.info("info line"); log.warning("warning line")
assert get_logger() is log and get_logger(0).level == log.level  # the first call decides
print(logging.getLevelName(log.level))
"""


def run(rank="None", **env):
    base = {k: v for k, v in os.environ.items()
            if k not in ("MDLOADER_LOG_LEVEL", "OMPI_COMM_WORLD_RANK", "PMI_RANK")}
    r = subprocess.run([sys.executable, "-c", CODE.format(rank=rank)], capture_output=True,
                       text=True, timeout=60, env={**base, **env}, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), r.stderr.splitlines()


@pytest.mark.parametrize("rank, env, level, lines", [
    ("0", {}, "INFO", ["mdloader: info line", "mdloader: warning line"]),
    ("3", {}, "WARNING", ["mdloader: warning line"]),
    ("None", {}, "INFO", ["mdloader: info line", "mdloader: warning line"]),
    ("None", {"OMPI_COMM_WORLD_RANK": "2"}, "WARNING", ["mdloader: warning line"]),
    ("None", {"PMI_RANK": "1"}, "WARNING", ["mdloader: warning line"]),
    ("None", {"PMI_RANK": "0"}, "INFO", ["mdloader: info line", "mdloader: warning line"]),
    ("2", {"MDLOADER_LOG_LEVEL": "debug"}, "DEBUG",
     ["mdloader: debug line", "mdloader: info line", "mdloader: warning line"]),
    ("0", {"MDLOADER_LOG_LEVEL": "WARNING"}, "WARNING", ["mdloader: warning line"]),
    ("1", {"MDLOADER_LOG_LEVEL": "INFO"}, "INFO", ["mdloader: info line",
                                                    "mdloader: warning line"]),
])
def test_level_by_rank_and_variable(rank, env, level, lines):
    out, err = run(rank, **env)
    assert out == level
    assert err == lines


@pytest.mark.mpi
def test_under_mpi_only_rank_0_prints_info():
    code = ("from mpi4py import MPI; from mdloader_plugin.core.log import get_logger; "
            "r = MPI.COMM_WORLD.rank; log = get_logger(r); "
            "log.info(f'info from {r}'); log.warning(f'warning from {r}')")
    r = mpirun(3, ["-c", code], timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    got = sorted(ln for ln in r.stderr.splitlines() if ln.startswith("mdloader: "))
    assert got == ["mdloader: info from 0", "mdloader: warning from 0",
                   "mdloader: warning from 1", "mdloader: warning from 2"]


def test_bad_level_is_a_config_error_naming_the_variable():
    code = ("from mdloader_plugin.core.log import get_logger\n"
            "from mdloader_plugin.core.errors import ConfigError\n"
            "try:\n    get_logger(0)\nexcept ConfigError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "MDLOADER_LOG_LEVEL": "LOUD"}, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == ("MDLOADER_LOG_LEVEL='LOUD' is not a log level; use DEBUG, INFO, "
                                "WARNING or ERROR, or unset it")
