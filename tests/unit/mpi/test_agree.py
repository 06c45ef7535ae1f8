"""The job's shared decisions: the warning line that names ranks whose inputs differ, and the
decision made once (one process here; MPI jobs: tests/unit/mpi/test_one_decision.py)."""

import pytest

from mdloader_plugin.core.errors import ConfigError
from mdloader_plugin.mpi.agree import compare_inputs, decide_once, digest, rank_text, warning_line


def test_rank_text_spans():
    assert rank_text([0]) == "rank 0"
    assert rank_text([1, 2, 3]) == "ranks 1-3"
    assert rank_text([0, 2, 5, 6, 7]) == "ranks 0,2,5-7"


def test_warning_line_names_every_value_and_its_ranks():
    values = [["a.json", "3"], ["b.json", "3"], ["b.json", "3"], ["b.json", "1"]]
    line = warning_line(["profile", "ranks on the node"], values, "the backend choice")
    assert line == ("MDLOADER-AGREE warning: ranks' inputs to the backend choice differ "
                    "(profile: rank 0 a.json; ranks 1-3 b.json | ranks on the node: ranks 0-2 "
                    "3; rank 3 1); every rank uses rank 0's decision")
    many = warning_line(["x"], [[str(r)] for r in range(10)], "it")
    assert "ranks" not in many.split("(")[1].split(";")[0] and "; and 6 more)" in many


def test_one_process_decides_alone():
    assert decide_once(None, lambda x: x + 1, 1) == 2
    assert compare_inputs(None, {"profile": "a"}) == []
    with pytest.raises(ConfigError):
        decide_once(None, lambda: (_ for _ in ()).throw(ConfigError("bad")))
    assert digest("a") == digest("a") != digest("b") and 0 <= digest("a") < 2**63


@pytest.mark.mpi
def test_on_real_ranks():
    from mpirun import mpirun

    r = mpirun(4, ["tests/mpi_scripts/agree_checks.py"], timeout=120)
    assert r.returncode == 0 and "agree ok" in r.stdout, r.stdout[-2000:] + r.stderr[-3000:]
