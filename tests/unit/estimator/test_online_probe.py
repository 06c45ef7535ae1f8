"""auto's online decision (``estimator/online.py``) on real ranks: each backend probed in the
state it will run in (issue 15's biased probe, reproduced by injected timings)."""

import re

import pytest

from mpirun import mpirun

pytestmark = [pytest.mark.mpi]


def test_probe_does_not_measure_collective_beside_onesided_progress_thread():
    r = mpirun(2, ["tests/mpi_scripts/biased_probe.py"], timeout=240,
               env={"MDLOADER_PROGRESS_THREAD": "1", "MDLOADER_COLL_PROGRESS_THREAD": "0"})
    assert r.returncode == 0, r.stderr[-3000:]
    m = re.search(r"biased-probe: kept=(\w+) coll_beside_thread=(\d+)/(\d+) "
                  r"onesided_with_thread=(\d+)/(\d+)", r.stdout)
    assert m, r.stdout[-2000:]
    kept, beside, coll_steps, with_thread, os_steps = m.group(1), *map(int, m.groups()[1:])
    assert coll_steps > 0, "the collective backend was never probed"
    assert beside == 0, (f"{beside} of {coll_steps} collective steps ran beside the one-sided "
                         f"thread; kept {kept}")
    assert with_thread == os_steps, "one-sided steps ran with its progress thread paused"
    assert kept == "onesided", r.stdout[-2000:]
