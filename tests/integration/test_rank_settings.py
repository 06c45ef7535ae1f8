"""Nothing rank-local steers a collective: settings that decide which collectives a rank enters
or what it fetches are agreed at construction (``mpi.agree.agree_settings``), and ranks that
differ stop with one line naming the setting and the ranks, exit 2 on every rank.

MPMD launches of an own loop (tests/mpi_scripts/rank_settings.py, 3 ranks) under Open MPI
(``-x NAME=VALUE`` a part) and MPICH (``-env NAME VALUE``):

* ``MDLOADER_FETCH_TIMEOUT`` 0 on rank 0 and 30 on ranks 1-2: before, the job hung at start (the
  watchdog's window allocation is collective and only ranks 1-2 entered it);
* the loader's seed and ``HYDRAGNN_MAX_NUM_BATCH`` differing: before, the job ran to its end and
  served some samples twice and others never; now one line names both settings.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from mpirun import ROOT, family_missing, launcher, mpi_env

pytestmark = pytest.mark.mpi

SCRIPT = ROOT / "tests" / "mpi_scripts" / "rank_settings.py"
FIX = ": these settings decide which collectives a rank enters and what it fetches; give"
CASES = {
    "timeout": ({"MDLOADER_FETCH_TIMEOUT": "0"}, {"MDLOADER_FETCH_TIMEOUT": "30"},
                "ranks disagree on MDLOADER_FETCH_TIMEOUT: rank 0 0 (off); ranks 1-2 30" + FIX),
    "seed-and-cap": ({"SEED": "0", "HYDRAGNN_MAX_NUM_BATCH": "2"},
                     {"SEED": "1", "HYDRAGNN_MAX_NUM_BATCH": "3"},
                     "ranks disagree on HYDRAGNN_MAX_NUM_BATCH: rank 0 2; ranks 1-2 3 | seed: "
                     "rank 0 0; ranks 1-2 1" + FIX),
}


def mpmd(family: str, parts: list[tuple[int, dict]]) -> list[str]:
    """``mpiexec -n 1 <env> python -m mpi4py SCRIPT : -n 2 <env> ...`` in the family's flags."""
    cmd = [launcher(family)]
    for i, (n, env) in enumerate(parts):
        cmd += ([":"] if i else []) + ["-n", str(n)]
        for k, v in env.items():
            cmd += ["-x", f"{k}={v}"] if family == "openmpi" else ["-env", k, v]
        cmd += [sys.executable, "-m", "mpi4py", str(SCRIPT)]
    return cmd


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("family", ["openmpi", "mpich"])
def test_ranks_that_differ_stop_in_one_line(family, case):
    if family_missing(family):
        pytest.skip(family_missing(family))
    first, rest, line = CASES[case]
    try:  # a hang (the old behaviour of the timeout case) runs into the limit
        r = subprocess.run(mpmd(family, [(1, first), (2, rest)]), capture_output=True,
                           text=True, timeout=60, cwd=ROOT, env=mpi_env(None, family))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the job hung: {str(exc.stderr or '')[-2000:]}")
    out = r.stdout + r.stderr
    errors = [ln for ln in out.splitlines() if "mdloader: error:" in ln]
    assert r.returncode == 2 and len(errors) == 1, out[-3000:]
    assert errors[0].startswith(f"mdloader: error: {line}"), errors[0]
    assert "served" not in out and "Traceback" not in out, out[-3000:]
